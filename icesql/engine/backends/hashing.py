"""Spark's ``pmod(xxhash64(KEY...), N)`` computed in this process, over Arrow columns.

The key index is sharded by Spark's own hash of the KEY columns (``build.shard_expression``), so a
batch written without Spark (``local_query``) or a follow that hashes a few files' keys must put a
key in the shard Spark would. Spark's ``XxHash64`` is the standard XXH64 of each non-null value's
bytes, little-endian, chained through the columns as the seed (42 first):

* boolean, byte, short, int, date: the 4 bytes of an int (true = 1), ``XXH64.hashInt``;
* long, timestamp (with or without zone, microseconds), a decimal of precision <= 18 (its unscaled
  long): the 8 bytes of a long, ``XXH64.hashLong``;
* float, double: the bits of the value (-0.0 as 0.0, NaN canonical), as an int or a long;
* string, binary: the bytes, ``XXH64.hashUnsafeBytes`` (through the ``xxhash`` package's C code);
* a wider decimal: the unscaled value's two's complement bytes, big-endian (``BigInteger``).

The fixed-width cases are numpy over whole columns; the variable-width ones loop over the values.
``tests/engine/test_index_hashing.py`` checks every type against Spark's own expression.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icesql.engine.base.changelog import quote_column

SEED = 42
P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
P4 = np.uint64(0x85EBCA77C2B2AE63)
P5 = np.uint64(0x27D4EB2F165667C5)
MASK32 = np.uint64(0xFFFFFFFF)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * P2
    h = h ^ (h >> np.uint64(29))
    h = h * P3
    return h ^ (h >> np.uint64(32))


def _hash_int(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """``XXH64.hashInt``: values int32 (as uint64 of their 32 bits), seed uint64."""
    h = seed + P5 + np.uint64(4)
    h = h ^ ((values & MASK32) * P1)
    h = _rotl(h, 23) * P2 + P3
    return _fmix(h)


def _hash_long(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """``XXH64.hashLong``: values and seed uint64."""
    h = seed + P5 + np.uint64(8)
    h = h ^ (_rotl(values * P2, 31) * P1)
    h = _rotl(h, 27) * P1 + P4
    return _fmix(h)


def _bytes_hash(values: Sequence[bytes | None], seed: np.ndarray) -> np.ndarray:
    import xxhash

    out = seed.copy()
    for i, v in enumerate(values):
        if v is not None:
            out[i] = xxhash.xxh64_intdigest(v, int(seed[i]))
    return out


def _as_u64(a: Any, dtype: Any) -> np.ndarray:
    return (
        np.asarray(a.to_numpy(zero_copy_only=False), dtype=dtype)
        .view(np.uint64 if dtype == np.int64 else np.uint32)
        .astype(np.uint64)
    )


def _column(col: pa.ChunkedArray | pa.Array, seed: np.ndarray) -> np.ndarray:
    """The running hash after one column (a null leaves the seed as it was)."""
    t = col.type
    n = len(col)
    valid = (
        np.ones(n, dtype=bool)
        if col.null_count == 0
        else np.asarray(pc.is_valid(col).to_numpy(zero_copy_only=False), dtype=bool)
    )
    if pa.types.is_boolean(t):
        h = _hash_int(_as_u64(pc.cast(pc.fill_null(col, False), pa.int32()), np.int32), seed)
    elif pa.types.is_integer(t) and t.bit_width <= 32 or pa.types.is_date32(t):
        h = _hash_int(_as_u64(pc.fill_null(pc.cast(col, pa.int32()), 0), np.int32), seed)
    elif pa.types.is_int64(t):
        h = _hash_long(_as_u64(pc.fill_null(col, 0), np.int64), seed)
    elif pa.types.is_timestamp(t):
        micros = col.cast(pa.timestamp("us", t.tz)).cast(pa.int64())
        h = _hash_long(_as_u64(pc.fill_null(micros, 0), np.int64), seed)
    elif pa.types.is_float32(t):
        f = np.asarray(pc.fill_null(col, 0.0).to_numpy(zero_copy_only=False), dtype=np.float32)
        f = np.where(f == 0.0, np.float32(0.0), f)  # -0.0 hashes as 0.0
        bits = np.where(np.isnan(f), np.int32(0x7FC00000), f.view(np.int32))
        h = _hash_int(bits.view(np.uint32).astype(np.uint64), seed)
    elif pa.types.is_float64(t):
        d = np.asarray(pc.fill_null(col, 0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        d = np.where(d == 0.0, 0.0, d)
        bits = np.where(np.isnan(d), np.int64(0x7FF8000000000000), d.view(np.int64))
        h = _hash_long(bits.view(np.uint64), seed)
    elif pa.types.is_decimal(t) and t.precision <= 18:
        unscaled = [_unscaled(v, t.scale) for v in col.to_pylist()]
        h = _hash_long(np.array(unscaled, dtype=np.int64).view(np.uint64), seed)
    elif pa.types.is_decimal(t):
        return _bytes_hash(
            [None if v is None else _big_integer(_unscaled(v, t.scale)) for v in col.to_pylist()], seed
        )
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        return _bytes_hash([None if v is None else v.encode() for v in col.to_pylist()], seed)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _bytes_hash(col.to_pylist(), seed)
    else:
        raise ValueError(f"the key index cannot hash a KEY column of type {t} without Spark")
    return np.where(valid, h, seed)


def _unscaled(v: Any, scale: int) -> int:
    """A decimal's unscaled value, exactly (the default context would round past 28 digits)."""
    import decimal

    return 0 if v is None else int(v.scaleb(scale, context=decimal.Context(prec=100)))


