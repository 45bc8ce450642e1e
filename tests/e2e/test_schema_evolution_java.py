"""Schema evolution (issue 14) compared with Iceberg Java's own: the table icesql evolves as
Parquet files gain a column, a struct, a nested field and a widened ``id`` has the same schema
(field ids, names, types, optionality) as a table Spark 3.5 + Iceberg Java evolves with the same
``ALTER TABLE`` statements, and the Java reader reads every row of icesql's table with the right
nulls.

Marker ``java``: it needs the reader harness (``../shared/tools/iceberg-readers-setup``), whose
Python runs Spark 3.5 with the Iceberg runtime jar; ``.ci/run`` builds it and runs ``-m java``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.evolution import run_each, steps
from tests.support.pipeline_helpers import load_table, spark_for_tests
from tests.support.readers import HARNESS, canonical_digest, read_duckdb, read_java

pytestmark = [pytest.mark.java, pytest.mark.spark]

# What Spark + Iceberg Java is asked to do, in the order icesql meets the same changes in files.
JAVA_SCRIPT = r"""
import json, sys
from pyspark.sql import SparkSession
wh, jars = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.jars", jars)
         .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
         .config("spark.sql.catalog.j", "org.apache.iceberg.spark.SparkCatalog")
         .config("spark.sql.catalog.j.type", "hadoop")
         .config("spark.sql.catalog.j.warehouse", wh).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
for sql in [
    "CREATE TABLE j.n.t (id INT, a STRING) USING iceberg TBLPROPERTIES ('format-version' = '2')",
    "ALTER TABLE j.n.t ADD COLUMN b BIGINT",
    "ALTER TABLE j.n.t ADD COLUMN c STRUCT<d: INT>",
    "ALTER TABLE j.n.t ADD COLUMN c.e STRING",
    "ALTER TABLE j.n.t ALTER COLUMN id TYPE BIGINT",
]:
    spark.sql(sql)
jvm = spark._jvm
table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, "j.n.t")
print(json.dumps({"schema": jvm.org.apache.iceberg.SchemaParser.toJson(table.schema())}))
"""


def java_schema(tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "evolve_java.py"
    script.write_text(JAVA_SCRIPT)
    jars = ",".join(str(HARNESS / "jars" / j) for j in ("iceberg-spark-runtime.jar", "jackson-iceberg-shaded.jar"))
    out = subprocess.run(
        [str(HARNESS / "venv/bin/python"), str(script), str(tmp_path / "java-wh"), jars],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(json.loads(out.stdout.strip().splitlines()[-1])["schema"]))


def comparable(schema: dict[str, Any]) -> list[Any]:
    """Field ids, names, types and optionality, nested fields included (docs left out)."""

    def field(f: dict[str, Any]) -> dict[str, Any]:
        t = f["type"]
        return {
            "id": f["id"],
            "name": f["name"],
            "required": f["required"],
            "type": [field(x) for x in t["fields"]] if isinstance(t, dict) and t.get("type") == "struct" else t,
        }

    return [field(f) for f in schema["fields"]]


def test_evolved_schema_equals_iceberg_javas_and_java_reads_every_row(tmp_path: Path) -> None:
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    data.mkdir()
    spark = spark_for_tests()
    run_each(
        home,
        spark,
        data,
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'parquet');"
        "CREATE SINK k FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't');",
        steps(nested_field=True),
    )

    table = load_table(home, "n.t", warehouse=wh, catalog_name="lake")
    ours = json.loads(table.schema().model_dump_json(by_alias=True))
    assert comparable(ours) == comparable(java_schema(tmp_path))

    expected = [
        (1, "x", None, None),
        (2, "y", 5, None),
        (3, "z", 6, (7, None)),
        (4, "w", 7, (8, "new")),
        (5_000_000_000, "v", 8, (9, "wide")),
    ]
    assert read_duckdb(table.metadata_location) == expected
    java = read_java(table.metadata_location)
    # every row, nulls where a file predates a column, as the Java reader returns them
    want = [
        {"id": i, "a": a, "b": b, "c": None if c is None else {"d": c[0], "e": c[1]}} for i, a, b, c in expected
    ]
    assert sorted(java["all"]) == sorted(canonical_digest(want)["all"])
