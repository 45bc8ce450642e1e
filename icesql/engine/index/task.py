"""The executor side of an upsert batch with position deletes: one task per group of shards.

The batch's changes arrive hashed by KEY into shards (``__shard``: ``pmod(xxhash64(KEY), N)``,
the same expression ``build`` used, so a shard of the batch meets the shard of the index). For
each shard a task:

1. keeps the last change per KEY (the changelog's order: ``__seq, __file, __blk, __line``);
2. loads the shard of the index (its chain of files; the worker keeps the shards it loaded last);
3. looks the keys up: every entry found is a row this batch replaces or deletes;
4. writes the new rows (the changes that are not deletes) as data files, tracking where each
   row lands, and hands the found rows' positions (sorted by file and position) back in a
   ``POSITIONS`` row: the batch's writer writes every shard's positions as one delete file;
5. writes the shard's delta (keys removed, entries added), and a new base when the chain is long.

It returns the batch writer's usual rows (one per data file, ``DROPPED`` for null keys dropped),
one ``POSITIONS`` row per shard that replaced rows, and one ``INDEX`` row per shard with its new
chain.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from icesql.engine.base.arrays import row_numbers
from icesql.engine.base.changelog import OP, drop_null_keys, last_per_key
from icesql.engine.base.hooks import kill_point
from icesql.engine.base.wire import (
    DROPPED,
    INDEX,
    SHARD,
    file_row,
    files_batch,
    positions_row,
    releases_task_memory,
)
from icesql.engine.iceberg.lineage import ROW_ID, replaced_row_ids
from icesql.engine.index.shard import CACHE_SHARDS, cached, remember


class ShardTask:
    """``mapInArrow`` body of an upsert batch on the key index (picklable)."""

    def __init__(
        self,
        spec: Any,
        store: Any,
        chains: Sequence[Sequence[str]],
        *,
        key: Sequence[str],
        data_columns: Sequence[str],
        progress: int,
        version: int,
        batch_id: int,
        sink: str,
        relation: str,
        key_enforced: bool,
        row_ids: dict[str, tuple[int, bool]] | None = None,
    ) -> None:
        self.spec = spec
        # format v3: the live data files' row id bases (``lineage.row_id_bases``); a replaced
        # row's new version keeps its id. None: no row lineage (v2)
        self.row_ids = row_ids
        self.store = store
        self.keep_shards = (
            CACHE_SHARDS  # loaded shards the process keeps (all of them in a run without Spark)
        )
        self.chains = [tuple(c) for c in chains]
        self.key = list(key)
        self.data_columns = list(data_columns)
        self.progress = progress
        self.version = version
        self.batch_id = batch_id
        self.sink = sink
        self.relation = relation
        self.key_enforced = key_enforced

    @releases_task_memory
    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        rows: list[dict[str, Any]] = []
        tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if tables:
            changes = pa.concat_tables(tables, promote_options="default")
            changes, dropped = drop_null_keys(
                changes, self.key, enforced=self.key_enforced, sink=self.sink, relation=self.relation
            )
            if dropped:
                rows.append({"content": DROPPED, "file": "", "rows": dropped, "bytes": 0})
            if changes.num_rows:
                shards = changes.column(SHARD)
                for shard in sorted(set(shards.to_pylist())):
                    part = changes.filter(pc.equal(shards, shard))
                    rows.extend(self._shard(int(shard), part))
        if rows:
            yield files_batch(rows)

    def _key_fields(self) -> list[Any]:
        from icesql.engine.iceberg.schema import arrow_schema

        schema = arrow_schema(self.spec.schema())
        return [schema.field(k) for k in self.key]

    def _shard(self, shard: int, changes: Any) -> list[dict[str, Any]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        from icesql.engine.iceberg.writer import FILE_PATH, POS, DataFileWriter
        from icesql.engine.index import shard as S
        from icesql.engine.index.store import shard_file

        key_fields = self._key_fields()
        changes = last_per_key(changes, self.key)
        keys = pa.table({f.name: changes.column(f.name).cast(f.type) for f in key_fields})
        chain = self.chains[shard] if shard < len(self.chains) else ()
        entries = cached(self.store.root, shard, chain)
        if entries is None:
            entries = S.load(self.store.read_entries, chain, key_fields)
        found = S.lookup(entries, keys, self.key)

        out: list[dict[str, Any]] = []
        written: list[Any] = []
        lineage = self.row_ids is not None
        data_w = DataFileWriter(self.spec, "data", track=self.key, lineage=lineage)
        try:
            upserts = changes
            if OP in changes.column_names:
                upserts = changes.filter(pc.fill_null(pc.not_equal(changes.column(OP), "d"), True))
            columns = list(self.data_columns)
            if lineage and upserts.num_rows and found.num_rows:
                upserts = self._keep_row_ids(upserts, found, key_fields)
                columns.append(ROW_ID)
            if upserts.num_rows:
                data_w.write(upserts.select(columns))
                kill_point("write", self.batch_id)
            written = data_w.close()
            if found.num_rows:
                deletes = (
                    S.plain_paths(found)
                    .rename_columns([*self.key, FILE_PATH, POS])
                    .sort_by([(FILE_PATH, "ascending"), (POS, "ascending")])
                )
                out.append(positions_row(deletes))
        except BaseException:
            data_w.abort()
            raise
        added = data_w.positions()
        # the shard's change: every changed key loses its old entries, written rows are added;
        # the delta is always written (it is also the record of the keys this batch changed),
        # and a long chain is merged into a new base
        delta_name = shard_file(shard, "d", self.progress, self.version)
        self.store.write_table(delta_name, S.delta(keys, added, key_fields))
        new_entries = S.apply(entries, keys, added, self.key)
        if len(chain) + 1 > S.MAX_CHAIN:
            base = shard_file(shard, "b", self.progress, self.version)
            self.store.write_table(base, new_entries)
            new_chain: tuple[str, ...] = (base,)
        else:
            new_chain = (*chain, delta_name)
        remember(self.store.root, shard, new_chain, new_entries, self.keep_shards)
        out.extend(file_row(f) for f in written)
        info = {
            "shard": shard,
            "chain": list(new_chain),
            "delta": delta_name,
            "keys": new_entries.num_rows,
            "replaced": found.num_rows,
        }
        out.append({"content": INDEX, "file": json.dumps(info), "rows": new_entries.num_rows, "bytes": 0})
        return out

    def _keep_row_ids(self, upserts: Any, found: Any, key_fields: list[Any]) -> Any:
        """``upserts`` with ``_row_id``: the id of the row each replaces (``lineage``), null for
        a new KEY."""
        import pyarrow as pa

        from icesql.engine.connections import stores
        from icesql.engine.index import shard as S

        io = stores.load_file_io(dict(self.spec.io_properties), self.spec.location)
        ids = replaced_row_ids(io, S.plain_paths(found), self.row_ids or {}, self.key, S.PATH, S.POS)
        probe = pa.table({f.name: upserts.column(f.name).cast(f.type) for f in key_fields})
        probe = probe.append_column("__i", row_numbers(upserts.num_rows))
        joined = probe.join(ids, keys=self.key, join_type="left outer", use_threads=False).sort_by("__i")
        return upserts.append_column(ROW_ID, joined.column(ROW_ID))


__all__ = ["INDEX", "SHARD", "ShardTask", "last_per_key"]