def _big_integer(v: int) -> bytes:
    """``BigInteger.toByteArray``: the shortest two's complement, big-endian."""
    return v.to_bytes(max(1, (v.bit_length() + 8) // 8), "big", signed=True)


def hashable(types: Sequence[pa.DataType]) -> str | None:
    """None when ``hash_keys`` takes columns of these types, else why not (``_column`` tried on
    an empty column of each)."""
    for t in types:
        try:
            _column(pa.array([], type=t), np.zeros(0, dtype=np.uint64))
        except (ValueError, pa.ArrowNotImplementedError):
            return f"a KEY column of type {t} is hashed by Spark"
    return None


def key_hashable(rows: Any, key: Sequence[str]) -> str | None:
    """None when a sink's KEY names columns of ``rows`` (a Spark StructType: the source's rows as
    a run without Spark builds them) that ``hash_keys`` takes, else why not."""
    from pyspark.sql.pandas.types import to_arrow_type

    fields = {f.name.lower(): f for f in rows.fields}
    keys = [fields.get(k.lower()) for k in key]
    if any(f is None for f in keys):
        return "its KEY is not a column of the source's rows"
    return hashable([to_arrow_type(f.dataType) for f in keys if f is not None])


def hash_keys(columns: Sequence[pa.ChunkedArray | pa.Array]) -> np.ndarray:
    """Spark's ``xxhash64(c1, c2, ...)`` of each row, as int64 (the columns in the index's types)."""
    n = len(columns[0]) if columns else 0
    h = np.full(n, SEED, dtype=np.uint64)
    for col in columns:
        h = _column(col, h)
    return h.view(np.int64)


def shards_of(columns: Sequence[pa.ChunkedArray | pa.Array], shards: int) -> pa.Array:
    """Spark's ``pmod(xxhash64(KEY...), shards)`` of each row, as int32 (``build.shard_expression``)."""
    h = hash_keys(columns)
    return pa.array((h % np.int64(shards)).astype(np.int32))  # numpy's % of a positive is >= 0, as pmod


def by_shard(table: pa.Table, shard: pa.Array) -> list[list[pa.RecordBatch]]:
    """The rows of ``table`` grouped by ``shard`` (one per row), in shard order: one task's input
    per shard, as Spark's ``repartition(N, shard)`` hands them to its tasks."""
    return [
        table.filter(pc.equal(shard, pa.scalar(s, shard.type))).to_batches()
        for s in pc.unique(shard).sort().to_pylist()
    ]


def shard_expression(key: Sequence[str], key_types: Sequence[Any], shards: int) -> Any:
    """The shard of a row: Spark's xxhash64 of the KEY columns (cast to the table's types, so a
    batch and a rebuild hash a key alike), modulo the shard count."""
    from pyspark.sql import functions as F

    cols = [F.col(quote_column(k)).cast(t) for k, t in zip(key, key_types, strict=True)]
    return F.pmod(F.xxhash64(*cols), F.lit(shards)).cast("int")


def key_spark_types(table_schema: Any, key: Sequence[str]) -> list[Any]:
    return [iceberg_key_spark_type(table_schema.find_field(k)) for k in key]


def key_schema(table_schema: Any, key: Sequence[str]) -> Any:
    """The Iceberg schema of the KEY fields (their ids, names and types)."""
    from pyiceberg.schema import Schema

    return Schema(*[table_schema.find_field(k) for k in key])


def key_arrow_fields(table_schema: Any, key: Sequence[str]) -> list[Any]:
    """The KEY fields as the index's entries hold them (Arrow, without field metadata)."""
    import pyarrow as pa

    from icesql.engine.iceberg.schema import arrow_schema

    arrow = arrow_schema(key_schema(table_schema, key))
    return [pa.field(arrow.field(k).name, arrow.field(k).type) for k in key]


def iceberg_key_spark_type(field: Any) -> Any:
    """The Spark type of an Iceberg KEY field (a primitive: identifier fields are)."""
    from pyiceberg import types as I
    from pyspark.sql import types as T

    t = field.field_type
    simple = {
        I.BooleanType: T.BooleanType(),
        I.IntegerType: T.IntegerType(),
        I.LongType: T.LongType(),
        I.FloatType: T.FloatType(),
        I.DoubleType: T.DoubleType(),
        I.StringType: T.StringType(),
        I.BinaryType: T.BinaryType(),
        I.DateType: T.DateType(),
        I.TimestamptzType: T.TimestampType(),
        I.TimestampType: T.TimestampNTZType(),
    }
    for cls, st in simple.items():
        if isinstance(t, cls):
            return st
    if isinstance(t, I.DecimalType):
        return T.DecimalType(t.precision, t.scale)
    raise ValueError(f"KEY column '{field.name}' has type {t}, which the key index does not support")


__all__ = [
    "by_shard",
    "hash_keys",
    "hashable",
    "iceberg_key_spark_type",
    "key_arrow_fields",
    "key_schema",
    "key_spark_types",
    "shard_expression",
    "shards_of",
]
