"""DuckDB's iceberg extension, loaded from its pip package files (no network): count, full scan,
and an exact comparison with the expected final table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def _connect() -> Any:
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    import importlib

    for name in ("duckdb_extension_parquet", "duckdb_extension_avro", "duckdb_extension_iceberg"):
        try:
            m = importlib.import_module(name)
        except ImportError:
            continue  # parquet is built into the wheel; avro comes with the harness venv
        p = next(Path(m.__file__).parent.glob("extensions/*/*.duckdb_extension"))
        con.execute(f"LOAD '{p}'")
    return con, duckdb.__version__


def read(metadata: str, expected: str | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    con, version = _connect()
    setup_s = time.perf_counter() - t0
    scan = f"iceberg_scan('{metadata}')"
    t0 = time.perf_counter()
    n = con.execute(f"SELECT count(*) FROM {scan}").fetchone()[0]
    count_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    tbl = con.execute(f"SELECT * FROM {scan}").fetch_arrow_table()
    scan_s = time.perf_counter() - t0
    out: dict[str, Any] = {"engine": f"DuckDB {version} iceberg extension", "rows": n,
                           "count_seconds": round(count_s, 3), "seconds": round(scan_s, 3),
                           "setup_seconds": round(setup_s, 3), "scanned_rows": tbl.num_rows}
    del tbl
    if expected:
        t0 = time.perf_counter()
        q = (f"SELECT (SELECT count(*) FROM (SELECT * FROM read_parquet('{expected}') EXCEPT ALL "
             f"SELECT * FROM {scan})), (SELECT count(*) FROM (SELECT * FROM {scan} EXCEPT ALL "
             f"SELECT * FROM read_parquet('{expected}')))")
        missing, extra = con.execute(q).fetchone()
        out.update({"verify_seconds": round(time.perf_counter() - t0, 2), "missing_rows": missing,
                    "extra_rows": extra, "matches_expected": missing == 0 and extra == 0})
    return out
