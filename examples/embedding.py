"""Embedding icesql in a PySpark program: sink your own streaming DataFrame into Iceberg.

The program builds a streaming DataFrame (Spark's ``rate`` source, reshaped), registers it as a
temporary view, and hands the view's name to icesql, which runs it as a sink: files written by
Spark's executors, commits to a local Iceberg catalog (SQLite + a warehouse directory) with
exactly-once progress in every snapshot summary.

    python examples/embedding.py --home /tmp/icesql-demo --seconds 10

Everything icesql-specific is in ``sink_view``; the rest is ordinary PySpark.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any


def sink_view(spark: Any, view: str, *, home: Path, table: str, seconds: float) -> list[dict[str, Any]]:
    """Sink the Spark view ``view`` into ``demo.<table>`` for ``seconds``; return the sink status.

    Uses the Engine directly; with the session API this becomes::

        with icesql.Session(home=home, spark=spark) as s:
            s.execute(f"CREATE CONNECTION local TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{home}/warehouse')")
            s.execute(f"CREATE SINK demo FROM {view} INTO ICEBERG CATALOG local (NAMESPACE = 'demo', TABLE = '{table}') "
                      "WITH (COMMIT INTERVAL = '2s')")
            s.run(...)
    """
    from icesql.executor.engine import Engine
    from icesql.plan import CatalogConnectionPlan, CatalogType, CommitPolicy, SinkPlan

    class Objects:  # the names icesql resolves: one local catalog; the view comes from Spark
        def connection(self, name: str) -> Any:
            return CatalogConnectionPlan(
                name=name, catalog_type=CatalogType.LOCAL, warehouse=str(home / "warehouse")
            )

        def relation(self, name: str) -> None:
            return None  # not an icesql source or view: Spark's own view is used

    class State:  # where the sink's id, version and progress numbers go
        def __init__(self) -> None:
            self.sinks: dict[str, dict[str, Any]] = {}

        def sink_id(self, name: str) -> str:
            return str(self.sinks.setdefault(name, {"id": uuid.uuid4().hex, "version": 0})["id"])

        def bump_version(self, name: str) -> int:
            entry = self.sinks.setdefault(name, {"id": uuid.uuid4().hex, "version": 0})
            entry["version"] += 1
            return int(entry["version"])

        def update(self, name: str, **fields: Any) -> None:
            self.sinks.setdefault(name, {"id": uuid.uuid4().hex, "version": 0}).update(fields)

    engine = Engine(home, objects=Objects(), secrets=lambda name: "", state=State(), spark=spark)
    plan = SinkPlan(
        name="demo",
        relation=view,
        catalog_connection="local",
        namespace=("demo",),
        table=table,
        commit=CommitPolicy(maximum_period=2.0, minimum_size=64 * 1024 * 1024),
    )
    engine.start_sink(plan)
    try:
        time.sleep(seconds)
    finally:
        engine.stop()  # final commit ("shutdown")
    return engine.status()


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
    for row in status:
        print(
            f"sink {row['name']}: {row['status']}, {row['rows_committed']} rows in {row['commits']} commits "
            f"to {row['table']} (snapshot {row['last_snapshot_id']})"
        )
    return 0 if all(r["status"] == "stopped" for r in status) else 1


if __name__ == "__main__":
    sys.exit(main())
