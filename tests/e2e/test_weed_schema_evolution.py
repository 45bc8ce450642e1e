"""Schema evolution (issue 14) on a real REST catalog (``weed mini``, OAuth2, data on its S3):
Parquet files arrive over several runs with a new top-level column, a struct, an int widened to
bigint, then a column whose type changed; the table gains optional fields with fresh ids, older
rows read as null (DuckDB and DataFusion over S3), and the changed type is refused with the sink,
the column and both types named, the table untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import icesql
from icesql.errors import ExecutionError
from tests.e2e.test_weed_sinks import aws_sql, read_both, rest_oauth2_sql, unique
from tests.support.evolution import run_each, steps
from tests.support.weed import WeedServer

pytestmark = [pytest.mark.weed, pytest.mark.spark]


def test_parquet_columns_evolve_a_rest_catalog_table(weed: WeedServer, spark: Any, tmp_path: Path) -> None:
    ns = unique("e2e_evolve")
    home, data = tmp_path / "home", tmp_path / "in"
    data.mkdir()
    sql = (
        aws_sql(weed)
        + rest_oauth2_sql(weed)
        + f"""
        CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'parquet');
        CREATE SINK k FROM src INTO ICEBERG CATALOG lake (NAMESPACE = '{ns}', TABLE = 't')
        USING AWS CONNECTION s3;
    """
    )
    run_each(home, spark, data, sql, steps(nested_field=False))

    table = weed.rest_catalog(name="verify").load_table(f"{ns}.t")
    fields = [(f.field_id, f.name, str(f.field_type), f.required) for f in table.schema().fields]
    assert [(n, t) for _, n, t, _ in fields[:3]] == [("id", "long"), ("a", "string"), ("b", "long")]
    assert fields[3][1] == "c" and "d: optional int" in fields[3][2]
    assert not any(required for *_, required in fields[1:])  # added columns are optional
    assert len({i for i, *_ in fields}) == len(fields)  # fresh field ids
    assert read_both(weed, table.metadata_location) == [
        (1, "x", None, None),
        (2, "y", 5, None),
        (3, "z", 6, (7,)),
        (5_000_000_000, "v", 8, (9,)),
    ]
    before = table.metadata_location

    # a changed type: refused, naming the sink, the column and both types; nothing committed
    for f in data.glob("*.parquet"):
        f.unlink()  # inference sees the new file alone
    pq.write_table(
        pa.table({"id": pa.array([9], pa.int64()), "a": [1.5], "b": pa.array([9], pa.int64())}),
        data / "9.parquet",
    )
    with icesql.Session(home=home, spark=spark) as s, pytest.raises(ExecutionError) as info:
        s.run(once=True)
    message = info.value.message
    assert "sink k" in message and "'a'" in message and "string" in message and "double" in message, message
    assert weed.rest_catalog(name="verify2").load_table(f"{ns}.t").metadata_location == before
