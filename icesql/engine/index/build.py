"""Rebuild the key index from the table: the KEY columns of every live row and its position.

The driver plans the table's current snapshot (data files and the delete files that apply to
each: position deletes with a data sequence number at or above the file's, equality deletes of
its partition with a greater one, as the Iceberg spec says); a Spark job reads the KEY columns
of each data file on the executors (``ReadKeysTask``), drops the rows the deletes remove, hashes
the keys into shards as a batch does (``pmod(xxhash64(KEY), N)``) and writes one base file per
shard (``WriteBaseTask``). Memory per task: one data file's keys, or one shard's entries.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

from icesql.engine.backends.hashing import key_schema, key_spark_types
from icesql.engine.base.arrays import repeated, row_numbers
from icesql.engine.base.wire import SHARD, releases_task_memory
from icesql.engine.index.store import IndexStore, Manifest, shard_file

KEYS_PER_SHARD = 4_000_000  # a shard's entries stay well under a few hundred MB in a task


def shard_count(live_rows: int, parallelism: int) -> int:
    return max(1, parallelism, math.ceil(live_rows / KEYS_PER_SHARD))


def plan_live_files(table: Any) -> list[dict[str, Any]]:
    """Each live data file of the current snapshot with the delete files that apply to it."""
    from pyiceberg.manifest import DataFileContent

    from icesql.engine.base.pyiceberg_v3 import content_range, enable_v3, referenced_data_file
    from icesql.engine.iceberg.deletes import is_deletion_vector

    enable_v3()  # manifests read with the v3 schema (a deletion vector's fields)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    data, pos_deletes, eq_deletes = [], [], []
    vectors: dict[str, tuple[Any, int]] = {}  # format v3: data path -> (its deletion vector, seq)
    for manifest in snapshot.manifests(table.io):
        for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            f = e.data_file
            seq = int(e.sequence_number or 0)
            if f.content == DataFileContent.DATA:
                data.append((f, seq))
            elif f.content == DataFileContent.POSITION_DELETES:
                if is_deletion_vector(f):
                    vectors[str(referenced_data_file(f))] = (f, seq)
                else:
                    pos_deletes.append((f, seq))
            else:
                eq_deletes.append((f, seq))
    spec_unpartitioned = table.spec().is_unpartitioned()
    out = []
    for f, seq in data:
        dv = vectors.get(str(f.file_path))
        if dv is not None and dv[1] >= seq:
            # a data file's deletion vector replaces its position delete files (spec)
            rng = content_range(dv[0]) or (0, 0)
            positions: list[Any] = [{"dv": dv[0].file_path, "offset": rng[0], "size": rng[1]}]
        else:
            positions = [d.file_path for d, s in pos_deletes if s >= seq]
        out.append(
            {
                "path": f.file_path,
                "rows": int(f.record_count),
                "position_deletes": positions,
                "equality_deletes": [
                    {"path": d.file_path, "ids": list(d.equality_ids or [])}
                    for d, s in eq_deletes
                    if s > seq and (spec_unpartitioned or d.partition == f.partition)
                ],
            }
        )
    return out


class ReadKeysTask:
    """``mapInArrow`` body: planned data files in, live (KEY, path, pos) entries out."""

    def __init__(
        self, key: Sequence[str], key_fields_json: str, io_properties: dict[str, str], location: str
    ):
        self.key = list(key)
        self.key_fields_json = key_fields_json
        self.io_properties = io_properties
        self.location = location

    @releases_task_memory
    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        from pyiceberg.schema import Schema

        from icesql.engine.connections import stores

        io = stores.load_file_io(self.io_properties, self.location)
        schema = Schema.model_validate_json(self.key_fields_json)
        for b in batches:
            for plan in (json.loads(x) for x in b.column(0).to_pylist()):
                yield from live_entries(io, plan, self.key, schema).to_batches()


def file_entries(io: Any, path: str, key: Sequence[str], key_schema: Any) -> Any:
    """The (KEY, ``__path``, ``__pos``) entries of every row of data file ``path``, deleted or
    not (``live_entries`` takes the deletes off). ``key_schema``: the Iceberg schema of the KEY
    fields; ``__path`` is a plain string."""
    import pyarrow as pa

    from icesql.engine.iceberg import formats
    from icesql.engine.iceberg.schema import arrow_schema
    from icesql.engine.index.shard import PATH, POS

    keys = formats.read_file(io, path, list(key))
    n = keys.num_rows
    return pa.table(
        {
            **{f.name: keys.column(f.name).cast(f.type) for f in arrow_schema(key_schema)},
            PATH: repeated(path, n, pa.string()),
            POS: row_numbers(n),
        }
    )


def live_entries(
    io: Any, plan: dict[str, Any], key: Sequence[str], key_schema: Any, entries: Any = None
) -> Any:
    """The (KEY, ``__path``, ``__pos``) entries of the live rows of one planned data file (a
    ``plan_live_files`` item): its KEY columns, minus the rows its delete files remove.
    ``key_schema``: the Iceberg schema of the KEY fields; ``__path`` is a plain string.
    ``entries``: the file's ``file_entries`` read already (other columns they have stay)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from icesql.engine.iceberg import formats
    from icesql.engine.iceberg.puffin import read_dv
    from icesql.engine.index.shard import POS, remove_keys

    key = list(key)

    path = plan["path"]
    t = entries if entries is not None else file_entries(io, path, key, key_schema)
    gone: list[Any] = []
    for d in plan["position_deletes"]:
        if isinstance(d, dict):  # a deletion vector (format v3)
            gone.append(pa.chunked_array([read_dv(io, d["dv"], d["offset"], d["size"], path)], pa.int64()))
            continue
        dt = formats.read_file(io, d, ["file_path", "pos"])
        gone.append(dt.filter(pc.equal(dt.column("file_path"), path)).column("pos"))
    if gone:
        dead = pa.concat_arrays([c.combine_chunks() for c in gone])
        t = t.filter(pc.invert(pc.is_in(t.column(POS), value_set=dead)))
    for d in plan["equality_deletes"]:
        names = [key_schema.find_column_name(i) or "" for i in d["ids"]]
        if sorted(names) != sorted(key):
            raise ValueError(f"equality delete file {d['path']} is not on the KEY columns")
        t = remove_keys(t, formats.read_file(io, d["path"], names), key)
    return t


