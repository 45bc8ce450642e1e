"""The Azure Blob request icesql makes itself: Delete Blob, one request per file.

pyarrow's ``AzureFileSystem`` deletes a blob of an account without a hierarchical namespace in
four requests (a lease on the blob, a directory marker for its parent, the delete, the lease's
release), and the release of a lease on a blob just deleted is answered 404, which its SDK
sometimes retries for 7-25 s (about one delete in fifty against azurite; the expiry of a small
table on Azure took 40-75 s instead of about 5). A table's files need none of that: an Iceberg
table has no directories to keep.

Requests are signed with the account key (Shared Key) or carry the SAS token; with neither
(the default credential chain) ``BlobService.from_properties`` gives None and pyarrow deletes.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

API_VERSION = "2021-08-06"
_TRANSIENT = frozenset({408, 429, 500, 502, 503, 504})
_ATTEMPTS = 3
_TIMEOUT = 30.0
_CODE = re.compile(rb"<Code>(\w+)</Code>")


def blob_base_url(scheme: str, authority: str, account: str) -> str:
    """The account's Blob endpoint as pyarrow builds it: ``https://account.blob.core.windows.net/``
    for an authority that starts with '.', else ``scheme://authority/account/`` (an emulator)."""
    if authority.startswith("."):
        return f"{scheme}://{account}{authority}/"
    return f"{scheme}://{authority}/{account}/"


def shared_key_headers(
    method: str, url: str, *, account: str, key: str, headers: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``headers`` with ``x-ms-date``, ``x-ms-version`` and the Shared Key ``Authorization`` for
    a Blob-service request (https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key)."""
    parts = urllib.parse.urlsplit(url)
    hdrs = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": API_VERSION, **(headers or {})}
    lower = {k.lower(): v for k, v in hdrs.items()}
    canon_headers = "".join(f"{k}:{v.strip()}\n" for k, v in sorted(lower.items()) if k.startswith("x-ms-"))
    canon_resource = f"/{account}{parts.path}"
    query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    for name in sorted(query, key=str.lower):
        canon_resource += f"\n{name.lower()}:{','.join(sorted(query[name]))}"
    fields = (
        "content-encoding", "content-language", "content-length", "content-md5", "content-type",
        "date", "if-modified-since", "if-match", "if-none-match", "if-unmodified-since", "range",
    )  # fmt: skip
    length = lower.get("content-length", "")
    signed = [method, *(("" if f == "content-length" and length == "0" else lower.get(f, "")) for f in fields)]
    string_to_sign = "\n".join(signed) + "\n" + canon_headers + canon_resource
    digest = hmac.new(base64.b64decode(key), string_to_sign.encode(), hashlib.sha256).digest()
    hdrs["Authorization"] = f"SharedKey {account}:{base64.b64encode(digest).decode()}"
    return hdrs


@dataclass(frozen=True)
class BlobService:
    """One account's Blob endpoint with the key or SAS token that signs its requests."""

    base_url: str  # ends with '/'
    account: str
    key: str | None = field(default=None, repr=False)
    sas: str | None = field(default=None, repr=False)  # with its leading '?'

    @classmethod
    def from_properties(cls, props: Mapping[str, str], account: str | None = None) -> BlobService | None:
        """From a FileIO's ``adls.*`` properties (``account``: when they name none); None when
        they hold neither an account key nor a SAS token."""
        account = props.get("adls.account-name") or account
        key, sas = props.get("adls.account-key"), props.get("adls.sas-token")
        if not account or not (key or sas):
            return None
        base = blob_base_url(
            props.get("adls.blob-storage-scheme") or "https",
            props.get("adls.blob-storage-authority") or ".blob.core.windows.net",
            account,
        )
        if sas and not sas.startswith("?"):
            sas = "?" + sas
        return cls(base, account, key or None, None if key else sas)

    def delete(self, container: str, name: str) -> None:
        """Delete Blob ``container/name``: FileNotFoundError when it is not there, OSError saying
        ``Azure Error: [Code] status`` (what pyarrow's errors say) for any other refusal."""
        url = self.base_url + urllib.parse.quote(f"{container}/{name}")
        status, code, reason = self._request("DELETE", url)
        if status in (200, 202):
            return
        message = f"Delete Blob failed for '{url}'. Azure Error: [{code}] {status} {reason}"
        if status == 404:
            raise FileNotFoundError(message)
        raise OSError(message)

    def _request(self, method: str, url: str) -> tuple[int, str, str]:
        """(status, error code, reason) of ``method url``, a transient failure tried again
        (3 tries); no exception for an HTTP error status."""
        opener = urllib.request.build_opener()
        for attempt in range(1, _ATTEMPTS + 1):
            if self.key:
                target, headers = url, shared_key_headers(method, url, account=self.account, key=self.key)
            else:
                target, headers = url + (self.sas or ""), {"x-ms-version": API_VERSION}
            try:
                with opener.open(urllib.request.Request(target, method=method, headers=headers), timeout=_TIMEOUT) as r:
                    return r.status, "", r.reason
            except urllib.error.HTTPError as e:
                body = e.read()
                found = _CODE.search(body)
                code = e.headers.get("x-ms-error-code") or (found.group(1).decode() if found else "")
                if e.code not in _TRANSIENT or attempt == _ATTEMPTS:
                    return e.code, code or "Unknown", str(e.reason)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                if attempt == _ATTEMPTS:
                    raise OSError(f"Delete Blob failed for '{url}': {getattr(e, 'reason', e)}") from None
            time.sleep(0.2 * 4 ** (attempt - 1))
        raise AssertionError("unreachable")


# an Azure path's schemes, and its netloc: ``container`` or ``container@account.<host>``
SCHEMES = ("abfs", "abfss", "wasb", "wasbs")


def container_of(netloc: str) -> str:
    """``container`` of ``container`` or ``container@account.dfs.core.windows.net``."""
    return netloc.split("@", 1)[0]


def account_of(netloc: str) -> str | None:
    """The account a ``container@account.<host>`` netloc names (None without one)."""
    if "@" not in netloc:
        return None
    return netloc.split("@", 1)[1].split(".", 1)[0] or None


__all__ = ["API_VERSION", "SCHEMES", "BlobService", "account_of", "blob_base_url", "container_of", "shared_key_headers"]
