"""The key index's shard of a key computed without Spark equals Spark's own expression.

A batch written without Spark (``local_query``) and a follow that hashes a few files' keys put a
key in the shard ``build.shard_expression`` (Spark's ``pmod(xxhash64(...), N)``) would: if they
did not, a later batch on Spark would look the key up in another shard, miss its row and leave it
beside the new one. Each case hashes the same rows both ways, for every type a KEY may have,
nulls, edge values and a composite KEY.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from typing import Any

import pyarrow as pa
import pytest

from icesql.engine.backends.hashing import hash_keys, hashable, shards_of

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc


def _strings(rng: random.Random, n: int) -> list[str | None]:
    alphabet = "abcXYZ019 -_é€😀"
    out: list[str | None] = ["", "a", "x" * 31, "y" * 32, "z" * 33, "é" * 40, None]
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 70))) for _ in range(n)]
    return out


def _columns(rng: random.Random, n: int) -> dict[str, tuple[pa.Array, str]]:
    longs = [0, 1, -1, 2**63 - 1, -(2**63), None] + [rng.randrange(-(2**63), 2**63) for _ in range(n)]
    ints = [0, 1, -1, 2**31 - 1, -(2**31), None] + [rng.randrange(-(2**31), 2**31) for _ in range(n)]
    m = len(longs)

    def fit(values: list[Any]) -> list[Any]:
        return (values * (m // len(values) + 1))[:m]

    return {
        "b": (pa.array(fit([True, False, None])), "boolean"),
        "i8": (pa.array(fit([rng.randrange(-128, 128) for _ in range(50)] + [None]), pa.int8()), "tinyint"),
        "i16": (pa.array(fit([rng.randrange(-(2**15), 2**15) for _ in range(50)]), pa.int16()), "smallint"),
        "i32": (pa.array(ints, pa.int32()), "int"),
        "i64": (pa.array(longs, pa.int64()), "bigint"),
        "f32": (pa.array(fit([0.0, -0.0, float("nan"), 1.5, -3.25, None, 1e30]), pa.float32()), "float"),
        "f64": (pa.array(fit([0.0, -0.0, float("nan"), 1.5, -3.25, None, 1e300, rng.random()]), pa.float64()), "double"),
        "d": (pa.array(fit([dt.date(1970, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31), None, dt.date(2026, 11, 27)])), "date"),
        "ts": (
            pa.array(
                fit([dt.datetime(2026, 11, 27, 16, 3, 4, 123456, tzinfo=UTC), None, dt.datetime(1900, 1, 1, tzinfo=UTC)]),
                pa.timestamp("us", "UTC"),
            ),
            "timestamp",
        ),
        "ntz": (pa.array(fit([dt.datetime(2026, 1, 2, 3, 4, 5, 6), dt.datetime(1969, 12, 31, 23, 59, 59), None]), pa.timestamp("us")), "timestamp_ntz"),
        "dec": (pa.array(fit([decimal.Decimal("12.34"), decimal.Decimal("-0.01"), None, decimal.Decimal("99999999999999.99")]), pa.decimal128(16, 2)), "decimal(16,2)"),
        "wide": (
            pa.array(fit([decimal.Decimal("1" * 30 + ".5"), decimal.Decimal("-" + "9" * 37 + ".1"), decimal.Decimal("0.0"), None, decimal.Decimal("-1.0")]), pa.decimal128(38, 1)),
            "decimal(38,1)",
        ),
        "s": (pa.array(fit(_strings(rng, 60))), "string"),
        "bin": (pa.array(fit([b"", b"\x00", bytes(range(256)), None, b"abc" * 13]), pa.binary()), "binary"),
    }


def _spark_shards(spark: Any, table: pa.Table, names: list[str], shards: int) -> list[int]:
    from pyspark.sql import functions as F

    df = spark.createDataFrame(table)
    expr = F.pmod(F.xxhash64(*[F.col(n) for n in names]), F.lit(shards)).cast("int")
    rows = df.select("__i", expr.alias("shard"), F.xxhash64(*[F.col(n) for n in names]).alias("h")).collect()
    return [r.h for r in sorted(rows, key=lambda r: r["__i"])]


@pytest.fixture(scope="module")
def table() -> pa.Table:
    cols = _columns(random.Random(7), 300)
    t = pa.table({k: v[0] for k, v in cols.items()})
    return t.append_column("__i", pa.array(range(t.num_rows), pa.int64()))


@pytest.mark.parametrize(
    "names",
    [["b"], ["i8"], ["i16"], ["i32"], ["i64"], ["f32"], ["f64"], ["d"], ["ts"], ["ntz"], ["dec"], ["wide"], ["s"], ["bin"], ["i64", "s", "d"], ["s", "i32", "ts", "dec"]],
    ids=lambda names: "+".join(names),
)
def test_hash_equals_sparks_xxhash64(spark: Any, table: pa.Table, names: list[str]) -> None:
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    expected = _spark_shards(spark, table, names, 7)
    ours = hash_keys([table.column(n) for n in names]).tolist()
    assert ours == expected


def test_shard_is_sparks_pmod(spark: Any, table: pa.Table) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame(table.select(["i64", "s", "__i"]))
    for shards in (1, 3, 16):
        rows = df.select("__i", F.pmod(F.xxhash64("i64", "s"), F.lit(shards)).cast("int").alias("x")).collect()
        expected = [r.x for r in sorted(rows, key=lambda r: r["__i"])]
        assert shards_of([table.column("i64"), table.column("s")], shards).to_pylist() == expected


def test_hashable_names_what_it_cannot_hash() -> None:
    assert hashable([pa.int64(), pa.string(), pa.decimal128(38, 2)]) is None
    assert "hashed by Spark" in (hashable([pa.list_(pa.int32())]) or "")
