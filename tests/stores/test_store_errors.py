"""What a user meets when a GCS or AZURE connection is wrong, against the real emulators: one line
naming the connection and the cause, a hint, and no secret anywhere; and VALIDATE CONNECTION.

Not reachable here: Google's and Azure's own authentication (the emulators check no GCS token,
and azurite checks account keys and SAS signatures, which these tests use); the GCS token
exchange with a wrong key is tested against a local token endpoint in tests/engine/test_stores.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icesql.errors import IcesqlError
from icesql.session import Session
from tests.support.azurite import Azurite
from tests.support.gcs import FakeGcs


def _fails(session: Session, sql: str) -> IcesqlError:
    with pytest.raises(IcesqlError) as err:
        session.execute(sql)
    assert "\n" not in err.value.message and err.value.hint
    return err.value


def _run_fails(session: Session, sink: str) -> IcesqlError:
    with pytest.raises(IcesqlError) as err:
        session.run(once=True, sinks=[sink])
    assert "\n" not in err.value.message and err.value.hint
    return err.value


@pytest.mark.azure
def test_azure_wrong_key_expired_sas_missing_container(azurite: Azurite, tmp_path: Path) -> None:
    container = "errors-landing"
    azurite.create_container(container)
    session = Session(home=tmp_path / "home")
    wrong = "QUJD" + azurite.account_key[4:]
    err = _fails(
        session,
        f"CREATE CONNECTION a TO AZURE (ACCOUNT NAME = '{azurite.account_name}', ACCOUNT KEY = '{wrong}', "
        f"ENDPOINT = '{azurite.endpoint}')",
    )
    assert err.message.startswith("AZURE connection 'a': cannot validate at ")
    assert "refused the credentials (AuthorizationFailure, HTTP 403)" in err.message
    assert wrong not in str(err) and "ACCOUNT KEY" in (err.hint or "")

    expired = azurite.sas_token(container, hours=-1)
    err = _fails(
        session,
        f"CREATE CONNECTION a TO AZURE (ACCOUNT NAME = '{azurite.account_name}', SAS TOKEN = '{expired}', "
        f"ENDPOINT = '{azurite.endpoint}')",
    )
    assert "SAS TOKEN expired at" in err.message and "sig=" not in str(err)

    session.execute(f"CREATE SECRET k AS '{azurite.account_key}'")
    session.execute(
        f"CREATE CONNECTION a TO AZURE (ACCOUNT NAME = '{azurite.account_name}', ACCOUNT KEY = SECRET k, "
        f"ENDPOINT = '{azurite.endpoint}')"
    )
    assert session.execute("VALIDATE CONNECTION a")[-1].message == "connection 'a' is valid"
    fs = azurite.pyarrow_fs()
    with fs.open_output_stream(f"{container}/in/x.json") as out:
        out.write(json.dumps({"id": 1}).encode())
    session.execute(
        f"""CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'sql', URI = 'sqlite:///{tmp_path}/c.db',
              WAREHOUSE = 'abfs://no-such-container/wh', AZURE CONNECTION = a);
            CREATE SOURCE src FROM FILES 'abfs://{container}/in/' (FORMAT = 'json', SCHEMA = 'id BIGINT', AZURE CONNECTION = a);
            CREATE SINK snk FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't')"""
    )
    err = _run_fails(session, "snk")
    assert "AZURE connection 'a'" in err.message
    assert "container or blob not found (ContainerNotFound, HTTP 404)" in err.message
    assert azurite.account_key not in str(err)
    session.close()


@pytest.mark.gcs
def test_gcs_missing_bucket_and_validate(fake_gcs: FakeGcs, tmp_path: Path) -> None:
    session = Session(home=tmp_path / "home")
    session.execute(f"CREATE CONNECTION g TO GCS (PROJECT = '{fake_gcs.project}', ENDPOINT = '{fake_gcs.endpoint}')")
    assert session.execute("VALIDATE CONNECTION g")[-1].message == "connection 'g' is valid"
    fake_gcs.create_bucket("errors-landing")
    with fake_gcs.pyarrow_fs().open_output_stream("errors-landing/in/x.json") as out:
        out.write(json.dumps({"id": 1}).encode())
    session.execute(
        f"""CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'sql', URI = 'sqlite:///{tmp_path}/c.db',
              WAREHOUSE = 'gs://no-such-bucket/wh', GCS CONNECTION = g);
            CREATE SOURCE src FROM FILES 'gs://errors-landing/in/' (FORMAT = 'json', SCHEMA = 'id BIGINT', GCS CONNECTION = g);
            CREATE SINK snk FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't')"""
    )
    err = _run_fails(session, "snk")
    assert "GCS connection 'g'" in err.message and "not found (NOT_FOUND" in err.message
    assert "PROJECT" in (err.hint or "")
    # an endpoint nobody serves: VALIDATE says so in one line
    session.execute("CREATE CONNECTION dead TO GCS (PROJECT = 'p', ENDPOINT = 'http://127.0.0.1:9') WITH (VALIDATE = false)")
    err = _fails(session, "VALIDATE CONNECTION dead")
    assert err.message.startswith("GCS connection 'dead': cannot validate at http://127.0.0.1:9: ")
    assert "unreachable" in err.message
    session.close()


@pytest.mark.gcs
def test_gcs_service_account_token_reaches_the_writers(fake_gcs: FakeGcs, tmp_path: Path) -> None:
    """CREDENTIALS = a service-account key: icesql trades it at the key's token_uri (a local
    endpoint checking the signature) and writes with the token. fake-gcs-server accepts any
    token, so what this proves is the path: key -> token -> pyarrow's GCS client -> rows."""
    from icesql.engine.connections.stores import gcs as gcs_store
    from tests.engine.test_stores import _key_pair, _service_account, _TokenEndpoint

    pem, public = _key_pair()
    endpoint = _TokenEndpoint(public)
    gcs_store.forget_tokens()
    try:
        fake_gcs.create_bucket("sa-lake")
        fake_gcs.create_bucket("sa-landing")
        with fake_gcs.pyarrow_fs().open_output_stream("sa-landing/in/x.json") as out:
            out.write(b'{"id": 1}\n{"id": 2}\n')
        session = Session(home=tmp_path / "home")
        key = _service_account(pem, endpoint.uri)
        session.execute(f"CREATE SECRET sa AS '{key}'")
        session.execute(
            f"""CREATE CONNECTION g TO GCS (PROJECT = '{fake_gcs.project}', CREDENTIALS = SECRET sa,
                  ENDPOINT = '{fake_gcs.endpoint}');
                CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'sql', URI = 'sqlite:///{tmp_path}/c.db',
                  WAREHOUSE = 'gs://sa-lake/wh', GCS CONNECTION = g);
                CREATE SOURCE src FROM FILES 'gs://sa-landing/in/' (FORMAT = 'json', SCHEMA = 'id BIGINT', GCS CONNECTION = g);
                CREATE SINK snk FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't')"""
        )
        session.run(once=True, sinks=["snk"])
        assert session.execute("SELECT count(*) FROM lake.n.t")[-1].rows == ((2,),)
        assert endpoint.calls and all("assertion" in c for c in endpoint.calls)
        assert len(endpoint.calls) == 1  # one token, cached for the validation, the source and the sink
        shown = str(session.execute("SHOW CREATE CONNECTION g")[-1].rows)
        assert "PRIVATE KEY" not in shown and "ya29" not in shown
        session.close()
    finally:
        endpoint.server.shutdown()
        gcs_store.forget_tokens()


