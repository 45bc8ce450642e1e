"""What the per-batch FileIO refresh costs (``SinkRunner.batch_writer``: ``target.io_properties``).

    .venv/bin/python benchmarks/io_refresh_cost.py

A local catalog, one sink without and one with a ``USING AWS CONNECTION`` (static keys, a
secret resolved each call); prints the mean time of one ``io_properties`` call of each.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import icesql


def main(calls: int = 500) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    base = Path(tempfile.mkdtemp(prefix="icesql-iocost-"))
    with icesql.Session(home=base / "home") as s:
        s.execute(f"""
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{base / "wh"}');
            CREATE SECRET sk AS 'not-a-real-key';
            CREATE CONNECTION s3 TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = SECRET sk,
                ENDPOINT = 'http://127.0.0.1:1') WITH (VALIDATE = false);
            CREATE SOURCE ev FROM FILES '{base / "in"}' (FORMAT = 'json', SCHEMA = 'id BIGINT');
            CREATE SINK plain FROM ev INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'plain');
            CREATE SINK keyed FROM ev INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'keyed')
                USING AWS CONNECTION s3;
        """)
        for name in ("plain", "keyed"):
            plan = s.sink_plans([name])[0]
            target = s.engine.target(plan)
            catalog = target.load_catalog()
            catalog.create_namespace_if_not_exists("n")
            table = catalog.create_table_if_not_exists(f"n.{plan.table}", Schema(NestedField(1, "id", LongType())))
            began = time.perf_counter()
            for _ in range(calls):
                target.io_properties(table)
            print(f"{name}: {(time.perf_counter() - began) / calls * 1000:.3f} ms per io_properties call")


if __name__ == "__main__":
    main()
