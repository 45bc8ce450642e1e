"""Data file rollover through the whole pipeline: ``WITH (MAXIMUM FILE SIZE = '1MiB')`` over a
parquet FILES source of a few MB → several data files, none above the limit (plus the
writer's small tolerance), every row present once.
"""

from __future__ import annotations

import base64
import os
import random
from pathlib import Path
from typing import Any

import pytest

import icesql
from tests.support.pipeline_helpers import load_table
from tests.support.readers import read_datafusion, read_duckdb

pytestmark = pytest.mark.spark

MiB = 1024 * 1024
ROWS_PER_FILE = 9_000
FILES = 2


def payload(rng: random.Random, i: int) -> str:
    # base64 of random bytes: barely compressible, so file sizes track the data
    return f"{i:08d}-" + base64.b64encode(rng.randbytes(180)).decode()


def write_parquet(directory: Path) -> list[tuple[int, str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(20240601)
    directory.mkdir(parents=True)
    rows: list[tuple[int, str]] = []
    for f in range(FILES):
        ids = list(range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE))
        texts = [payload(rng, i) for i in ids]
        rows.extend(zip(ids, texts, strict=True))
        table = pa.table({"id": pa.array(ids, pa.int64()), "payload": pa.array(texts, pa.string())})
        tmp = directory / f".part-{f}.parquet.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, directory / f"part-{f}.parquet")
    return rows


def test_maximum_file_size_rolls_data_files(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "blobs"
    rows = write_parquet(data)
    source_bytes = sum(p.stat().st_size for p in data.glob("*.parquet"))
    assert source_bytes > 3 * MiB, source_bytes  # a few MB of input
    home = tmp_path / "home"
    warehouse = tmp_path / "warehouse"
    with icesql.Session(home=home, spark=spark) as s:
        s.execute(
            f"""
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{warehouse}');
            CREATE SOURCE blobs FROM FILES '{data}' (FORMAT = 'parquet');
            CREATE SINK blobs_sink FROM blobs
            INTO ICEBERG CATALOG lake (NAMESPACE = 'e2e', TABLE = 'blobs')
            WITH (MAXIMUM FILE SIZE = '1MiB');
            """
        )
        s.run(once=True)
        (st,) = s.status()
        assert (st.state, st.rows_committed, st.last_error) == ("stopped", len(rows), None)

    table = load_table(home, "e2e.blobs", warehouse=warehouse, catalog_name="lake")
    files = table.inspect.files().to_pylist()
    sizes = [f["file_size_in_bytes"] for f in files]
    assert len(files) >= 3, sizes  # ~3.5 MB of parquet cannot fit in fewer 1 MiB files
    assert max(sizes) <= 1.1 * MiB, sizes
    assert sum(f["record_count"] for f in files) == len(rows)
    # the manifests' sizes are the files' real sizes
    for f in files:
        path = Path(f["file_path"].removeprefix("file://"))
        assert path.stat().st_size == f["file_size_in_bytes"], path
    assert st.files_committed == len(files)

    want = sorted(rows, key=repr)
    assert read_duckdb(table.metadata_location) == want
    assert read_datafusion(table.metadata_location, "id") == sorted(((i,) for i, _ in rows), key=repr)
