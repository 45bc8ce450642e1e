"""Smoke tests: which clients reach fake-gcs-server (``tests.support.gcs``), and how.

* pyarrow ``GcsFileSystem``: ``anonymous=True, scheme="http", endpoint_override="127.0.0.1:P"``.
* pyiceberg 0.12 ``PyArrowFileIO`` (``gs://``): ``gcs.service.host`` plus a dummy
  ``gcs.oauth2.token`` and ``gcs.oauth2.token-expires-at`` (both or neither: pyarrow insists).
  Without a token pyarrow looks for Google default credentials and retries for minutes.
* DuckDB httpfs: a ``TYPE gcs`` secret with ``ENDPOINT '127.0.0.1:P', URL_STYLE 'path',
  USE_SSL false`` reads ``gs://`` (XML API); it cannot write there (no multipart upload).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow.fs import FileSelector, FileType, GcsFileSystem

from tests.support.gcs import FakeGcs

# What the server and the clients do by themselves (no icesql): kept out of CI's time, since
# tests/stores/test_store_*.py run icesql against the same server
pytestmark = [pytest.mark.gcs, pytest.mark.slow]


@pytest.fixture
def bucket(fake_gcs: FakeGcs) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    fake_gcs.create_bucket(name)
    return name


def test_pyarrow_write_list_read_delete(fake_gcs: FakeGcs, bucket: str) -> None:
    fs = GcsFileSystem(
        anonymous=True,
        scheme="http",
        endpoint_override=f"127.0.0.1:{fake_gcs.port}",
        project_id=fake_gcs.project,
    )
    with fs.open_output_stream(f"{bucket}/dir/a.txt") as out:
        out.write(b"hello gcs")
    infos = fs.get_file_info(FileSelector(bucket, recursive=True))
    assert [(i.path, i.type) for i in infos if i.type == FileType.File] == [
        (f"{bucket}/dir/a.txt", FileType.File)
    ]
    with fs.open_input_stream(f"{bucket}/dir/a.txt") as f:
        assert f.read() == b"hello gcs"
    fs.delete_file(f"{bucket}/dir/a.txt")
    assert fs.get_file_info(f"{bucket}/dir/a.txt").type == FileType.NotFound


def test_pyiceberg_pyarrow_fileio(fake_gcs: FakeGcs, bucket: str) -> None:
    from pyiceberg.io import load_file_io
    from pyiceberg.io.pyarrow import PyArrowFileIO

    props = {
        "gcs.project-id": fake_gcs.project,  # not read by PyArrowFileIO; harmless
        "gcs.service.host": fake_gcs.endpoint,  # scheme + endpoint_override
        "gcs.oauth2.token": "anonymous",  # any string: the emulator checks nothing
        "gcs.oauth2.token-expires-at": str(int((time.time() + 3600) * 1000)),
    }
    assert props.keys() == fake_gcs.fileio_properties().keys()
    io = load_file_io(props, f"gs://{bucket}/t")
    assert isinstance(io, PyArrowFileIO)  # pyiceberg's only FileIO for gs://
    location = f"gs://{bucket}/warehouse/t/metadata/x.json"
    with io.new_output(location).create() as out:
        out.write(b'{"a": 1}')
    assert io.new_input(location).exists()
    with io.new_input(location).open() as f:
        assert f.read() == b'{"a": 1}'
    assert len(io.new_input(location)) == 8
    io.delete(location)
    assert not io.new_input(location).exists()


def test_pyiceberg_token_needs_its_expiry(fake_gcs: FakeGcs) -> None:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    io = PyArrowFileIO({"gcs.service.host": fake_gcs.endpoint, "gcs.oauth2.token": "anonymous"})
    with pytest.raises(ValueError, match="credential_token_expiration"):
        io.new_input("gs://any/x")


def _duckdb(fake_gcs: FakeGcs) -> Any:
    import duckdb

    from tests.support.readers import _duckdb_extension

    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions=false")
    con.execute(f"LOAD '{_duckdb_extension('duckdb_extension_httpfs')}'")
    con.execute(fake_gcs.duckdb_secret())
    return con


def test_duckdb_reads_gs(fake_gcs: FakeGcs, bucket: str) -> None:
    fs = fake_gcs.pyarrow_fs()
    pq.write_table(pa.table({"x": [1, 2, 3]}), f"{bucket}/p/one.parquet", filesystem=fs)
    pq.write_table(pa.table({"x": [10]}), f"{bucket}/p/two.parquet", filesystem=fs)
    con = _duckdb(fake_gcs)
    try:
        assert con.execute(f"SELECT sum(x) FROM read_parquet('gs://{bucket}/p/one.parquet')").fetchall() == [
            (6,)
        ]
        # glob = XML ListObjectsV2 (path-style on -public-host)
        assert con.execute(f"SELECT sum(x) FROM read_parquet('gs://{bucket}/p/*.parquet')").fetchall() == [
            (16,)
        ]
    finally:
        con.close()


def test_duckdb_cannot_write_gs(fake_gcs: FakeGcs, bucket: str) -> None:
    """Documents a limit: DuckDB writes through the S3-style multipart upload, which
    fake-gcs-server's XML API refuses (HTTP 400)."""
    import duckdb

    con = _duckdb(fake_gcs)
    try:
        with pytest.raises(duckdb.Error, match="400"):
            con.execute(f"COPY (SELECT 1 AS x) TO 'gs://{bucket}/w/out.parquet'")
    finally:
        con.close()
