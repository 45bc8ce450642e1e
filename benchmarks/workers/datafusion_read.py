"""DataFusion (iceberg-rust through ``pyiceberg_core.datafusion``, project venv): count, full scan
of every column, and a check against the expected final table (row count, ids, sum of qty)."""

from __future__ import annotations

import time
from typing import Any


def read(metadata: str, expected: str | None = None) -> dict[str, Any]:
    import datafusion
    from datafusion import SessionContext
    from pyiceberg_core.datafusion import IcebergDataFusionTable

    t0 = time.perf_counter()
    loc = f"file://{metadata}" if metadata.startswith("/") else metadata
    provider = IcebergDataFusionTable(identifier=["bench", "t"], metadata_location=loc,
                                      file_io_properties={}).__datafusion_table_provider__
    ctx = SessionContext()
    ctx.register_table("t", type("Provider", (), {"__datafusion_table_provider__": provider})())
    setup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = ctx.sql("SELECT count(*) AS n FROM t").to_arrow_table().column("n")[0].as_py()
    count_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    tbl = ctx.sql("SELECT * FROM t").to_arrow_table()
    scan_s = time.perf_counter() - t0
    out: dict[str, Any] = {"engine": f"DataFusion {datafusion.__version__} (iceberg-rust)", "rows": n,
                           "count_seconds": round(count_s, 3), "seconds": round(scan_s, 3),
                           "setup_seconds": round(setup_s, 3), "scanned_rows": tbl.num_rows}
    if expected:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        t0 = time.perf_counter()
        exp = pq.read_table(expected, columns=["id", "qty"])
        ids = pc.sort_indices(tbl.select(["id"]), sort_keys=[("id", "ascending")])
        got_ids = pc.take(tbl.column("id"), ids).combine_chunks()
        same_ids = tbl.num_rows == exp.num_rows and got_ids.equals(exp.column("id").combine_chunks())
        same_qty = pc.sum(tbl.column("qty")).as_py() == pc.sum(exp.column("qty")).as_py()
        out.update({"verify_seconds": round(time.perf_counter() - t0, 2),
                    "matches_expected": bool(same_ids and same_qty), "check": "row count, sorted ids, sum(qty)"})
    return out
