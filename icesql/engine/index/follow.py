"""Follow the table's changes into the key index, instead of rebuilding it from the table.

A rewrite (icesql's own compaction, or anyone's) moves rows to new data files; another writer's
append adds rows. The index describes the table at one snapshot (``since``) plus the sink's own
batches committed after it; ``table_changes`` walks the snapshots from the current one back to
``since`` and collects what the others did: the data files they removed, the data files they
added (still live now), and the position-delete files they added. ``follow`` then updates the
index from just that:

* entries in a removed file, or at a position another writer deleted, go;
* the live rows of each added file (its KEY columns, minus the delete files that apply to it now,
  as a rebuild reads every file) come in, hashed into the shards as a batch hashes its keys.

Per shard that is one delta file (the keys it touches lose every entry, then get back the ones
that stay plus the new ones), so a rewrite of a few files costs reading those files' keys and each
shard's chain on the driver - milliseconds for the small rewrites a sink makes between its commits,
where a rebuild is a Spark job over the whole table (seconds, under the sink's commit lock).

What it cannot follow, it leaves to a rebuild (``table_changes`` returns None): a snapshot it
cannot walk back to ``since`` (expired, rolled back), equality deletes by another writer, or so many rows moved that a rebuild is faster (``worth_following``: more than a
quarter of the index's keys and over 50,000 rows, or over 4 million).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from icesql.engine.base.arrays import row_numbers
from icesql.engine.index.store import IndexStore, Manifest, shard_file

log = logging.getLogger("icesql.sink")

# rows of added files read on the driver: a rebuild's Spark job reads in parallel, and wins when
# most of the table moved (benchmarks/index_follow.py: 1M keys, a full compaction followed in 7.4 s,
# rebuilt in 3.5 s; 4,000 rows moved, 0.9 s against 5.1 s)
MAX_ROWS = 4_000_000  # never more than this
MAX_SHARE = 0.25  # nor more than this share of the index's keys, unless ...
ALWAYS_ROWS = 50_000  # ... this few


@dataclass(frozen=True)
class TableChanges:
    """What writers other than the sink's batches did since the index's snapshot."""

    snapshots: int  # how many snapshots the walk passed (the sink's own included)
    removed: frozenset[str]  # data files removed
    added: tuple[str, ...]  # data files added and still live
    position_deletes: tuple[Any, ...]  # position-delete files and deletion vectors added (DataFiles)
    added_rows: int  # rows in ``added`` (before deletes)
    others: int = 0  # snapshots of other writers the walk passed (a rewrite counts as one)

    @property
    def empty(self) -> bool:
        return not (self.removed or self.added or self.position_deletes)


def table_changes(table: Any, since: int | None, sink_id: str) -> TableChanges | None:
    """The changes of other writers between snapshot ``since`` (None: the empty table) and the
    current snapshot, or None when they cannot be followed (see the module docstring)."""
    from pyiceberg.manifest import DataFileContent, ManifestEntryStatus

    from icesql.engine.base.pyiceberg_v3 import enable_v3
    from icesql.engine.commit.snapshot import SINK_ID, snapshot_properties

    enable_v3()  # a deletion vector's referenced file and range are read with the v3 schema
    metadata = table.metadata
    snap = table.current_snapshot()
    walked: list[Any] = []
    seen: set[int] = set()
    while snap is not None and snap.snapshot_id != since:
        if snap.snapshot_id in seen:
            return None
        seen.add(snap.snapshot_id)
        walked.append(snap)
        parent = snap.parent_snapshot_id
        snap = metadata.snapshot_by_id(parent) if parent is not None else None
        if parent is not None and snap is None:
            return None  # expired on the way: the walk cannot reach ``since``
    if since is not None and snap is None:
        return None  # ``since`` is not an ancestor of the current snapshot
    added: dict[str, int] = {}
    removed: set[str] = set()
    deletes: list[Any] = []
    others = 0
    for s in reversed(walked):  # oldest first: a file added, then removed, is neither
        if snapshot_properties(s).get(SINK_ID) == sink_id:
            continue  # the sink's own batch: the index has it already
        others += 1
        for manifest in s.manifests(table.io):
            if manifest.added_snapshot_id != s.snapshot_id:
                continue
            for e in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                f = e.data_file
                if e.status == ManifestEntryStatus.EXISTING:
                    continue
                if f.content == DataFileContent.DATA:
                    if e.status == ManifestEntryStatus.ADDED:
                        added[f.file_path] = int(f.record_count)
                    else:
                        removed.add(f.file_path)
                        added.pop(f.file_path, None)
                elif e.status == ManifestEntryStatus.ADDED:
                    if f.content != DataFileContent.POSITION_DELETES:
                        return None  # equality deletes: a rebuild reads them
                    # a position delete file, or a deletion vector (v3: a compaction that rebased
                    # onto the sink's commits carries their deletes over as the new files' vectors)
                    deletes.append(f)
    return TableChanges(
        snapshots=len(walked),
        removed=frozenset(removed),
        added=tuple(sorted(added)),
        position_deletes=tuple(deletes),
        added_rows=sum(added.values()),
        others=others,
    )


def worth_following(changes: TableChanges, index_keys: int) -> bool:
    """Whether following ``changes`` is cheaper than a rebuild (see ``MAX_SHARE``)."""
    rows = changes.added_rows
    return rows <= ALWAYS_ROWS or (rows <= MAX_ROWS and rows <= MAX_SHARE * index_keys)


@dataclass(frozen=True)
class Hashed:
    """Data files' KEY entries read and hashed into ``shards`` shards ahead of a follow
    (``hash_files``): a rewrite beside a sink reads and hashes the files it wrote before it waits
    for the sink's lock, so its follow under the lock only takes the deletes off them."""

    shards: int
    files: Mapping[str, Any]  # path -> (KEY, __path, __pos, shard) of every row of the file