class WriteBaseTask:
    """``mapInArrow`` body: a shard's entries in, its base file written, one row out."""

    def __init__(self, store: IndexStore, progress: int, version: int):
        self.store = store
        self.progress = progress
        self.version = version

    @releases_task_memory
    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        from icesql.engine.index.shard import PATH, PATH_TYPE, compact

        def encoded(b: Any) -> Any:  # the path of each entry as a dictionary index, batch by batch
            t = pa.Table.from_batches([b])
            i = t.schema.get_field_index(PATH)
            return t.set_column(i, pa.field(PATH, PATH_TYPE), t.column(PATH).cast(PATH_TYPE))

        tables = [encoded(b) for b in batches if b.num_rows]
        if not tables:
            return
        t = pa.concat_tables(tables).unify_dictionaries()
        shards = t.column(SHARD)
        out = []
        for shard in sorted(set(shards.to_pylist())):
            part = compact(t.filter(pc.equal(shards, shard)).drop_columns([SHARD]))
            name = shard_file(int(shard), "b", self.progress, self.version)
            self.store.write_table(name, part)
            out.append({"shard": int(shard), "name": name, "keys": part.num_rows})
        yield pa.RecordBatch.from_pylist(
            out, schema=pa.schema([("shard", pa.int32()), ("name", pa.string()), ("keys", pa.int64())])
        )


def build_index(
    backend: Any,
    table: Any,
    store: IndexStore,
    *,
    key: Sequence[str],
    progress: int,
    version: int,
    io_properties: dict[str, str],
) -> Manifest:
    """Rebuild the index of ``table`` at its current snapshot on ``backend`` (``backends.base``:
    Spark's executors or this process's threads, the same two stages); the manifest is written
    last."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = table.schema()
    key_fields = [schema.find_field(k) for k in key]
    plans = plan_live_files(table)
    live = sum(p["rows"] for p in plans)
    parallelism = backend.parallelism
    shards = shard_count(live, parallelism)
    snapshot = table.current_snapshot()
    if not plans:
        empty = tuple(() for _ in range(shards))
        m = Manifest(
            progress,
            version,
            shards,
            tuple(key),
            empty,
            snapshot_id=snapshot.snapshot_id if snapshot else None,
        )
        store.write_manifest(m)
        return m
    read = ReadKeysTask(key, key_schema(schema, key).model_dump_json(), io_properties, table.location())
    write = WriteBaseTask(store, progress, version)
    plan_frame = backend.frame({"plan": [json.dumps(p) for p in plans]}, min(len(plans), parallelism * 4))
    entry_struct = StructType(
        [
            *[StructField(f.name, t) for f, t in zip(key_fields, key_spark_types(schema, key), strict=True)],
            StructField("__path", StringType()),
            StructField("__pos", LongType()),
        ]
    )
    entries = plan_frame.map(read, entry_struct).by_shard(key, shards, schema)
    written = entries.map(write, "shard int, name string, keys bigint").rows()
    chains: list[tuple[str, ...]] = [() for _ in range(shards)]
    shard_keys = [0] * shards
    for r in written:
        chains[r["shard"]] = (*chains[r["shard"]], r["name"])
        shard_keys[r["shard"]] += r["keys"]
    m = Manifest(
        progress,
        version,
        shards,
        tuple(key),
        tuple(chains),
        snapshot_id=snapshot.snapshot_id if snapshot else None,
        shard_keys=tuple(shard_keys),
    )
    store.write_manifest(m)
    return m


__all__ = [
    "KEYS_PER_SHARD",
    "build_index",
    "live_entries",
    "plan_live_files",
    "shard_count",
]
