"""A PySpark daemon that imports pyspark.sql and icesql's Arrow path before it forks its workers.

Probe of 24 Nov 2026 (benchmarks/README.md, "The Arrow path, fourth look"): whether the Python
workers Spark forks per query (the data source's read planner, the tasks) spend the 1M-row
append's fixed start-up importing modules. Run with
``--conf spark.python.daemon.module=benchmarks.probes.warm_daemon``. Spark itself imports a
worker's module after the fork on purpose (pyarrow starts threads when imported), so this is an
experiment, not something icesql sets.
"""

import pyspark.sql.datasource  # noqa: F401
import pyspark.sql.worker.plan_data_source_read  # noqa: F401
import pyspark.worker  # noqa: F401
from pyspark.daemon import manager

import icesql.engine.iceberg.writer  # noqa: F401
import icesql.engine.sources.files.source  # noqa: F401
import icesql.engine.sources.pieces  # noqa: F401

if __name__ == "__main__":
    manager()
