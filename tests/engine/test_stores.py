"""The object-store registry (``icesql.engine.connections.stores``): schemes, connections' FileIO
properties, layering, the one filesystem adapter, and GCS's token exchange.

The GCS token exchange runs against a local token endpoint that checks the RS256 assertion with
the key's public half (real cryptography); Google's own endpoint cannot be reached from the test
machines. The stores themselves (fake-gcs-server, azurite, weed) are exercised in
``tests/stores`` and ``tests/e2e``.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.base.secrets import SecretValues, scrub
from icesql.engine.connections import stores
from icesql.engine.connections.fileio import IoProperties, connection_properties, io_properties
from icesql.engine.connections.stores import gcs as gcs_store
from icesql.engine.iceberg.table_files import path_key, relative_to
from icesql.errors import IcesqlError
from icesql.plan import AwsConnectionPlan, AzureConnectionPlan, GcsConnectionPlan, SecretName


class Secrets(dict[str, str]):
    def __call__(self, name: str) -> str:
        return self[name]


# --------------------------------------------------------------------------- the registry


@pytest.mark.parametrize(
    "location, store",
    [
        ("s3://b/k", "s3"),
        ("s3a://b/k", "s3"),
        ("gs://b/k", "gcs"),
        ("abfs://c/k", "azure"),
        ("abfss://c@acct.dfs.core.windows.net/k", "azure"),
        ("wasbs://c@acct.blob.core.windows.net/k", "azure"),
        ("file:///tmp/x", "file"),
        ("/tmp/x", "file"),
        ("relative/dir", "file"),
        ("hdfs://nn:8020/x", "hdfs"),
    ],
)
def test_a_location_finds_its_store(location: str, store: str) -> None:
    found = stores.for_location(location)
    assert found is not None and found.name == store


def test_each_storage_connection_has_one_store() -> None:
    assert stores.for_connection(AwsConnectionPlan(name="a")).name == "s3"
    assert stores.for_connection(GcsConnectionPlan(name="g")).name == "gcs"
    assert stores.for_connection(AzureConnectionPlan(name="z", account_name="acct")).name == "azure"
    assert stores.for_connection(GcsConnectionPlan(name="g")).label(GcsConnectionPlan(name="g")) == "GCS connection 'g'"
    with pytest.raises(TypeError):
        stores.for_connection(object())


def test_layering_replaces_each_stores_credentials_as_a_unit() -> None:
    base = {
        "s3.access-key-id": "AK",
        "s3.secret-access-key": "SK",
        "s3.session-token": "T",
        "s3.endpoint": "http://s3",
        "adls.account-name": "acct",
        "adls.sas-token": "sv=old",
    }
    top = {"adls.account-key": "KEY"}
    out = stores.layer(base, top)
    assert "adls.sas-token" not in out and out["adls.account-key"] == "KEY"  # Azure's replaced
    assert out["s3.session-token"] == "T" and out["s3.endpoint"] == "http://s3"  # S3's kept
    out = stores.layer(out, {"s3.access-key-id": "AK2", "s3.secret-access-key": "SK2"})
    assert "s3.session-token" not in out and out["adls.account-key"] == "KEY"


def test_path_key_folds_each_stores_spellings() -> None:
    assert path_key("s3a://b//x/y") == path_key("s3://b/x/y")
    assert path_key("abfss://c@acct.dfs.core.windows.net/x") == path_key("abfs://c/x")
    assert path_key("wasbs://c@acct.blob.core.windows.net/x") == "abfs://c/x"
    assert path_key("gcs://b/x") == path_key("gs://b/x")
    assert path_key("/tmp/x") == path_key("file:///tmp/x")
    assert relative_to("abfs://c@acct.dfs.core.windows.net/wh/t/data/f", "abfs://c/wh/t") == "data/f"
    assert path_key("gs://a/x") != path_key("gs://b/x")
    assert path_key("hdfs://nn1:8020/x") != path_key("hdfs://nn2:8020/x")  # the namenode stays


def test_filesystem_paths_and_uris_round_trip() -> None:
    from pyarrow import fs as pafs

    class Fake:
        fs = pafs.LocalFileSystem()

    azure = stores.Filesystem(Fake.fs, stores.for_scheme("abfs"), "abfs://c@acct.dfs.core.windows.net/wh")  # type: ignore[arg-type]
    assert azure.path("abfs://c@acct.dfs.core.windows.net/wh/f.parquet") == "c/wh/f.parquet"
    assert azure.uri("c/wh/f.parquet") == "abfs://c@acct.dfs.core.windows.net/wh/f.parquet"
    short = stores.Filesystem(Fake.fs, stores.for_scheme("abfs"), "abfs://c/wh")  # type: ignore[arg-type]
    assert short.uri("c/wh/f") == "abfs://c/wh/f"
    gs = stores.Filesystem(Fake.fs, stores.for_scheme("gs"), "gs://b/p")  # type: ignore[arg-type]
    assert gs.path("gs://b/p/x") == "b/p/x" and gs.uri("b/p/x") == "gs://b/p/x"
    hdfs = stores.Filesystem(Fake.fs, stores.for_scheme("hdfs"), "hdfs://nn:8020/wh")  # type: ignore[arg-type]
    assert hdfs.path("hdfs://nn:8020/wh/x") == "/wh/x" and hdfs.uri("/wh/x") == "hdfs://nn:8020/wh/x"
    local = stores.filesystem({}, "/tmp/somewhere")
    assert local.path("/tmp/somewhere/x") == "/tmp/somewhere/x" and local.uri("/a") == "/a"


def test_the_local_filesystem_lists_and_a_file_uri_stays_a_uri(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.json").write_text("{}")
    flat = sorted(f.location for f in stores.filesystem({}, str(tmp_path)).list(str(tmp_path), recursive=False))
    assert flat == [str(tmp_path / "a.json")]
    uri = tmp_path.as_uri()
    deep = sorted(f.location for f in stores.filesystem({}, uri).list(uri, recursive=True))
    assert deep == [(tmp_path / "a.json").as_uri(), (tmp_path / "sub" / "b.json").as_uri()]


def test_azure_locations_open_through_icesqls_file_io() -> None:
    from icesql.engine.connections.stores.azure_io import AzureFileIO

    io = stores.load_file_io({"adls.account-name": "acct"}, "abfs://c/x")
    assert isinstance(io, AzureFileIO)  # not pyiceberg's fsspec choice (adlfs is not installed)
    assert io.parse_location("abfss://c@acct.dfs.core.windows.net/wh/f") == (
        "abfss",
        "c@acct.dfs.core.windows.net",
        "c/wh/f",
    )
    assert io.parse_location("abfs://c/wh/f") == ("abfs", "c", "c/wh/f")
    # other schemes are pyiceberg's choice, as before
    assert type(stores.load_file_io({}, "s3://b/x")).__name__ == "PyArrowFileIO"


def test_a_failure_names_its_store() -> None:
    assert stores.failing_store("IOError: AWS Error ACCESS_DENIED during PutObject").name == "s3"  # type: ignore[union-attr]
    assert stores.failing_store("google::cloud::Status(PERMISSION_DENIED: ...)").name == "gcs"  # type: ignore[union-attr]
    assert stores.failing_store("Azure Error: [AuthorizationFailure] 403").name == "azure"  # type: ignore[union-attr]
    assert stores.failing_store("java.lang.OutOfMemoryError") is None


# --------------------------------------------------------------------------- connections' properties


def test_azure_connection_properties() -> None:
    plan = AzureConnectionPlan(
        name="z",
        account_name="devstoreaccount1",
        account_key=SecretName("k"),
        endpoint="http://127.0.0.1:10000/devstoreaccount1",
    )
    props = connection_properties(plan, secrets=Secrets(k="the-key=="))
    assert props["adls.account-name"] == "devstoreaccount1"
    assert props["adls.account-key"] == "the-key=="
    assert props["adls.blob-storage-authority"] == "127.0.0.1:10000"
    assert props["adls.blob-storage-scheme"] == "http"
    assert props["adls.dfs-storage-authority"] == "127.0.0.1:10000"
    assert props["py-io-impl"] == "icesql.engine.connections.stores.azure_io.AzureFileIO"
    assert "the-key" not in repr(props)
    sas = AzureConnectionPlan(name="z", account_name="a", sas_token=SecretName("t"))
    props = connection_properties(sas, secrets=Secrets(t="sv=2024&sig=abc"))
    assert props["adls.sas-token"] == "?sv=2024&sig=abc" and "adls.account-key" not in props  # pyarrow's form
    assert "sig=abc" not in repr(props)
    default = connection_properties(AzureConnectionPlan(name="z", account_name="a"), secrets=Secrets())
    assert set(default) == {"adls.account-name", "py-io-impl"}  # the default chain: pyarrow's


def test_gcs_emulator_is_anonymous_and_no_endpoint_is_the_default_chain() -> None:
    emulator = GcsConnectionPlan(name="g", project="p", endpoint="http://127.0.0.1:4443/")
    props = connection_properties(emulator, secrets=Secrets())
    assert props["gcs.service.host"] == "http://127.0.0.1:4443"
    assert props["gcs.project-id"] == "p"
    assert props["gcs.oauth2.token"] == gcs_store.ANONYMOUS_TOKEN  # pyarrow asks Google for nothing
    assert int(props["gcs.oauth2.token-expires-at"]) > time.time() * 1000
    assert connection_properties(GcsConnectionPlan(name="g", project="p"), secrets=Secrets()) == {"gcs.project-id": "p"}


def test_sink_storage_layers_over_the_catalogs() -> None:
    catalog_side = AzureConnectionPlan(name="cat", account_name="acct", sas_token=SecretName("t"))
    sink_side = AzureConnectionPlan(name="snk", account_name="acct", account_key=SecretName("k"))
    props = io_properties(catalog=(None, catalog_side), sink=(None, sink_side), secrets=Secrets(t="?sv=1", k="KEY"))
    assert props["adls.account-key"] == "KEY" and "adls.sas-token" not in props
    assert isinstance(props, IoProperties)


# --------------------------------------------------------------------------- GCS: the token exchange


def _key_pair() -> tuple[str, Any]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return pem, key.public_key()


def _unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class _TokenEndpoint:
    """A local OAuth2 token endpoint: checks a service account's RS256 assertion with its public
    key (or an authorized user's refresh token) and hands out numbered tokens."""

    def __init__(self, public_key: Any, lifetime: int = 3600) -> None:
        self.public_key = public_key
        self.lifetime = lifetime
        self.calls: list[dict[str, str]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                form = dict(urllib.parse.parse_qsl(body))
                endpoint.calls.append(form)
                ok = endpoint.check(form)
                answer = (
                    {"access_token": f"ya29.token-{len(endpoint.calls)}", "expires_in": endpoint.lifetime}
                    if ok
                    else {"error": "invalid_grant"}
                )
                data = json.dumps(answer).encode()
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_port}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def check(self, form: dict[str, str]) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        if form.get("grant_type") == "refresh_token":
            return form.get("refresh_token") == "1//refresh" and form.get("client_secret") == "csecret"
        header, claims, signature = form["assertion"].split(".")
        try:
            self.public_key.verify(
                _unb64(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature:
            return False
        c = json.loads(_unb64(claims))
        return c["aud"] == self.uri and c["iss"] == "writer@p.iam.gserviceaccount.com" and c["exp"] > time.time()


@pytest.fixture
def token_endpoint() -> Iterator[tuple[_TokenEndpoint, str]]:
    pem, public = _key_pair()
    endpoint = _TokenEndpoint(public)
    gcs_store.forget_tokens()
    yield endpoint, pem
    endpoint.server.shutdown()
    gcs_store.forget_tokens()


def _service_account(pem: str, uri: str) -> str:
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "p",
            "private_key_id": "kid1",
            "private_key": pem,
            "client_email": "writer@p.iam.gserviceaccount.com",
            "token_uri": uri,
        }
    )


def test_a_service_account_key_is_traded_for_a_token_once(token_endpoint: tuple[_TokenEndpoint, str]) -> None:
    endpoint, pem = token_endpoint
    plan = GcsConnectionPlan(name="g", project="p", credentials=SecretName("sa"))
    secrets = Secrets(sa=_service_account(pem, endpoint.uri))
    props = connection_properties(plan, secrets=secrets)
    assert props["gcs.oauth2.token"] == "ya29.token-1"
    assert abs(int(props["gcs.oauth2.token-expires-at"]) / 1000 - (time.time() + 3600)) < 60
    assert "BEGIN PRIVATE KEY" not in json.dumps(dict(props))  # the key never reaches a FileIO
    assert "ya29" not in repr(props)
    assert scrub("token ya29.token-1 leaked") == "token ******** leaked"  # remembered for masking
    again = connection_properties(plan, secrets=secrets)
    assert again["gcs.oauth2.token"] == "ya29.token-1" and len(endpoint.calls) == 1  # cached


def test_a_short_lived_token_is_renewed_before_it_expires(token_endpoint: tuple[_TokenEndpoint, str]) -> None:
    endpoint, pem = token_endpoint
    endpoint.lifetime = 2  # renewed a quarter of its life before expiry
    plan = GcsConnectionPlan(name="g", credentials=SecretName("sa"))
    secrets = Secrets(sa=_service_account(pem, endpoint.uri))
    first = connection_properties(plan, secrets=secrets)["gcs.oauth2.token"]
    time.sleep(1.6)
    assert connection_properties(plan, secrets=secrets)["gcs.oauth2.token"] != first


def test_a_wrong_key_is_refused_in_one_line(token_endpoint: tuple[_TokenEndpoint, str]) -> None:
    endpoint, _ = token_endpoint
    other_pem, _ = _key_pair()  # not the key the endpoint knows
    plan = GcsConnectionPlan(name="g", credentials=SecretName("sa"))
    with pytest.raises(IcesqlError) as err:
        connection_properties(plan, secrets=Secrets(sa=_service_account(other_pem, endpoint.uri)))
    text = str(err.value)
    assert err.value.message.startswith("GCS connection 'g': ") and "\n" not in err.value.message
    assert "refused CREDENTIALS (HTTP 400: invalid_grant)" in err.value.message
    assert "PRIVATE KEY" not in text and "MII" not in text


def test_an_authorized_user_refresh_token_is_traded(token_endpoint: tuple[_TokenEndpoint, str]) -> None:
    endpoint, _ = token_endpoint
    info = {
        "type": "authorized_user",
        "client_id": "cid",
        "client_secret": "csecret",
        "refresh_token": "1//refresh",
        "token_uri": endpoint.uri,
    }
    plan = GcsConnectionPlan(name="g", credentials=SecretName("adc"))
    props = connection_properties(plan, secrets=Secrets(adc=json.dumps(info)))
    assert props["gcs.oauth2.token"].startswith("ya29.")
    assert "csecret" not in scrub("csecret 1//refresh")


def test_credentials_that_are_not_a_key_file_say_so() -> None:
    plan = GcsConnectionPlan(name="g", credentials=SecretName("sa"))
    with pytest.raises(IcesqlError) as err:
        gcs_store.file_io(plan, SecretValues(Secrets(sa="not json at all: hunter2")))
    assert "CREDENTIALS is not a Google key file" in str(err.value)
    assert "hunter2" not in str(err.value) and "service-account" in (err.value.hint or "")


def test_a_file_uri_source_lists_plain_paths_as_before(tmp_path: Path) -> None:
    """A FILES source's file log knows the files it read by the names its listing gave: a local
    file by its plain path, whether the source says '/dir' or 'file:///dir'."""
    from icesql.engine.connections.stores.location import Location

    (tmp_path / "a.json").write_text("{}")
    for source in (str(tmp_path), tmp_path.as_uri()):
        assert [f.path for f in Location(source).list()] == [str(tmp_path / "a.json")]


def test_azure_deletes_go_to_the_accounts_blob_endpoint() -> None:
    from icesql.engine.connections.stores.azure_rest import BlobService, blob_base_url

    assert blob_base_url("https", ".blob.core.windows.net", "acct") == "https://acct.blob.core.windows.net/"
    assert blob_base_url("http", "127.0.0.1:10000", "devstoreaccount1") == "http://127.0.0.1:10000/devstoreaccount1/"
    # Iceberg Java's spelling names the account; a key signs, else the SAS token rides along
    service = BlobService.from_properties({"adls.account-key": "a2V5"}, account="acct")
    assert service is not None and service.base_url == "https://acct.blob.core.windows.net/"
    assert (service.key, service.sas) == ("a2V5", None)
    sas = BlobService.from_properties({"adls.account-name": "a", "adls.sas-token": "?sv=1&sig=x"})
    assert sas is not None and (sas.key, sas.sas) == (None, "?sv=1&sig=x")
    assert "sig" not in repr(sas)
    bare = BlobService.from_properties({"adls.account-name": "a", "adls.sas-token": "sv=1&sig=x"})
    assert bare is not None and bare.sas == "?sv=1&sig=x"  # a token given without its '?'
    # the default chain (no key, no token): pyarrow deletes, with the chain's credentials
    assert BlobService.from_properties({"adls.account-name": "a"}) is None
    assert BlobService.from_properties({"adls.account-key": "a2V5"}) is None  # no account at all
