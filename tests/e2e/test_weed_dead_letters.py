"""ON ERROR = 'dead-letter' on a real REST catalog (``weed mini``, OAuth2, data on its S3): the
dead-letter table is created beside the target in the same catalog, every bad record lands in
it once and every good one in the target once, across two runs; both read back over S3 by
DuckDB and DataFusion, and no secret value in either table's files or metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import icesql
from tests.e2e.test_weed_sinks import aws_sql, read_both, rest_oauth2_sql, unique
from tests.support.pipeline_helpers import icesql_summaries, write_json_lines
from tests.support.weed import WeedServer

pytestmark = [pytest.mark.weed, pytest.mark.spark]


def test_dead_letters_on_a_rest_catalog(weed: WeedServer, spark: Any, tmp_path: Path) -> None:
    ns = unique("e2e_dead")
    data = tmp_path / "events"
    write_json_lines(
        data,
        "part-1.json",
        [
            json.dumps({"id": 1, "v": "a"}),
            '{"id": 2, "v": ',  # malformed
            json.dumps({"id": "three", "v": "c"}),  # wrong type
            json.dumps({"id": 4, "v": "d"}),
        ],
    )
    sql = (
        aws_sql(weed)
        + rest_oauth2_sql(weed)
        + f"""
        CREATE SOURCE events FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');
        CREATE SINK events_sink FROM events
        INTO ICEBERG CATALOG lake (NAMESPACE = '{ns}', TABLE = 'events')
        USING AWS CONNECTION s3
        WITH (ON ERROR = 'dead-letter', DEAD LETTER TABLE = '{ns}.events_errors');
    """
    )
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        s.execute(sql)
        s.run(once=True)
        write_json_lines(
            data, "part-2.json", [json.dumps({"id": 5, "v": "e"}), f'{{"id": 6, "v": "{weed.secret_key}']
        )
        s.run(once=True)
        (st,) = s.status()
        assert (st.state, st.rows_committed, st.dead_letters) == ("stopped", 3, 3)
        status = s.execute("SHOW SINK STATUS events_sink")[0]
        assert dict(zip(status.columns, status.rows[0], strict=True))["dead_letters"] == 3

    catalog = weed.rest_catalog(name="verify")
    target = catalog.load_table(f"{ns}.events")
    assert sorted(r[0] for r in read_both(weed, target.metadata_location)) == [1, 4, 5]
    dead = catalog.load_table(f"{ns}.events_errors")
    assert dead.location() == f"s3://{weed.table_bucket}/{ns}/events_errors"
    rows = read_both(weed, dead.metadata_location)
    names = [f.name for f in dead.schema().fields]
    got = sorted(
        (Path(r[names.index("file")]).name, r[names.index("record")], r[names.index("reason")]) for r in rows
    )
    assert got == [
        ("part-1.json", 2, "malformed-json"),
        ("part-1.json", 3, "type-mismatch"),
        ("part-2.json", 2, "malformed-json"),
    ]
    assert all(weed.secret_key not in str(r) for r in rows)
    raws = {r[names.index("raw")] for r in rows}
    assert '{"id": 2, "v": ' in raws and '{"id": 6, "v": "********' in raws
    # two runs, two commits of each table, both with the sink's progress
    assert len(icesql_summaries(dead)) == 2 and len(icesql_summaries(target)) == 2
