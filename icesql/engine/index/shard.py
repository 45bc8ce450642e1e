"""One shard of the key index in memory: load its chain, look a batch's keys up, apply the batch.

An index entry is a row of the KEY columns plus ``__path`` (the data file) and ``__pos`` (the
row's position in it). ``__path`` is dictionary-encoded (``dictionary<int32, string>``): a shard's
entries point into few data files, so each entry costs a 4-byte index into one table of the
shard's paths instead of its path (~120 bytes, which used to be most of a loaded shard). Files
written with ``__path`` as a plain string (before this encoding) load the same (``_conform``);
anything that sorts or writes the path as a string (the position deletes) takes ``plain_paths``.
Acero's joins need one dictionary per column, so ``remove_keys`` and ``lookup`` unify it first.

A key normally has one entry; it has several only after another writer appended rows with keys
the table already held (then an upsert of that key deletes them all, so the table holds one row
per key again).

A delta file holds the keys a batch removed (``__removed`` true: every entry of the key goes) and
the entries it added; a base file holds entries. Loading applies a chain in order.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icesql.engine.base.arrays import repeated

PATH = "__path"
POS = "__pos"
REMOVED = "__removed"

# the in-memory (and, since it was introduced, on-disk) type of ``__path``
PATH_TYPE = pa.dictionary(pa.int32(), pa.string())

# a chain longer than this is merged into a new base by the next batch that loads it
MAX_CHAIN = 8

# the shards this process loaded last: (index root, shard) -> (chain, entries); a batch's task
# finds its shard here instead of loading the chain again, and so does the follow after a
# rewrite where the tasks run in the same process (a run without Spark)
_CACHE: OrderedDict[tuple[str, int], tuple[tuple[str, ...], Any]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
CACHE_SHARDS = 4


def entry_schema(key_fields: Sequence[pa.Field]) -> pa.Schema:
    # nullable and without field metadata: joins and concatenations meet one schema
    keys = [pa.field(f.name, f.type) for f in key_fields]
    return pa.schema([*keys, pa.field(PATH, PATH_TYPE), pa.field(POS, pa.int64())])


def delta_schema(key_fields: Sequence[pa.Field]) -> pa.Schema:
    return pa.schema([*entry_schema(key_fields), pa.field(REMOVED, pa.bool_())])


def empty(key_fields: Sequence[pa.Field]) -> pa.Table:
    return entry_schema(key_fields).empty_table()


def _conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    # a plain string ``__path`` (a file of an older index, a writer's positions) is encoded here
    return pa.Table.from_arrays([t.column(f.name).cast(f.type) for f in schema], schema=schema)


def _joinable(t: pa.Table) -> pa.Table:
    """``t`` with one dictionary per column (Acero refuses to join chunks of differing ones)."""
    if (
        PATH in t.column_names
        and pa.types.is_dictionary(t.schema.field(PATH).type)
        and t.column(PATH).num_chunks > 1
    ):
        return t.unify_dictionaries()
    return t


def compact(entries: pa.Table) -> pa.Table:
    """``entries`` in one chunk, ``__path``'s dictionary holding only the paths still used
    (removed entries leave their files' paths behind, which a cached shard would accumulate)."""
    entries = entries.combine_chunks()
    if PATH not in entries.column_names or entries.column(PATH).num_chunks != 1:
        return entries
    paths = entries.column(PATH).chunk(0)
    if not pa.types.is_dictionary(paths.type):
        return entries
    used = pc.unique(paths.indices).drop_null()
    if len(used) == len(paths.dictionary):
        return entries
    indices = pc.index_in(paths.indices, value_set=used).cast(paths.type.index_type)
    pruned = pa.DictionaryArray.from_arrays(indices, paths.dictionary.take(used))
    return entries.set_column(entries.schema.get_field_index(PATH), entries.schema.field(PATH), pruned)


def plain_paths(t: pa.Table) -> pa.Table:
    """``t`` with ``__path`` as a plain string column (to sort on it, or write it as a file path)."""
    i = t.schema.get_field_index(PATH)
    return t.set_column(i, pa.field(PATH, pa.string()), t.column(PATH).cast(pa.string()))


def _in_keys(entries: pa.Table, keys: pa.Table, column: str) -> Any:
    """A mask of the ``entries`` whose one KEY ``column`` is among ``keys``': a set lookup, 2-8x
    cheaper than Acero's joins (which build and probe a hash table and copy every column through
    it); nulls match nothing, as in them."""
    values = entries.column(column)
    wanted = keys.column(column).cast(values.type).combine_chunks()
    return pc.is_in(values, value_set=wanted, skip_nulls=True)


def remove_keys(entries: pa.Table, keys: pa.Table, key: Sequence[str]) -> pa.Table:
    """``entries`` without the entries of ``keys``."""
    if entries.num_rows == 0 or keys.num_rows == 0:
        return entries
    if len(key) == 1:
        return entries.filter(pc.invert(_in_keys(entries, keys, key[0])))
    entries = _joinable(entries)
    gone = keys.select(list(key)).group_by(list(key)).aggregate([])
    kept = entries.join(gone, keys=list(key), join_type="left anti", use_threads=False)
    return kept.select(entries.column_names)


def load(read: Any, chain: Sequence[str], key_fields: Sequence[pa.Field]) -> pa.Table:
    """The shard's entries: the chain's base, then each delta (``read(name)`` gives a file)."""
    schema = entry_schema(key_fields)
    key = [f.name for f in key_fields]
    entries = schema.empty_table()
    for name in chain:
        t = read(name)
        if REMOVED in t.column_names:
            removed = t.filter(pa.compute.equal(t.column(REMOVED), True))
            entries = remove_keys(entries, removed, key)
            t = t.filter(pa.compute.invert(t.column(REMOVED)))
        entries = pa.concat_tables([entries, _conform(t, schema)])
    return compact(entries)


def cached(root: str, shard: int, chain: Sequence[str]) -> pa.Table | None:
    """The entries of ``shard`` of the index at ``root`` as ``chain`` leaves them, when this
    process holds them (``remember``), else None."""
    with _CACHE_LOCK:
        hit = _CACHE.get((root, shard))
        if hit is not None and hit[0] == tuple(chain):
            _CACHE.move_to_end((root, shard))
            return hit[1]
    return None


def remember(
    root: str, shard: int, chain: Sequence[str], entries: pa.Table, keep: int = CACHE_SHARDS
) -> None:
    """Keep ``entries`` as the shard's state at ``chain`` (the ``keep`` shards used last)."""
    with _CACHE_LOCK:
        _CACHE[(root, shard)] = (tuple(chain), entries)
        _CACHE.move_to_end((root, shard))
        while len(_CACHE) > keep:
            _CACHE.popitem(last=False)


def lookup(entries: pa.Table, keys: pa.Table, key: Sequence[str]) -> pa.Table:
    """The entries of ``keys`` (the rows a batch replaces or deletes)."""
    if entries.num_rows == 0 or keys.num_rows == 0:
        return entries.slice(0, 0)
    if len(key) == 1:
        return entries.filter(_in_keys(entries, keys, key[0]))
    entries = _joinable(entries)
    wanted = keys.select(list(key)).group_by(list(key)).aggregate([])
    found = entries.join(wanted, keys=list(key), join_type="inner", use_threads=False)
    return found.select(entries.column_names)


def delta(removed_keys: pa.Table, added: pa.Table, key_fields: Sequence[pa.Field]) -> pa.Table:
    """A delta file: ``removed_keys`` (every entry of each goes), then ``added`` entries."""
    schema = delta_schema(key_fields)
    n = removed_keys.num_rows
    gone = pa.Table.from_arrays(
        [
            *(removed_keys.column(f.name).cast(f.type) for f in key_fields),
            pa.nulls(n, PATH_TYPE),
            pa.nulls(n, pa.int64()),
            repeated(True, n, pa.bool_()),
        ],
        schema=schema,
    )
    new = _conform(added, entry_schema(key_fields)).append_column(REMOVED, repeated(False, added.num_rows, pa.bool_()))
    return pa.concat_tables([gone, new.cast(schema)]).combine_chunks()  # one dictionary per file


def apply(entries: pa.Table, removed_keys: pa.Table, added: pa.Table, key: Sequence[str]) -> pa.Table:
    """``entries`` after a delta (the same as loading the chain with the delta appended)."""
    kept = remove_keys(entries, removed_keys, key).cast(entries.schema)
    added = _conform(added, entries.schema)
    return compact(pa.concat_tables([kept, added]))


__all__ = [
    "MAX_CHAIN",
    "PATH",
    "PATH_TYPE",
    "POS",
    "REMOVED",
    "CACHE_SHARDS",
    "apply",
    "cached",
    "compact",
    "delta",
    "delta_schema",
    "empty",
    "entry_schema",
    "load",
    "lookup",
    "plain_paths",
    "remember",
]
