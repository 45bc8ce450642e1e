"""Smoke tests: which clients reach azurite (``tests.support.azurite``), and how.

* pyarrow ``AzureFileSystem``: ``account_name``/``account_key`` with blob and dfs authority
  ``127.0.0.1:P`` and scheme ``http`` (path-style ``/devstoreaccount1/...``); or ``sas_token``,
  which pyarrow 26 needs with a leading ``?``.
* pyiceberg 0.12 ``PyArrowFileIO`` (forced with ``py-io-impl``; it picks fsspec/adlfs for abfs
  otherwise) with ``adls.account-name``, ``adls.account-key`` or ``adls.sas-token``,
  ``adls.{blob,dfs}-storage-{authority,scheme}``: ``abfs[s]://container/path`` and
  ``wasb[s]://container/path`` work; ``abfs://container@account.dfs.core.windows.net/path``
  (Iceberg Java's form) does not: the host stays in the path (apache/iceberg-python#2698).
* DuckDB's azure extension (``duckdb-extension-azure``, when installed) with a connection string
  naming ``BlobEndpoint`` and ``DfsEndpoint``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow.fs import AzureFileSystem, FileSelector, FileType

from tests.support.azurite import Azurite
from tests.support.require import require_module

# What the server and the clients do by themselves (no icesql): kept out of CI's time, since
# tests/stores/test_store_*.py run icesql against the same server
pytestmark = [pytest.mark.azure, pytest.mark.slow]


@pytest.fixture
def container(azurite: Azurite) -> str:
    name = f"c-{uuid.uuid4().hex[:12]}"
    azurite.create_container(name)
    return name


def _roundtrip(fs: Any, container: str, name: str = "dir/a.txt") -> None:
    path = f"{container}/{name}"
    with fs.open_output_stream(path) as out:
        out.write(b"hello azure")
    files = [
        i.path for i in fs.get_file_info(FileSelector(container, recursive=True)) if i.type == FileType.File
    ]
    assert files == [path]
    with fs.open_input_stream(path) as f:
        assert f.read() == b"hello azure"
    fs.delete_file(path)
    assert fs.get_file_info(path).type == FileType.NotFound


def test_pyarrow_account_key(azurite: Azurite, container: str) -> None:
    fs = AzureFileSystem(
        account_name="devstoreaccount1",
        account_key=azurite.account_key,
        blob_storage_authority=f"127.0.0.1:{azurite.port}",
        blob_storage_scheme="http",
        dfs_storage_authority=f"127.0.0.1:{azurite.port}",
        dfs_storage_scheme="http",
    )
    _roundtrip(fs, container)


def test_pyarrow_sas_token_needs_a_question_mark(azurite: Azurite, container: str) -> None:
    sas = azurite.sas_token(container)
    assert sas.startswith("sv=") and "&sig=" in sas
    common = {
        "account_name": azurite.account_name,
        "blob_storage_authority": azurite.authority,
        "blob_storage_scheme": "http",
        "dfs_storage_authority": azurite.authority,
        "dfs_storage_scheme": "http",
    }
    bare = AzureFileSystem(**common, sas_token=sas)
    with pytest.raises(OSError, match="400"):  # the token ends up in the URL path
        bare.get_file_info(f"{container}/x")
    _roundtrip(AzureFileSystem(**common, sas_token="?" + sas), container)


def _check_fileio(io: Any, location: str) -> None:
    with io.new_output(location).create() as out:
        out.write(b"{}")
    assert io.new_input(location).exists()
    with io.new_input(location).open() as f:
        assert f.read() == b"{}"
    io.delete(location)
    assert not io.new_input(location).exists()


@pytest.mark.parametrize("scheme", ["abfs", "abfss", "wasb", "wasbs"])
def test_pyiceberg_pyarrow_fileio(azurite: Azurite, container: str, scheme: str) -> None:
    from pyiceberg.io import load_file_io
    from pyiceberg.io.pyarrow import PyArrowFileIO

    props = {
        "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
        "adls.account-name": "devstoreaccount1",
        "adls.account-key": azurite.account_key,
        "adls.blob-storage-authority": f"127.0.0.1:{azurite.port}",
        "adls.blob-storage-scheme": "http",
        "adls.dfs-storage-authority": f"127.0.0.1:{azurite.port}",
        "adls.dfs-storage-scheme": "http",
    }
    assert props == azurite.fileio_properties()
    io = load_file_io(props, f"{scheme}://{container}/t")
    assert isinstance(io, PyArrowFileIO)
    _check_fileio(io, f"{scheme}://{container}/warehouse/t/metadata/x.json")


def test_pyiceberg_sas_token(azurite: Azurite, container: str) -> None:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    props = azurite.fileio_properties(sas_token=azurite.sas_token(container))
    assert "adls.account-key" not in props and props["adls.sas-token"].startswith("?sv=")
    _check_fileio(PyArrowFileIO(props), f"abfs://{container}/t/s.json")


def test_pyiceberg_fileio_defaults_to_fsspec_for_abfs(azurite: Azurite) -> None:
    from pyiceberg.io import load_file_io
    from pyiceberg.io.fsspec import FsspecFileIO

    props = {k: v for k, v in azurite.fileio_properties().items() if k != "py-io-impl"}
    assert isinstance(load_file_io(props, "abfs://c/t"), FsspecFileIO)


def test_pyiceberg_java_style_abfs_location_fails(azurite: Azurite, container: str) -> None:
    """pyiceberg 0.12 hands pyarrow ``container@account.dfs.core.windows.net/path``: pyarrow
    takes all of the first segment as the container name (apache/iceberg-python#2698)."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    io = PyArrowFileIO(azurite.fileio_properties())
    location = f"abfss://{container}@devstoreaccount1.dfs.core.windows.net/t/x.json"
    assert io.parse_location(location)[2] == f"{container}@devstoreaccount1.dfs.core.windows.net/t/x.json"
    with pytest.raises(OSError, match="InvalidResourceName"):
        with io.new_output(location).create() as out:
            out.write(b"{}")


def test_duckdb_azure_extension(azurite: Azurite, container: str) -> None:
    require_module("duckdb_extension_azure", "duckdb-extension-azure is not installed")
    import duckdb

    from tests.support.readers import _duckdb_extension

    pq.write_table(pa.table({"x": [1, 2, 3]}), f"{container}/p/one.parquet", filesystem=azurite.pyarrow_fs())
    con = duckdb.connect()
    try:
        con.execute("SET autoinstall_known_extensions=false")
        con.execute(f"LOAD '{_duckdb_extension('duckdb_extension_azure')}'")
        con.execute(
            "CREATE SECRET az (TYPE azure, CONNECTION_STRING "
            f"'{azurite.connection_string}DfsEndpoint={azurite.endpoint};')"
        )

        def total(url: str) -> Any:
            return con.execute(f"SELECT sum(x) FROM read_parquet('{url}')").fetchone()[0]  # type: ignore[index]

        assert total(f"az://{container}/p/one.parquet") == 6
        assert total(f"az://{container}/p/*.parquet") == 6  # blob listing
        # the DFS client reads through the blob API: the Java form works for single files
        assert total(f"abfss://{container}@devstoreaccount1.dfs.core.windows.net/p/one.parquet") == 6
        con.execute(f"COPY (SELECT 4 AS x) TO 'az://{container}/p/two.parquet'")
        assert total(f"az://{container}/p/*.parquet") == 10
        with pytest.raises(duckdb.Error):  # DFS listing (ListPaths): azurite has no DFS API
            total(f"abfss://{container}/p/*.parquet")
    finally:
        con.close()
