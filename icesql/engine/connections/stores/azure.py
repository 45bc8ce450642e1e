"""Azure Blob Storage and ADLS Gen2 (``abfs://``, ``abfss://``, ``wasb://``, ``wasbs://``)
through an AZURE connection: an account key, a SAS token, or the default chain (pyarrow's
``AzureFileSystem`` follows it when neither is given).

Locations are read in both spellings: ``abfs://container/path`` (pyiceberg's) and
``abfs://container@account.dfs.core.windows.net/path`` (Iceberg Java's); files are opened
through ``azure_io.AzureFileIO``, pyiceberg's pyarrow FileIO taught the second one (pyiceberg
would pick its fsspec FileIO for these schemes, which needs adlfs and cannot list).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlsplit

from icesql.engine.base.secrets import SecretValues
from icesql.engine.connections.stores.azure_rest import SCHEMES, container_of
from icesql.engine.connections.stores.base import FileIoProperties, ObjectStore
from icesql.errors import ExecutionError
from icesql.plan import AzureConnectionPlan

FILE_IO = "icesql.engine.connections.stores.azure_io.AzureFileIO"

CREDENTIAL_KEYS = (
    "adls.account-key",
    "adls.sas-token",
    "adls.client-id",
    "adls.client-secret",
    "adls.tenant-id",
    "adls.connection-string",
)


def _split(netloc: str, path: str) -> str:
    return f"{container_of(netloc)}{path}"


def _join(fs_path: str, scheme: str, netloc: str) -> str:
    if "@" not in netloc:
        return f"{scheme}://{fs_path}"
    container, _, rest = fs_path.partition("/")
    return f"{scheme}://{container}@{netloc.split('@', 1)[1]}/{rest}"


def file_io(plan: AzureConnectionPlan, sec: SecretValues) -> FileIoProperties:
    props: FileIoProperties = {"py-io-impl": FILE_IO}
    if plan.account_name:
        props["adls.account-name"] = plan.account_name
    key = sec.secret(plan.account_key)
    if key:
        props["adls.account-key"] = key
    token = sec.secret(plan.sas_token)
    if token:
        # pyarrow appends the token to the account's URL as it is: without its '?' the token
        # lands in the path and every request is refused (400 OutOfRangeInput)
        props["adls.sas-token"] = token if token.startswith("?") else "?" + token
    if plan.endpoint:
        # azurite and other emulators: 'http://127.0.0.1:10000/devstoreaccount1'; pyarrow puts
        # the account after the authority itself when the authority is not Azure's
        parts = urlsplit(plan.endpoint)
        for service in ("blob", "dfs"):
            props[f"adls.{service}-storage-authority"] = parts.netloc
            props[f"adls.{service}-storage-scheme"] = parts.scheme or "https"
    return props


def sas_expiry(token: str) -> datetime | None:
    """When a SAS token expires (its ``se`` field), if it says."""
    fields = parse_qs(token.lstrip("?"))
    if "se" not in fields:
        return None
    text = fields["se"][0].replace("Z", "+00:00")
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        return None
    return found if found.tzinfo else found.replace(tzinfo=timezone.utc)


def check_connection(plan: AzureConnectionPlan, sec: SecretValues) -> None:
    """Lists the account's containers. A SAS token for one container (a service SAS, ``sr=``)
    cannot list them: it is checked for its expiry only, and is first used by the sink."""
    from pyarrow import fs as pafs

    from icesql.engine.connections.stores.azure_io import AzureFileIO

    token = sec.secret(plan.sas_token)
    if token:
        expiry = sas_expiry(token)
        if expiry is not None and expiry <= datetime.now(timezone.utc):
            raise ExecutionError(
                f"AZURE connection '{plan.name}': SAS TOKEN expired at {expiry:%Y-%m-%d %H:%M:%S} UTC",
                hint="store a new SAS token: ALTER SECRET name AS '...'",
            )
        if "sr" in parse_qs(token.lstrip("?")):
            return
    filesystem = AzureFileIO(file_io(plan, sec)).fs_by_scheme("abfs", None)
    filesystem.get_file_info(pafs.FileSelector("", recursive=False, allow_not_found=True))


_AZURE_ERROR = re.compile(r"Azure Error: \[(\w+)\] (\d{3})")


def _error_code(text: str) -> tuple[str, str] | None:
    found = _AZURE_ERROR.search(text)
    return (found.group(1), found.group(2)) if found else None


AZURE = ObjectStore(
    name="azure",
    schemes=SCHEMES,
    keyword="AZURE",
    connection_kind="azure",
    file_io=file_io,
    credential_keys=CREDENTIAL_KEYS,
    file_io_impl=FILE_IO,
    validate=check_connection,
    # pyarrow's Azure client (the Azure SDK for C++): "... Azure Error: [AuthorizationFailure] ..."
    failure=re.compile(r"Azure Error|AzureFileSystem|Azure::"),
    check_hint="check ACCOUNT NAME, ACCOUNT KEY or SAS TOKEN and ENDPOINT of the AZURE connection, and the container",
    split=_split,
    join=_join,
    netloc_key=container_of,
    error_code=_error_code,
    auth_codes=frozenset(
        {"AuthorizationFailure", "AuthenticationFailed", "AuthorizationPermissionMismatch", "InvalidAuthenticationInfo"}
    ),
    not_found_codes=frozenset({"ContainerNotFound", "BlobNotFound", "ResourceNotFound", "AccountNotFound"}),
    transient_codes=frozenset({"ServerBusy", "OperationTimedOut", "InternalError"}),
    not_found="container or blob not found",
)
