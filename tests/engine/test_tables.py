"""The properties of the table a sink creates: ``write.format.default`` follows the sink's
FORMAT (the property Iceberg Java and pyiceberg read), and is left unset when the sink does not
say (Parquet, the spec's default). No Spark: a pyiceberg SQL catalog in a temporary folder."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icesql.analyzer import MemoryCatalog, analyze
from icesql.engine.iceberg.tables import (
    CREATED_TABLE_PROPERTIES,
    ensure_table,
    explain_table,
    table_properties_for,
)
from icesql.plan import WRITE_FORMAT_DEFAULT, CreateObjectPlan, SinkPlan
from icesql.syntax.parser import parse_one
from tests.engine.test_schema import f, struct

SCHEMA = struct(f("id", "long"), f("v", "string"))


def plan(format: str | None = None, **kw: Any) -> SinkPlan:
    return SinkPlan(
        name="s", relation="r", catalog_connection="c", namespace=("ns",), table="t", format=format, **kw
    )


def test_no_format_sets_no_write_format_default() -> None:
    props = table_properties_for(plan())
    assert WRITE_FORMAT_DEFAULT not in props
    assert props == {**CREATED_TABLE_PROPERTIES, "format-version": "2"}


@pytest.mark.parametrize("fmt", ["parquet", "orc", "avro"])
def test_format_sets_write_format_default(fmt: str) -> None:
    props = table_properties_for(plan(fmt, properties=(("write.orc.compression-codec", "zstd"),)))
    assert props[WRITE_FORMAT_DEFAULT] == fmt
    assert props["write.orc.compression-codec"] == "zstd"
    assert props["format-version"] == "2"


@pytest.mark.parametrize(
    ("clause", "expected"), [("", None), ("FORMAT ORC", "orc"), ("WITH (FORMAT = 'Avro')", "avro")]
)
def test_from_the_statement_to_the_property(clause: str, expected: str | None) -> None:
    cat = MemoryCatalog()
    cat.apply(
        analyze(
            parse_one("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/wh')"), cat
        ).plan
    )
    sql = f"CREATE SINK s FROM spark_db.events TO ICEBERG CATALOG c (NAMESPACE = 'ns', TABLE = 't') {clause}"
    result = analyze(parse_one(sql), cat)
    assert isinstance(result.plan, CreateObjectPlan) and isinstance(result.plan.definition, SinkPlan)
    assert table_properties_for(result.plan.definition).get(WRITE_FORMAT_DEFAULT) == expected


def test_created_table_carries_the_property_and_explain_shows_it(tmp_path: Path) -> None:
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    orc = plan("orc")
    assert explain_table(SCHEMA, orc)["properties"][WRITE_FORMAT_DEFAULT] == "orc"
    table = ensure_table(catalog, None, SCHEMA, orc)
    assert table.properties[WRITE_FORMAT_DEFAULT] == "orc"
    # a table created by a sink that says no FORMAT has no such property: readers take Parquet
    plain = ensure_table(catalog, ("ns", "plain"), SCHEMA, dataclasses.replace(orc, format=None))
    assert WRITE_FORMAT_DEFAULT not in plain.properties
    # an existing table's properties are left as they are
    again = ensure_table(catalog, ("ns", "plain"), SCHEMA, orc)
    assert WRITE_FORMAT_DEFAULT not in again.properties


def test_unwritable_columns_name_every_v3_type_icesql_cannot_write() -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        ListType,
        LongType,
        NestedField,
        StructType,
        TimestampNanoType,
        TimestamptzNanoType,
        UnknownType,
    )

    from icesql.engine.iceberg.schema import unwritable_columns

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "tn", TimestampNanoType(), required=False),
        NestedField(3, "s", StructType(NestedField(4, "u", UnknownType(), required=False)), required=False),
        NestedField(5, "l", ListType(6, TimestamptzNanoType(), element_required=False), required=False),
    )
    assert unwritable_columns(schema) == [
        "column 'tn' (timestamp_ns)",
        "column 's.u' (unknown)",
        "column 'l.element' (timestamptz_ns)",
    ]
    assert unwritable_columns(Schema(NestedField(1, "id", LongType(), required=False))) == []


def test_a_table_with_a_nanosecond_column_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType, TimestamptzNanoType

    from icesql.engine.base.pyiceberg_v3 import enable_v3
    from icesql.errors import ExecutionError

    enable_v3()
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("ns")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "v", StringType(), required=False),
        NestedField(3, "at", TimestamptzNanoType(), required=False),
    )
    table = catalog.create_table(("ns", "t"), schema=schema, properties={"format-version": "3"})
    with pytest.raises(ExecutionError) as raised:
        ensure_table(catalog, None, SCHEMA, plan())
    assert str(raised.value).splitlines()[0].endswith("icesql cannot write column 'at' (timestamptz_ns)")
    assert raised.value.hint and "deleteColumn" in raised.value.hint
    assert catalog.load_table(("ns", "t")).metadata_location == table.metadata_location


def test_a_table_pyiceberg_cannot_load_is_one_line_naming_the_type() -> None:
    """pyiceberg 0.12 refuses metadata with a ``variant`` column in pydantic's words, which the
    catalog failure rules would call "not an Iceberg REST endpoint"."""
    from icesql.errors import ExecutionError

    class Catalog:
        def load_table(self, ident: Any) -> Any:
            raise ValueError(
                "1 validation error for TableMetadataWrapper\n3.schemas.0.fields.2.type\n"
                "  Value error, Unsupported field type: 'variant' [type=value_error]"
            )

    with pytest.raises(ExecutionError) as raised:
        ensure_table(Catalog(), None, SCHEMA, plan())
    first, *rest = str(raised.value).splitlines()
    assert first.endswith(
        "table ns.t has a column of type 'variant', which icesql cannot read or write "
        "(its Iceberg library, pyiceberg, does not know the type)"
    )
    assert all(line.startswith("hint:") for line in rest)

    class Broken:
        def load_table(self, ident: Any) -> Any:
            raise ValueError("something else")

    with pytest.raises(ValueError, match="something else"):
        ensure_table(Broken(), None, SCHEMA, plan())