def hash_files(table: Any, paths: Sequence[str], *, key: Sequence[str], shards: int) -> Hashed:
    """Every row's index entry and shard, for the data files ``paths`` of ``table``."""
    import pyarrow as pa

    from icesql.engine.backends.hashing import key_schema, shards_of
    from icesql.engine.base.wire import SHARD
    from icesql.engine.index.build import file_entries

    schema = table.schema()
    key = list(key)
    read = {p: file_entries(table.io, p, key, key_schema(schema, key)) for p in paths}
    if not read:
        return Hashed(shards, {})
    keys = pa.concat_tables(read.values())
    shard = shards_of([keys.column(k) for k in key], shards)
    files, offset = {}, 0
    for path, t in read.items():
        files[path] = t.append_column(SHARD, shard.slice(offset, t.num_rows))
        offset += t.num_rows
    return Hashed(shards, files)


def movable(changes: TableChanges, moved: Any) -> bool:
    """Whether ``changes`` can be followed from ``moved`` alone (a rewrite's rows with their new
    file and position, ``compact_table(track=KEY)``): the rewrite is the only other writer's
    snapshot since the index's (rows another writer appended meanwhile could be among those it
    rewrote, unknown to the index), the data files added are exactly the ones it wrote, and no
    position delete was added (so every row it wrote is live). Then nothing is read: each entry
    in a removed file moves to where its key was written."""
    if moved is None or not changes.added or changes.position_deletes or changes.others != 1:
        return False
    import pyarrow.compute as pc

    from icesql.engine.index.shard import PATH

    written = {str(p) for p in pc.unique(moved.column(PATH)).to_pylist()}
    return written == set(changes.added)


class NotMoved(Exception):
    """The index's entries in the removed files and the rows a rewrite wrote do not pair up one
    to one (rows the index did not know, a key twice): the index follows by reading the
    written files instead (``upsert.open_index``), or is rebuilt."""