@pytest.mark.azure
def test_azure_deletes_are_one_request_each_and_refusals_read_as_azures(azurite: Azurite) -> None:
    """``AzureFileIO.delete`` (what expiry and orphan cleanup call) is Delete Blob, signed with
    the key or carrying the SAS token. pyarrow's delete of a blob on an account without a
    hierarchical namespace also writes a directory marker for the parent and holds a lease; its
    release after the delete stalled 7-25 s about once in fifty deletes against azurite."""
    from pyarrow import fs as pafs

    from icesql.engine.connections import stores
    from icesql.engine.connections.failures import describe_failure, service_of
    from icesql.engine.connections.stores.azure import FILE_IO as AZURE_FILE_IO
    from icesql.engine.connections.stores.azure_io import AzureFileIO

    container = "deletes"
    azurite.create_container(container)
    fs = azurite.pyarrow_fs()
    sas = azurite.sas_token(container)
    for label, props in (("key", azurite.fileio_properties()), ("sas", azurite.fileio_properties(sas_token=sas))):
        io = AzureFileIO(props)
        names = [f"{container}/{label}/data/f{i}.parquet" for i in range(40)]
        for name in names:
            with fs.open_output_stream(name) as out:
                out.write(b"x")
        for name in names:
            io.delete(f"abfs://{name}")
        left = fs.get_file_info(pafs.FileSelector(f"{container}/{label}", recursive=True, allow_not_found=True))
        assert left == [], f"{label}: {[i.path for i in left]} (no file, and no directory marker either)"
        with pytest.raises(FileNotFoundError, match=r"Azure Error: \[BlobNotFound\] 404"):
            io.delete(f"abfs://{names[0]}")
        # CLEAN SOURCE deletes through the source's filesystem, which deletes as its FileIO does
        # (an AZURE connection's FileIO is AzureFileIO; the helper's properties name pyiceberg's)
        source_io = {**props, "py-io-impl": AZURE_FILE_IO}
        filesystem = stores.filesystem(source_io, f"abfs://{container}/{label}/landing/")
        with fs.open_output_stream(f"{container}/{label}/landing/in.json") as out:
            out.write(b"{}")
        filesystem.delete(f"{container}/{label}/landing/in.json")
        left = fs.get_file_info(pafs.FileSelector(f"{container}/{label}", recursive=True, allow_not_found=True))
        assert left == [], f"{label}: {[i.path for i in left]} (CLEAN SOURCE left a directory marker)"

    # a SAS that may read but not delete, and a wrong key: refused, in words the store reads
    read_only = AzureFileIO(azurite.fileio_properties(sas_token=azurite.sas_token(container, permissions="rl")))
    wrong = AzureFileIO({**azurite.fileio_properties(), "adls.account-key": "QUJD" + azurite.account_key[4:]})
    with fs.open_output_stream(f"{container}/kept.parquet") as out:
        out.write(b"x")
    for io, code in ((read_only, "AuthorizationPermissionMismatch"), (wrong, "AuthorizationFailure")):
        with pytest.raises(OSError) as caught:
            io.delete(f"abfs://{container}/kept.parquet")
        text = str(caught.value)
        assert f"Azure Error: [{code}] 403" in text, text
        assert "sig=" not in text and azurite.account_key not in text
        assert service_of(caught.value) == "storage"
        said = describe_failure(caught.value, label="AZURE connection 'a'", endpoint=None, action="delete")
        assert f"refused the credentials ({code}, HTTP 403)" in said.message, said.message
    assert fs.get_file_info(f"{container}/kept.parquet").type == pafs.FileType.File
