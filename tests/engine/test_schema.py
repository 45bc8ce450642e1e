"""Spark → Iceberg → Arrow schema conversion and the compatibility check."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from icesql.engine.iceberg.schema import (
    arrow_schema,
    compatibility_problems,
    spark_to_iceberg_schema,
    to_table_batch,
)
from icesql.errors import ExecutionError


def f(name: str, type_: object, nullable: bool = True) -> dict:
    return {"name": name, "type": type_, "nullable": nullable, "metadata": {}}


def struct(*fields: dict) -> dict:
    return {"type": "struct", "fields": list(fields)}


ALL_TYPES = struct(
    f("id", "long"),
    f("b", "boolean"),
    f("t8", "byte"),
    f("t16", "short"),
    f("i", "integer"),
    f("fl", "float"),
    f("db", "double"),
    f("dec", "decimal(12,3)"),
    f("s", "string"),
    f("vc", "varchar(10)"),
    f("bin", "binary"),
    f("d", "date"),
    f("ts", "timestamp"),
    f("ntz", "timestamp_ntz"),
    f("st", struct(f("a", "integer"), f("inner", struct(f("x", "string"))))),
    f("arr", {"type": "array", "elementType": "long", "containsNull": True}),
    f("arr_st", {"type": "array", "elementType": struct(f("q", "string")), "containsNull": False}),
    f("m", {"type": "map", "keyType": "string", "valueType": "double", "valueContainsNull": True}),
)


def test_every_spark_type() -> None:
    schema = spark_to_iceberg_schema(ALL_TYPES, key=["id"])
    types = {fld.name: fld.field_type for fld in schema.fields}
    assert types["id"] == LongType()
    assert types["b"] == BooleanType()
    assert types["t8"] == IntegerType() and types["t16"] == IntegerType() and types["i"] == IntegerType()
    assert types["fl"] == FloatType() and types["db"] == DoubleType()
    assert types["dec"] == DecimalType(12, 3)
    assert types["s"] == StringType() and types["vc"] == StringType()
    assert types["bin"] == BinaryType()
    assert types["d"] == DateType()
    assert types["ts"] == TimestamptzType()
    assert types["ntz"] == TimestampType()
    assert isinstance(types["st"], StructType)
    assert isinstance(types["arr"], ListType) and types["arr"].element_type == LongType()
    assert not types["arr"].element_required
    assert types["arr_st"].element_required
    assert isinstance(types["m"], MapType) and types["m"].value_type == DoubleType()
    # KEY → required identifier field; others optional as Spark said
    assert schema.identifier_field_names() == {"id"}
    assert schema.find_field("id").required
    assert not schema.find_field("s").required
    # every id unique, top-level columns first (1..n)
    ids = list(schema._lazy_id_to_field.keys())
    assert len(ids) == len(set(ids))
    assert [fld.field_id for fld in schema.fields] == list(range(1, len(schema.fields) + 1))


def test_json_text_and_errors() -> None:
    import json

    schema = spark_to_iceberg_schema(json.dumps(struct(f("a", "long", False))))
    assert schema.find_field("a").required
    with pytest.raises(ExecutionError, match="'n'"):
        spark_to_iceberg_schema(struct(f("n", "void")))
    with pytest.raises(ExecutionError, match="KEY column 'nope'"):
        spark_to_iceberg_schema(struct(f("a", "long")), key=["nope"])
    with pytest.raises(ExecutionError, match="interval"):
        spark_to_iceberg_schema(struct(f("iv", "interval day to second")))


def test_compatibility_problems_name_columns() -> None:
    table = spark_to_iceberg_schema(
        struct(
            f("id", "long"),
            f("v", "string"),
            f("n", "integer"),
            f("req", "string", False),
            f("st", struct(f("a", "integer"))),
        )
    )
    assert compatibility_problems(table, struct(f("id", "long"), f("req", "string"), f("n", "short"))) == []
    source = struct(
        f("id", "string"),
        f("extra", "long"),
        f("n", "long"),
        f("st", struct(f("a", "string"), f("b", "long"))),
    )
    problems = compatibility_problems(table, source)
    text = "\n".join(problems)
    assert "'id' is string in the source but long" in text
    assert "'extra' is not in the table" in text
    assert "'n' is long in the source but int" in text
    assert "'st.a'" in text and "'st.b' is not in the table" in text
    assert "required column 'req'" in text
    # promotions are fine
    t2 = spark_to_iceberg_schema(struct(f("x", "long"), f("y", "double"), f("z", "decimal(20,2)")))
    assert (
        compatibility_problems(t2, struct(f("x", "integer"), f("y", "float"), f("z", "decimal(10,2)"))) == []
    )
    assert compatibility_problems(t2, struct(f("z", "decimal(10,3)")))


def test_to_table_batch_casts_fills_and_refuses_nulls() -> None:
    schema = spark_to_iceberg_schema(ALL_TYPES, key=["id"])
    target = arrow_schema(schema)
    assert target.field("id").metadata[b"PARQUET:field_id"] == b"1"
    batch = pa.record_batch(
        {
            "T8": pa.array([1, None], pa.int8()),  # case-insensitive match
            "id": pa.array([1, 2], pa.int64()),
            "ts": pa.array([dt.datetime(2024, 1, 1, 12), None], pa.timestamp("us", tz="America/New_York")),
            "dec": pa.array([Decimal("1.500"), None], pa.decimal128(12, 3)),
            "st": pa.array(
                [{"inner": {"x": "q"}, "a": 5}, None],
                pa.struct([("inner", pa.struct([("x", pa.string())])), ("a", pa.int32())]),
            ),
            "arr_st": pa.array([[{"q": "a"}], []], pa.list_(pa.struct([("q", pa.string())]))),
        }
    )
    out = to_table_batch(batch, target)
    assert out.schema.names == target.names
    assert out.column("t8").type == pa.int32()
    assert out.column("s").null_count == 2
    assert out.column("st").to_pylist()[0] == {"a": 5, "inner": {"x": "q"}}
    # naive datetimes in a zoned Arrow array are UTC instants: the instant is kept
    assert out.column("ts").to_pylist()[0] == dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc)
    bad = pa.record_batch({"id": pa.array([1, None], pa.int64())})
    with pytest.raises(ExecutionError, match="column 'id' is required"):
        to_table_batch(bad, target)
    with pytest.raises(ExecutionError, match="required column 'id' is missing"):
        to_table_batch(pa.record_batch({"s": ["x"]}), target)
