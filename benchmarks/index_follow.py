"""The key index after a rewrite or another writer's append: followed, against rebuilt.

    .venv/bin/python benchmarks/index_follow.py [--keys 1000000] [--files 10]

A table of ``--keys`` BIGINT keys in ``--files`` data files (pyiceberg, a local SQLite catalog)
gets its key index built (``build.build_index``, a Spark job over every live file, local[2]);
then three things happen to the table, and after each the index is brought up to date both ways,
timed: ``follow.follow`` from the previous index (the files removed and added since, their keys
read on the driver) and a rebuild from the whole table into a second index directory. The two
must hold the same entries (checked). The changes:

1. another writer appends 4 small files (1,000 new keys each);
2. a compaction as a sink's maintenance makes it (``CompactMode.AUTO``): the 4 small files into one;
3. a full compaction (``icesql compact``): every file rewritten, all ``--keys`` rows moved.

Nothing is compared with a goal; it prints seconds (what the sink's commit lock is held for) and
which of the two a sink picks (``follow.worth_following``).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def entries(store: Any, m: Any, fields: list[Any]) -> list[tuple[Any, ...]]:
    from icesql.engine.index import shard as S

    out: list[tuple[Any, ...]] = []
    for chain in m.chains:
        t = S.plain_paths(S.load(store.read_entries, chain, fields))
        out.extend(zip(*(t.column(i).to_pylist() for i in range(t.num_columns)), strict=True))
    return sorted(out)


def main() -> None:
    import logging

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("icesql.sink").setLevel(logging.DEBUG)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=10)
    args = ap.parse_args()

    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    from icesql.engine.backends.hashing import key_arrow_fields
    from icesql.engine.backends.spark.frames import SparkBackend
    from icesql.engine.backends.spark.session import get_spark
    from icesql.engine.index.build import build_index
    from icesql.engine.index.follow import follow, table_changes, worth_following
    from icesql.engine.index.store import IndexStore
    from icesql.engine.maintenance.compact import CompactMode, compact_table
    from icesql.plan import MaintenancePolicy

    tmp = Path(tempfile.mkdtemp(prefix="icesql-index-follow-"))
    cat = SqlCatalog("bench", uri=f"sqlite:///{tmp}/catalog.db", warehouse=f"file://{tmp}/warehouse")
    cat.create_namespace("b")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "v", StringType(), required=False),
        identifier_field_ids=[1],
    )
    table = cat.create_table("b.t", schema=schema, properties={"format-version": "2"})
    arrow = table.schema().as_arrow()
    ids = list(range(args.keys))
    random.Random(7).shuffle(ids)
    per = -(-args.keys // args.files)
    for i in range(args.files):
        chunk = ids[i * per : (i + 1) * per]
        table.append(pa.table({"id": pa.array(chunk, pa.int64()), "v": ["x"] * len(chunk)}, schema=arrow))
    table = cat.load_table("b.t")

    spark = get_spark("local[2]", app_name="icesql-index-follow")
    key = ["id"]
    fields = key_arrow_fields(table.schema(), key)
    store = IndexStore(table.location(), "follow", {})
    t0 = time.perf_counter()
    m = build_index(SparkBackend(spark), table, store, key=key, progress=0, version=1, io_properties={})
    print(
        f"table: {args.keys:,} keys in {args.files} files; first build {time.perf_counter() - t0:.2f}s, "
        f"{m.shards} shard(s)"
    )
    since = table.current_snapshot().snapshot_id

    def measure(what: str) -> None:
        nonlocal m, since, table
        table = cat.load_table("b.t")
        changes = table_changes(table, since, "follow-sink")
        assert changes is not None, "followable"
        choice = "follows" if worth_following(changes, m.keys) else "rebuilds"
        t0 = time.perf_counter()
        m = follow(table, store, m, changes, key=key, progress=0, version=1)
        followed = time.perf_counter() - t0
        rebuilt_store = IndexStore(table.location(), f"rebuild-{what[:5]}", {})
        t0 = time.perf_counter()
        r = build_index(SparkBackend(spark), table, rebuilt_store, key=key, progress=0, version=1, io_properties={})
        rebuilt = time.perf_counter() - t0
        same = entries(store, m, fields) == entries(rebuilt_store, r, fields)
        print(
            f"{what}: {len(changes.removed)} file(s) removed, {len(changes.added)} added ({changes.added_rows:,} rows); "
            f"followed {followed:.2f}s, rebuilt {rebuilt:.2f}s ({rebuilt / followed:.1f}x); same entries: {same}; a sink {choice}"
        )
        assert same
        since = table.current_snapshot().snapshot_id
        store.cleanup(m)

    n = args.keys
    for i in range(4):
        rows = list(range(n + i * 1000, n + (i + 1) * 1000))
        table.append(pa.table({"id": pa.array(rows, pa.int64()), "v": ["y"] * len(rows)}, schema=arrow))
    measure("another writer's 4 appends")
    small = MaintenancePolicy(compaction_minimum_files=4, target_file_size=256 * 1024, small_file_ratio=0.5)
    result = compact_table(cat.load_table("b.t"), mode=CompactMode.AUTO, policy=small)
    assert not result.skipped, result
    measure(f"compaction {result.data_files_before}->{result.data_files_after} files")
    compact_table(cat.load_table("b.t"))
    measure("full compaction")
    spark.stop()


if __name__ == "__main__":
    main()
