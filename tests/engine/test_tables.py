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
