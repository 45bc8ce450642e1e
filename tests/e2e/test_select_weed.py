"""SELECT, SHOW TABLES, DESCRIBE and SHOW SNAPSHOTS on ``weed mini``'s REST catalog (OAuth2
client credentials; the sink's ``USING AWS CONNECTION`` for the table files, as weed vends no
storage credentials): a partitioned upsert table written by a sink reads as DuckDB reads it,
time travel reaches the first run's snapshot, and a missing table points at its name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.errors import IcesqlError
from tests.e2e.test_weed_sinks import aws_sql, read_both, rest_oauth2_sql, unique
from tests.support.pipeline_helpers import write_json_lines
from tests.support.readers import norm
from tests.support.weed import WeedServer

pytestmark = [pytest.mark.weed, pytest.mark.spark]


def _event(i: int, v: str = "v") -> dict[str, Any]:
    return {"id": i, "ts": f"2024-03-0{1 + i % 3}T{i % 24:02d}:15:00Z", "v": f"{v}{i}"}


def test_select_reads_an_upserted_partitioned_rest_table(weed: WeedServer, spark: Any, tmp_path: Path) -> None:
    ns = unique("sel")
    data = tmp_path / "events"
    write_json_lines(data, "a.json", [_event(i) for i in range(12)])
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        s.execute(
            aws_sql(weed)
            + rest_oauth2_sql(weed)
            + f"""
            CREATE SOURCE events FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING');
            CREATE SINK up FROM events INTO ICEBERG CATALOG lake (NAMESPACE = '{ns}', TABLE = 'events')
            USING AWS CONNECTION s3 KEY (id) MODE UPSERT PARTITION BY (bucket(4, id));
            """
        )
        s.run(once=True)
        write_json_lines(data, "b.json", [_event(i, "new") for i in range(6, 18)])
        s.run(once=True, sinks=["up"])

        table = s.engine.load_table("lake", (ns,), "events", "s3")
        [result] = s.execute(f"SELECT id, ts, v FROM lake.{ns}.events")
        got = sorted((tuple(norm(v) for v in r) for r in result.rows), key=repr)
        assert got == read_both(weed, table.metadata_location) and len(got) == 18
        assert {r[2] for r in result.rows if r[0] >= 6} == {f"new{i}" for i in range(6, 18)}

        first = min(table.snapshots(), key=lambda snap: snap.timestamp_ms)
        [old] = s.execute(f"SELECT count(*), max(v) FROM lake.{ns}.events FOR VERSION AS OF {first.snapshot_id}")
        assert old.rows == ((12, "v9"),)

        [tables] = s.execute(f"SHOW TABLES IN lake.{ns}")
        assert tables.rows == ((ns, "events"),)
        [desc] = s.execute(f"DESCRIBE lake.{ns}.events")
        assert ("partition spec", "bucket[4](id)") in desc.rows and ("identifier fields", "id") in desc.rows
        [snaps] = s.execute("SHOW SNAPSHOTS OF SINK up")
        assert [r[4] for r in snaps.rows if r[3] == "batch"] == ["1", "0"]

        with pytest.raises(IcesqlError) as info:
            s.execute(f"SELECT * FROM lake.{ns}.nope")
        text = info.value.render()
        assert f"table lake.{ns}.nope does not exist" in text and "^" * len(f"lake.{ns}.nope") in text
        assert weed.secret_key not in text
