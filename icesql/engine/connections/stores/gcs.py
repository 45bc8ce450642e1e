"""Google Cloud Storage (``gs://``) through a GCS connection.

Credentials become the FileIO properties pyiceberg's pyarrow FileIO reads (``gcs.*``):

* ``CREDENTIALS = SECRET k`` holding a service-account key file's JSON: icesql signs the JWT
  assertion itself (RS256, ``cryptography``) and trades it at the key's ``token_uri`` for an
  OAuth2 access token, cached until shortly before it expires (as ``aws`` caches an assumed
  role); a gcloud ``authorized_user`` file's refresh token is traded the same way. The token,
  never the key, goes to the FileIO (``gcs.oauth2.token`` and its expiry);
* no CREDENTIALS and an ``ENDPOINT`` (an emulator such as fake-gcs-server): anonymous. pyarrow
  is handed a placeholder token, since pyiceberg never asks it for anonymous access and without
  a token it looks for Google credentials for minutes;
* neither: Google's default chain (``GOOGLE_APPLICATION_CREDENTIALS``, the metadata server),
  which pyarrow follows itself.

The token exchange is tested against a local token endpoint that checks the assertion's
signature with the key's public half; Google's own endpoint and the default chain are untested
here (no Google access on the test machines).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from icesql.engine.base.secrets import SecretValues, remember_secret
from icesql.engine.connections.stores.base import FileIoProperties, ObjectStore
from icesql.errors import ExecutionError
from icesql.plan import GcsConnectionPlan

SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
GOOGLE_ENDPOINT = "https://storage.googleapis.com"
ANONYMOUS_TOKEN = "anonymous"  # what an emulator is sent: it checks no token
_FAR_FUTURE_MS = str(4102444800000)  # 2100-01-01: a placeholder token never expires

CREDENTIAL_KEYS = ("gcs.oauth2.token", "gcs.oauth2.token-expires-at")

_TOKENS: dict[tuple[str, str, str], tuple[float, str, float]] = {}  # -> (renew at, token, expiry)
_TOKENS_LOCK = threading.Lock()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _key_file(plan: GcsConnectionPlan, text: str) -> dict[str, Any]:
    try:
        info = json.loads(text)
    except ValueError:
        info = None
    kind = info.get("type") if isinstance(info, dict) else None
    if kind not in ("service_account", "authorized_user"):
        raise ExecutionError(
            f"GCS connection '{plan.name}': CREDENTIALS is not a Google key file",
            hint="store a service-account key file's JSON (type 'service_account') or gcloud's "
            "application default credentials (type 'authorized_user') as the SECRET",
        )
    return info


def _assertion(info: dict[str, Any], token_uri: str, now: float) -> str:
    """The signed JWT a service account trades for an access token (RFC 7523)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    header = {"alg": "RS256", "typ": "JWT"}
    if info.get("private_key_id"):
        header["kid"] = info["private_key_id"]
    claims = {"iss": info["client_email"], "scope": SCOPE, "aud": token_uri, "iat": int(now), "exp": int(now) + 3600}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    key = serialization.load_pem_private_key(info["private_key"].encode(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"


def _exchange(token_uri: str, form: dict[str, str]) -> dict[str, Any]:
    body = urllib.parse.urlencode(form).encode()
    request = urllib.request.Request(
        token_uri, data=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310 - the key's token_uri
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def _oauth_error(e: Any) -> str:
    """The OAuth2 ``error`` code of a refusal (never its description, which may quote input)."""
    try:
        code = json.loads(e.read()).get("error")
    except Exception:  # noqa: BLE001 - a refusal without a JSON body
        code = None
    return str(code) if isinstance(code, str) and code.replace("_", "").isalnum() else "refused"


def access_token(plan: GcsConnectionPlan, sec: SecretValues) -> tuple[str, float]:
    """(OAuth2 access token, its expiry in seconds since the epoch) for the connection's key
    file; cached until 5 minutes (or a quarter of a shorter life) before it expires."""
    text = sec.secret(plan.credentials) or ""
    info = _key_file(plan, text)
    token_uri = info.get("token_uri") or GOOGLE_TOKEN_URI
    who = info.get("client_email") or info.get("client_id") or ""
    cache_key = (plan.name, who, token_uri)
    now = time.time()
    with _TOKENS_LOCK:
        hit = _TOKENS.get(cache_key)
    if hit and hit[0] > now:
        return hit[1], hit[2]
    if info["type"] == "service_account":
        form = {
            "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
            "assertion": _assertion(info, token_uri, now),
        }
    else:
        secret = info.get("client_secret", "")
        remember_secret(secret)
        remember_secret(info.get("refresh_token", ""))
        form = {
            "grant_type": "refresh_token",
            "client_id": info.get("client_id", ""),
            "client_secret": secret,
            "refresh_token": info.get("refresh_token", ""),
        }
    try:
        answer = _exchange(token_uri, form)
    except urllib.error.HTTPError as e:
        raise ExecutionError(
            f"GCS connection '{plan.name}': {token_uri} refused CREDENTIALS (HTTP {e.code}: {_oauth_error(e)})",
            hint="check that the key file is current: a deleted or rotated key, or a revoked "
            "refresh token, is refused",
        ) from None
    token = str(answer["access_token"])
    remember_secret(token)
    expiry = now + float(answer.get("expires_in", 3600))
    renew = expiry - min(300.0, (expiry - now) / 4)
    with _TOKENS_LOCK:
        _TOKENS[cache_key] = (renew, token, expiry)
    return token, expiry


def forget_tokens() -> None:
    """Drop every cached access token (the next call trades the key again)."""
    with _TOKENS_LOCK:
        _TOKENS.clear()


def file_io(plan: GcsConnectionPlan, sec: SecretValues) -> FileIoProperties:
    props: FileIoProperties = {}
    if plan.project:
        props["gcs.project-id"] = plan.project
    if plan.endpoint:
        props["gcs.service.host"] = plan.endpoint.rstrip("/")
    if plan.credentials is not None:
        token, expiry = access_token(plan, sec)
        props["gcs.oauth2.token"] = token
        props["gcs.oauth2.token-expires-at"] = str(int(expiry * 1000))
    elif plan.endpoint:
        props["gcs.oauth2.token"] = ANONYMOUS_TOKEN
        props["gcs.oauth2.token-expires-at"] = _FAR_FUTURE_MS
    return props


def check_connection(plan: GcsConnectionPlan, sec: SecretValues) -> None:
    """Lists the project's buckets (needs PROJECT), else gets a token (CREDENTIALS), through the
    storage JSON API of ENDPOINT (or Google's)."""
    props = file_io(plan, sec)
    if not plan.project:
        if plan.credentials is None and not plan.endpoint:
            from pyarrow import fs as pafs

            pafs.GcsFileSystem()  # the default chain: fails here when there is none
        return
    base = (plan.endpoint or GOOGLE_ENDPOINT).rstrip("/")
    url = f"{base}/storage/v1/b?project={urllib.parse.quote(plan.project)}&maxResults=1"
    headers = {}
    token = props.get("gcs.oauth2.token")
    if token and token != ANONYMOUS_TOKEN:
        headers["Authorization"] = f"Bearer {token}"
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=20):  # noqa: S310
        pass


_GCS_STATUS = re.compile(r"google::cloud::Status\((\w+):.*?(?:http_status_code=(\d{3}))?", re.DOTALL)


def _error_code(text: str) -> tuple[str, str] | None:
    found = _GCS_STATUS.search(text)
    if not found:
        return None
    status = re.search(r"http_status_code=(\d{3})", text[found.start() :])
    return found.group(1), status.group(1) if status else ""


GCS = ObjectStore(
    name="gcs",
    schemes=("gs", "gcs"),
    keyword="GCS",
    connection_kind="gcs",
    file_io=file_io,
    credential_keys=CREDENTIAL_KEYS,
    validate=check_connection,
    # pyarrow's GCS client (google-cloud-cpp): "google::cloud::Status(PERMISSION_DENIED: ...)"
    failure=re.compile(r"google::cloud|GCS Error|gcs_internal"),
    check_hint="check CREDENTIALS, PROJECT and ENDPOINT of the GCS connection, and the bucket",
    error_code=_error_code,
    auth_codes=frozenset({"PERMISSION_DENIED", "UNAUTHENTICATED"}),
    not_found_codes=frozenset({"NOT_FOUND"}),
    transient_codes=frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "INTERNAL", "ABORTED"}),
)
