"""Embedding icesql in a PySpark program: sink your own streaming DataFrame into Iceberg.

The program builds a streaming DataFrame (Spark's ``rate`` source, reshaped) and registers it
as a temporary view; an ``icesql.Session`` on the program's own SparkSession then sinks the
view with two SQL statements: files written by Spark's executors, commits to a local Iceberg
catalog (SQLite + a warehouse directory) with exactly-once progress in every snapshot summary.

    python examples/embedding.py --home /tmp/icesql-demo --seconds 10

Everything icesql-specific is in ``sink_view``; the rest is ordinary PySpark.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any


def sink_view(spark: Any, view: str, *, home: Path, table: str, seconds: float) -> list[Any]:
    """Sink the Spark view ``view`` into ``demo.<table>`` for ``seconds`` (and at least until the
    first rows are written); return the sinks' status.

    A sink's FROM names an icesql source or view, or else any table or temporary view of the
    Spark session: here the program's own streaming DataFrame.
    """
    import icesql

    with icesql.Session(home=home, spark=spark) as session:
        session.execute(
            f"""
            CREATE CONNECTION IF NOT EXISTS local TO ICEBERG CATALOG (
                TYPE = 'local', WAREHOUSE = '{home / "warehouse"}'
            );
            CREATE SINK IF NOT EXISTS demo FROM {view}
            INTO ICEBERG CATALOG local (NAMESPACE = 'demo', TABLE = '{table}')
            WITH (COMMIT INTERVAL = '2s', MINIMUM SIZE = '64MiB');
            """
        )
        session.start(["demo"])  # runs in the background
        try:
            time.sleep(seconds)
            # ... and until a first micro-batch is staged or committed (a busy machine can take
            # a while to start Spark's Python workers), at most two minutes more
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not any(
                st["rows_committed"] or st["staged_rows"] or st["last_error"]
                for st in session.engine.status()
            ):
                time.sleep(0.5)
        finally:
            session.stop()  # final commit ("shutdown") of what is staged
        return session.status()


def main(argv: list[str] | None = None, spark: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, default=Path("icesql-demo"))
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rows-per-second", type=int, default=50)
    ap.add_argument("--table", default="ticks")
    args = ap.parse_args(argv)
    home = args.home.absolute()

    if spark is None:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("icesql-embedding-example")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.pyspark.python", sys.executable)
            .getOrCreate()
        )
    ticks = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", args.rows_per_second)
        .load()
        .selectExpr(
            "value AS id",
            "timestamp AS ts",
            "CAST(value % 7 AS INT) AS bucket",
            "concat('tick-', value) AS label",
        )
    )
    ticks.createOrReplaceTempView("ticks")

    status = sink_view(spark, "ticks", home=home, table=args.table, seconds=args.seconds)
    for st in status:
        print(
            f"sink {st.name}: {st.state}, {st.rows_committed} rows in {st.commits} commits "
            f"to demo.{args.table} (snapshot {st.last_snapshot_id})"
        )
    return 0 if status and all(st.state == "stopped" and st.last_error is None for st in status) else 1


if __name__ == "__main__":
    sys.exit(main())
