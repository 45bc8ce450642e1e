"""The key index's size: Arrow bytes of a loaded shard, and Parquet bytes on disk, per 1M keys.

    .venv/bin/python benchmarks/index_memory.py [--keys 1000000] [--files 10] [--path-length 110]

Writes ``--files`` Parquet data files holding ``--keys`` distinct BIGINT keys between them, under
a directory deep enough that each file's path is about ``--path-length`` characters (an object
store's table paths are as long), then builds the index the way a rebuild does, without Spark:
``build.ReadKeysTask`` reads each file's keys (entries with the path as a string, as Spark gets
them), the entries go in batches of 10,000 rows (Spark's Arrow batch) to ``build.WriteBaseTask``,
which writes the base of the one shard (1M keys fit one), and the shard is loaded as a batch's
task loads it (``shard.load`` over ``IndexStore.read_entries``). The same entries are also
written and loaded the way the index did before ``__path`` was dictionary-encoded (a plain
string column) for the "before" figures. Nothing here is timed against a goal; it prints sizes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MIB = 2**20


def data_files(root: Path, keys: int, files: int, path_length: int) -> list[dict[str, Any]]:
    """``files`` Parquet files of the keys ``0..keys`` shuffled; their plans as a rebuild plans them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = "00000-7-3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b-00001.parquet"
    # a table's data directory, cut (or padded) so that a file's path is ``path_length`` long
    layout = "warehouse/analytics.db/orders_cdc/data/region=eu/ingest_date=2024-01-01"
    room = max(1, path_length - len(str(root)) - 2 - len(name))
    base = root / (layout + "x" * room)[:room].strip("/")
    base.mkdir(parents=True)
    ids = list(range(keys))
    random.Random(7).shuffle(ids)
    per = -(-keys // files)
    plans = []
    for i in range(files):
        chunk = ids[i * per : (i + 1) * per]
        path = str(base / f"{i:05d}{name[5:]}")
        pq.write_table(pa.table({"id": pa.array(chunk, pa.int64()), "v": pa.array([1] * len(chunk))}), path)
        plans.append({"path": path, "rows": len(chunk), "position_deletes": [], "equality_deletes": []})
    return plans


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--path-length", type=int, default=110)
    a = ap.parse_args()

    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from icesql.engine.base.wire import SHARD
    from icesql.engine.index import shard as S
    from icesql.engine.index.build import ReadKeysTask, WriteBaseTask, shard_count
    from icesql.engine.index.store import IndexStore

    with tempfile.TemporaryDirectory(prefix="icesql-index-mem-") as tmp:
        root = Path(tmp)
        plans = data_files(root, a.keys, a.files, a.path_length)
        path_chars = sum(len(p["path"]) for p in plans) / len(plans)
        assert shard_count(a.keys, 1) == 1, "one shard expected (--keys within KEYS_PER_SHARD)"

        # the rebuild: keys of each file (plain string paths, as Spark carries them) ...
        key_schema = Schema(NestedField(1, "id", LongType(), required=True))
        read = ReadKeysTask(["id"], key_schema.model_dump_json(), {}, str(root))
        plan_batch = pa.RecordBatch.from_pydict({"plan": [json.dumps(p) for p in plans]})
        plain = pa.Table.from_batches(list(read(iter([plan_batch])))).combine_chunks()
        assert plain.num_rows == a.keys
        # ... in Spark-sized batches to the base writer of the shard
        sent = plain.append_column(SHARD, pa.array([0] * plain.num_rows, pa.int32()))
        store = IndexStore(str(root / "table"), "bench", {})
        started = time.monotonic()
        written = pa.Table.from_batches(list(WriteBaseTask(store, 0, 1)(iter(sent.to_batches(10_000)))))
        build_s = time.monotonic() - started
        base = written.column("name")[0].as_py()
        store.write_table("s00000/b-old.parquet", plain)  # the index's files before the encoding
        key_fields = [pa.field("id", pa.int64())]

        started = time.monotonic()
        after = S.load(store.read_entries, [base], key_fields)
        load_s = time.monotonic() - started
        before = store.read_table("s00000/b-old.parquet").combine_chunks()  # what the old load held
        old_loaded = S.load(store.read_entries, ["s00000/b-old.parquet"], key_fields)
        assert after.num_rows == before.num_rows == old_loaded.num_rows == a.keys
        assert (
            after.column(S.PATH).chunk(0).dictionary.to_pylist()
            == old_loaded.column(S.PATH).chunk(0).dictionary.to_pylist()
        )

        disk_new = store.fs.get_file_info(store.path(base)).size
        disk_old = store.fs.get_file_info(store.path("s00000/b-old.parquet")).size
        scale = 1_000_000 / a.keys
        print(f"keys {a.keys:,} over {a.files} data files, mean path {path_chars:.0f} characters")
        print(
            f"  before (__path a string column):       {before.nbytes * scale / MIB:7.1f} MiB Arrow per 1M keys"
            f" ({before.nbytes:,} bytes)"
        )
        print(
            f"  after  (__path dictionary<int32,str>): {after.nbytes * scale / MIB:7.1f} MiB Arrow per 1M keys"
            f" ({after.nbytes:,} bytes)"
        )
        for name in after.column_names:
            print(f"      {name:8} {after.column(name).nbytes / a.keys:5.1f} bytes/entry")
        print(
            f"  an old-format shard loaded now:        {old_loaded.nbytes * scale / MIB:7.1f} MiB Arrow per 1M keys"
        )
        print(
            f"  on disk (Parquet, zstd; keys shuffled): before {disk_old * scale / MIB:.1f} MiB"
            f" ({disk_old:,} bytes), after {disk_new * scale / MIB:.1f} MiB ({disk_new:,} bytes) per 1M keys"
        )
        print(f"  base written in {build_s:.2f}s, loaded in {load_s:.2f}s")


if __name__ == "__main__":
    main()