class _Moves:
    """A rewrite's ``moved`` rows, made ready to be joined with the index's entries once per shard:
    the join carries only the KEY and a row number (strings in a join's build side made it 8x
    slower), the new file and position are taken by that number."""

    def __init__(self, moved: Any, key_fields: Sequence[Any]) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        from icesql.engine.index.shard import PATH, POS

        self.key = [f.name for f in key_fields]
        self.rows = moved.num_rows
        self.targets = pa.table(
            {
                **{f.name: moved.column(f.name).cast(f.type) for f in key_fields},
                "__i": row_numbers(moved.num_rows),
            }
        )
        self.paths = pc.dictionary_encode(moved.column(PATH)).combine_chunks()
        self.positions = moved.column(POS).combine_chunks()

    def of(self, stale: Any) -> Any:
        """Where the rows of the ``stale`` entries (in removed files) went: (KEY, path, position)
        per entry, or ``NotMoved`` unless each one went to exactly one place."""
        import pyarrow as pa

        from icesql.engine.index.shard import PATH, POS

        went = stale.select(self.key).join(self.targets, keys=self.key, join_type="inner", use_threads=False)
        if went.num_rows != stale.num_rows:
            raise NotMoved(
                f"{stale.num_rows} entries in rewritten files, {went.num_rows} found among the rows written"
            )
        at = went.column("__i")
        return pa.table(
            {
                **{k: went.column(k) for k in self.key},
                PATH: self.paths.take(at).cast(pa.string()),
                POS: self.positions.take(at),
            }
        )


def follow(
    table: Any,
    store: IndexStore,
    manifest: Manifest,
    changes: TableChanges,
    *,
    key: Sequence[str],
    progress: int,
    version: int,
    hashed: Hashed | None = None,
    moved: Any = None,
) -> Manifest:
    """The index ``manifest`` after ``changes``, as a manifest of the table's current snapshot
    (written, with a delta per shard it changes; the shards' chains are otherwise kept).
    ``hashed``: added files read and hashed already (used when hashed for as many shards).
    ``moved``: the rows a rewrite wrote, with their new file and position (``movable``): the
    entries in the removed files move there, nothing is read or hashed; when they do not pair up
    one to one, ``NotMoved``."""
    import time

    import pyarrow as pa
    import pyarrow.compute as pc

    from icesql.engine.backends.hashing import key_arrow_fields, key_schema
    from icesql.engine.base.wire import SHARD
    from icesql.engine.index import shard as S
    from icesql.engine.index.build import live_entries, plan_live_files

    started = time.monotonic()
    schema = table.schema()
    key = list(key)
    key_fields = key_arrow_fields(schema, key)

    # the live rows of the added files, with their shards
    new = S.empty(key_fields)
    remap = _Moves(moved, key_fields) if movable(changes, moved) else None
    if changes.added and remap is None:
        wanted = set(changes.added)
        plans = [p for p in plan_live_files(table) if p["path"] in wanted]
        ready = dict(hashed.files) if hashed is not None and hashed.shards == manifest.shards else {}
        unread = [p["path"] for p in plans if p["path"] not in ready]
        ready.update(hash_files(table, unread, key=key, shards=manifest.shards).files)
        ks = key_schema(schema, key)
        parts = [live_entries(table.io, p, key, ks, entries=ready[p["path"]]) for p in plans]
        parts = [p for p in parts if p.num_rows]
        if parts:
            new = pa.concat_tables(parts)
    removed_at = _deleted_positions(table.io, changes.position_deletes)
    read = time.monotonic()

    chains = list(manifest.chains)
    shard_keys = list(manifest.shard_keys) or [0] * manifest.shards
    touched = 0
    claimed = 0  # rows of ``remap`` whose entries were found
    for shard in range(manifest.shards if not changes.empty else 0):
        incoming = S.empty(key_fields)
        if new.num_rows:
            incoming = new.filter(pc.equal(new.column(SHARD), shard)).drop_columns([SHARD])
        chain = chains[shard]
        # the shard as the batches' tasks left it, where they run in this process (no Spark)
        entries = S.cached(store.root, shard, chain)
        held = entries is not None
        if entries is None:
            entries = S.load(store.read_entries, chain, key_fields)
        gone = _gone(entries, changes.removed, removed_at)
        stale = entries.filter(gone) if gone is not None else entries.slice(0, 0)
        if remap is not None:
            incoming = remap.of(stale)
            claimed += incoming.num_rows
        if not incoming.num_rows and not stale.num_rows:
            continue
        touched += 1
        affected = pa.concat_tables([stale.select(key), incoming.select(key).cast(stale.select(key).schema)])
        affected = affected.group_by(key).aggregate([])
        staying = S.lookup(entries.filter(pc.invert(gone)) if gone is not None else entries, affected, key)
        added = pa.concat_tables([S.plain_paths(staying), _plain(incoming, key_fields)])
        delta_name = shard_file(shard, "d", progress, version)
        store.write_table(delta_name, S.delta(affected, added, key_fields))
        after = S.apply(entries, affected, added, key)
        if len(chain) + 1 > S.MAX_CHAIN:
            base = shard_file(shard, "b", progress, version)
            store.write_table(base, after)
            chains[shard] = (base,)
        else:
            chains[shard] = (*chain, delta_name)
        if held:  # the next batch's task finds the shard as it is now (the tasks keep every shard)
            S.remember(store.root, shard, chains[shard], after, keep=max(S.CACHE_SHARDS, manifest.shards))
        shard_keys[shard] = after.num_rows
    if remap is not None and claimed != remap.rows:
        # rows written that no entry went to: rows the index did not know (nothing is referenced
        # yet: the deltas written are left to the cleanup)
        raise NotMoved(f"{remap.rows} rows written, {claimed} entries moved to them")
    current = table.current_snapshot()
    m = replace(
        manifest,
        progress=progress,
        version=version,
        chains=tuple(chains),
        added_files=(),
        snapshot_id=current.snapshot_id if current is not None else None,
        shard_keys=tuple(shard_keys),
        deltas=(),
    )
    store.write_manifest(m)
    log.debug(
        "key index followed %d snapshot(s): %d shard(s) changed; %.2fs reading and hashing %d row(s), %.2fs "
        "updating the shards%s",
        changes.snapshots,
        touched,
        read - started,
        new.num_rows,
        time.monotonic() - read,
        f" ({claimed} moved by the rewrite, nothing read)" if remap is not None else "",
    )
    return m


