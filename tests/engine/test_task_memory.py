"""Executor tasks hand the memory Arrow's allocator kept back to the OS when they end.

Spark reuses a Python worker for later tasks and keeps more workers than cores, so what a
worker's allocator keeps after a task is memory the whole sink holds while that worker idles.
Each task is run here in a fresh interpreter (a worker's situation, nothing else allocated),
on about 120 MB of Arrow data; afterwards the script asks the allocator once more to release
what it holds unused. When the task released it already, that second release finds next to
nothing; when it did not, it finds hundreds of MB (the assertion's margin is wide either way).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import pyarrow as pa, pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog

    from icesql.engine.sink.batch import FileWriterTask
    from icesql.engine.sources.decode import SourceFormat
    from icesql.engine.connections.stores.location import Location
    from icesql.engine.sources.files.relation import ArrowSource
    from icesql.engine.sources.pieces import DecodeTask, WriteTask
    from icesql.plan import OnError, SourcePlan, SourceKind
    from icesql.engine.iceberg.writer import WriteSpec

    kind, tmp = sys.argv[1], sys.argv[2]
    n = 400_000
    data = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "s": pa.array([f"row {i} " + "x" * (i % 200) for i in range(n)]),
        "d": pa.array([i * 0.5 for i in range(n)], pa.float64()),
    })
    src = os.path.join(tmp, "in.parquet")
    pq.write_table(data, src, row_group_size=100_000)
    cat = SqlCatalog("c", uri=f"sqlite:///{tmp}/c.db", warehouse=f"file://{tmp}/wh")
    cat.create_namespace("n")
    spec = WriteSpec.from_table(cat.create_table("n.t", schema=data.schema))
    row = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "s", "type": "string", "nullable": True, "metadata": {}},
        {"name": "d", "type": "double", "nullable": True, "metadata": {}},
    ]}
    pieces = pa.record_batch({
        "seq": [0], "path": [src], "size": [os.path.getsize(src)], "mtime_ms": [0],
        "start": [0], "end": pa.array([None], pa.int64()), "row_groups": pa.array([None], pa.list_(pa.int32())),
    })
    arrow = ArrowSource(SourcePlan("s", SourceKind.FILES, path=tmp), SourceFormat("parquet", row), Location(tmp),
                        OnError.FAIL, "")
    del data

    def rss():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) // 1024 for l in f if l.startswith("VmRSS"))

    if kind == "write":
        out = list(WriteTask(arrow, spec, 0)(iter([pieces])))
    elif kind == "decode":
        out = [b.num_rows for b in DecodeTask(arrow)(iter([pieces]))]
    else:  # Spark's row path: the rows come as Arrow batches from Spark
        batches = pq.ParquetFile(src).iter_batches(batch_size=10_000)
        task = FileWriterTask(spec, ["id", "s", "d"], changelog=False, upsert=False, key=[],
                              equality_ids=[], batch_id=0)
        out = list(task(batches))
    assert out
    before = rss()
    pa.default_memory_pool().release_unused()
    print(json.dumps({"peak": pa.default_memory_pool().max_memory() // 2**20,
                      "released_after": before - rss()}))
    """
)


@pytest.mark.parametrize("kind", ["write", "decode", "row_path"])
def test_a_task_leaves_no_unused_arrow_memory_behind(kind: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, kind, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["peak"] >= 60, out  # the task did hold a lot of Arrow memory at once
    assert out["released_after"] < 16, out  # ... and gave back what it kept before it returned
