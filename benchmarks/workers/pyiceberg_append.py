"""pyiceberg (project venv): ``table.append`` of the dataset, and per-commit overhead.

Catalog: pyiceberg's SqlCatalog on SQLite + a local warehouse directory (what icesql's ``local``
catalog type is). The append reads the input one file at a time and appends each inside one
transaction (one catalog commit, bounded memory).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.workers.common import file_stats, throughput


def _local_catalog(workdir: str) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    wh = Path(workdir) / "warehouse"
    wh.mkdir(parents=True, exist_ok=True)
    return SqlCatalog("bench", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")


def append(files: list[str], rows: int, arrow_bytes: int, workdir: str, partitioned: bool = False,
           codec: str = "zstd", one_transaction: bool = True) -> dict[str, Any]:
    import pyarrow.parquet as pq
    import pyiceberg
    from pyiceberg.transforms import DayTransform

    cat = _local_catalog(workdir)
    cat.create_namespace("bench")
    schema = pq.read_schema(files[0])
    t0 = time.perf_counter()
    table = cat.create_table("bench.t", schema=schema, properties={
        "format-version": "2", "write.parquet.compression-codec": codec})
    if partitioned:
        with table.update_spec() as u:
            u.add_field("ts", DayTransform(), "ts_day")
    create_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if one_transaction:
        with table.transaction() as tx:
            for f in files:
                tx.append(pq.read_table(f))
    else:
        for f in files:
            table.append(pq.read_table(f))
    secs = time.perf_counter() - t0
    out = throughput(rows, arrow_bytes, secs)
    table = cat.load_table("bench.t")
    sizes = [f.file.file_size_in_bytes for f in table.scan().plan_files()]
    out.update(file_stats(sizes=sizes))
    out.update({"engine": f"pyiceberg {pyiceberg.__version__} table.append (SQLite catalog)",
                "create_seconds": round(create_s, 3), "codec": codec, "partitioned": partitioned,
                "snapshots": len(table.metadata.snapshots), "metadata": table.metadata_location,
                "rows_in_table": sum(f.file.record_count for f in table.scan().plan_files())})
    return out


def _stats_ms(xs: list[float]) -> dict[str, Any]:
    last = sorted(x * 1000 for x in xs[-10:])
    xs = sorted(x * 1000 for x in xs)
    if not xs:
        return {}
    return {"n": len(xs), "p50_ms": round(statistics.median(xs), 1),
            "p99_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.99))], 1),
            "mean_ms": round(statistics.fmean(xs), 1), "max_ms": round(xs[-1], 1),
            "last10_p50_ms": round(statistics.median(last), 1)}


def commit_overhead(workdir: str, commits: int = 30, catalog: str = "local", rows_per_commit: int = 100,
                    rest: dict[str, str] | None = None) -> dict[str, Any]:
    """Time ``commits`` tiny appends (``rows_per_commit`` rows each) on one table.

    ``append_*``: pyiceberg ``table.append`` (writes a tiny data file, manifest, manifest list,
    metadata, then the catalog commit). ``add_files_*`` (local only): committing an already
    written data file, the closest analogue of icesql's driver-side commit.
    """
    import pyarrow.parquet as pq
    import pyiceberg

    from benchmarks.datagen import arange, gen_rows

    if catalog == "local":
        cat = _local_catalog(workdir)
    else:
        from pyiceberg.catalog.rest import RestCatalog

        assert rest is not None
        secret = os.environ.get("BENCH_REST_SECRET", "")
        cat = RestCatalog("rest", **{
            "uri": rest["uri"], "warehouse": rest["warehouse"], "credential": f"{rest['key']}:{secret}",
            "s3.endpoint": rest["s3_endpoint"], "s3.access-key-id": rest["key"],
            "s3.secret-access-key": secret, "s3.region": "us-east-1",
        })
    ns = "bench"
    try:
        cat.create_namespace(ns)
    except Exception:  # noqa: BLE001 - already there
        pass
    batch = gen_rows(arange(rows_per_commit), 1)
    table = cat.create_table(f"{ns}.c{int(time.time() * 1000)}", schema=batch.schema,
                             properties={"format-version": "2"})
    appends: list[float] = []
    for i in range(commits):
        b = gen_rows(arange(rows_per_commit, i * rows_per_commit), 1)
        t0 = time.perf_counter()
        table.append(b)
        appends.append(time.perf_counter() - t0)
    out: dict[str, Any] = {"engine": f"pyiceberg {pyiceberg.__version__} ({catalog} catalog)",
                           "catalog": catalog, **{"append_" + k: v for k, v in _stats_ms(appends).items()}}
    if catalog == "local":
        staged = Path(workdir) / "staged"
        staged.mkdir(exist_ok=True)
        paths = []
        for i in range(commits):
            p = staged / f"s{i}.parquet"
            pq.write_table(gen_rows(arange(rows_per_commit, 10**9 + i * rows_per_commit), 1), p)
            paths.append(p)
        adds: list[float] = []
        for p in paths:
            t0 = time.perf_counter()
            table.add_files([f"file://{p}"])
            adds.append(time.perf_counter() - t0)
        out.update({"add_files_" + k: v for k, v in _stats_ms(adds).items()})
    out["seconds"] = round(sum(appends), 3)
    out["p50_ms"] = out.get("append_p50_ms")
    out["last10_p50_ms"] = out.get("append_last10_p50_ms")
    return out


def reference_table(metadata: str, expected: str, workdir: str, codec: str = "zstd") -> dict[str, Any]:
    """The compacted reference of an upserted table: the expected final rows in ONE append to a fresh
    table with the same schema (same field ids and types), no delete files -- what a reader of the
    table would see after a perfect compaction. The measured table is never touched."""
    import pyarrow.parquet as pq
    from pyiceberg.table import StaticTable

    from icesql.engine.iceberg.schema import arrow_schema, to_table_batch

    src = StaticTable.from_metadata(metadata)
    schema = src.schema()
    cat = _local_catalog(workdir)
    cat.create_namespace("bench")
    t0 = time.perf_counter()
    table = cat.create_table("bench.ref", schema=schema, properties={
        "format-version": "2", "write.parquet.compression-codec": codec})
    rows = pq.read_table(expected)
    table.append(to_table_batch(rows, arrow_schema(schema)))
    table = cat.load_table("bench.ref")
    tasks = list(table.scan().plan_files())
    out = {"seconds": round(time.perf_counter() - t0, 3), "metadata": table.metadata_location,
           "rows_in_table": sum(t.file.record_count for t in tasks)}
    out.update(file_stats(sizes=[t.file.file_size_in_bytes for t in tasks]))
    return out