def _plain(entries: Any, key_fields: Sequence[Any]) -> Any:
    """``entries`` (KEY, path, pos) with the index's key types and a plain string path."""
    import pyarrow as pa

    from icesql.engine.index.shard import PATH, POS

    return pa.Table.from_arrays(
        [
            *(entries.column(f.name).cast(f.type) for f in key_fields),
            entries.column(PATH).cast(pa.string()),
            entries.column(POS).cast(pa.int64()),
        ],
        names=[*(f.name for f in key_fields), PATH, POS],
    )


def _deleted_positions(io: Any, delete_files: Sequence[Any]) -> dict[str, Any]:
    """Per data file, the positions the position-delete files and deletion vectors
    ``delete_files`` (pyiceberg DataFiles) remove (a pyarrow array)."""
    import numpy as np
    import pyarrow as pa

    from icesql.engine.iceberg.deletes import file_positions

    found: dict[str, list[Any]] = {}
    for f in delete_files:
        for path, positions in file_positions(io, f).items():
            found.setdefault(path, []).append(np.asarray(positions, dtype=np.int64))
    return {path: pa.array(np.unique(np.concatenate(parts))) for path, parts in found.items()}


def _gone(entries: Any, removed: frozenset[str], deleted_at: dict[str, Any]) -> Any:
    """A mask of the entries in a removed file or at a deleted position (None: none can be).
    The paths are compared on ``__path``'s dictionary (a few files per shard), not entry by entry."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from icesql.engine.index.shard import PATH, POS

    if entries.num_rows == 0 or not (removed or deleted_at):
        return None
    if entries.column(PATH).num_chunks != 1:
        entries = entries.combine_chunks()
    paths = entries.column(PATH).chunk(0)  # dictionary-encoded, as a loaded shard holds it
    files = paths.dictionary.cast(pa.string())
    mask = pc.is_in(files, value_set=pa.array(sorted(removed), pa.string())).take(paths.indices)
    for path, deleted in deleted_at.items():
        named = pc.equal(files, path)
        if not pc.any(named).as_py():
            continue
        here = named.take(paths.indices)
        mask = pc.or_(mask, pc.and_(here, pc.is_in(entries.column(POS), value_set=deleted)))
    return pc.fill_null(mask, False)


__all__ = [
    "MAX_ROWS",
    "Hashed",
    "NotMoved",
    "TableChanges",
    "follow",
    "hash_files",
    "movable",
    "table_changes",
    "worth_following",
]
