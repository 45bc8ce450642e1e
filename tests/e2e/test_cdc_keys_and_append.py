"""Null KEY columns in MODE UPSERT (enforced and NOT ENFORCED), and MODE APPEND on a changelog.

Everything goes through ``icesql.Session`` and SQL on small Debezium changelogs:

* an enforced KEY: a change with a null KEY column fails the batch with an error naming the
  sink, the column and the file/record; nothing of that batch is committed, earlier batches stay;
* ``KEY (...) NOT ENFORCED``: such changes are dropped (a null cannot be stored in an Iceberg
  identifier field, nor deleted by key), counted as skipped records (``SHOW SINK STATUS``,
  cumulative across restarts) and logged; every other change is applied;
* ``MODE APPEND`` (no KEY) on a changelog: deletes are no-ops, inserts, updates and snapshot
  reads each append their ``after`` row image.

Each test runs on both paths a ``run --once`` takes: Spark's, and the same query in icesql's own
process without Spark (``engine.local_query``, the default when no Spark session is given).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.errors import ExecutionError
from tests.support.pipeline_helpers import dbz, load_table, spark_for_tests, write_json_lines
from tests.support.readers import read_datafusion, read_duckdb

pytestmark = pytest.mark.spark

SCHEMA = "id BIGINT, name STRING, qty INT"


@pytest.fixture(scope="module")
def spark_session() -> Any:
    return spark_for_tests()


@pytest.fixture(params=["spark", "local"])
def spark(request: pytest.FixtureRequest) -> Any:
    """The Spark session a test's sessions get: Spark's, or None (a run without Spark)."""
    return request.getfixturevalue("spark_session") if request.param == "spark" else None


def assert_path(s: icesql.Session, spark: Any) -> None:
    """The run took the path the test asked for (without a Spark session, no JVM started)."""
    assert (s.engine._spark is None) == (spark is None)


def r(i: int | None, name: str, qty: int) -> dict[str, Any]:
    return {"id": i, "name": name, "qty": qty}


def setup(s: icesql.Session, tmp: Path, sink_sql: str) -> None:
    s.execute(
        f"""
        CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp / "wh"}');
        CREATE SOURCE cdc FROM FILES '{tmp / "cdc"}'
          (FORMAT = 'debezium-json', SCHEMA = '{SCHEMA}', MAX FILES PER TRIGGER = 1);
        {sink_sql}
        """
    )


def rows(tmp: Path, table: str) -> list[tuple[Any, ...]]:
    meta = load_table(tmp, table, warehouse=tmp / "wh", catalog_name="lake").metadata_location
    got = read_duckdb(meta)
    assert read_datafusion(meta) == got
    return got


FIRST = [
    dbz("c", None, r(1, "a", 1), lsn=10),
    dbz("c", None, r(2, "b", 2), lsn=11),
    dbz("u", r(1, "a", 1), r(1, "a2", 10), lsn=12, wrap=True),
]
WITH_NULL_KEYS = [
    dbz("c", None, r(3, "c", 3), lsn=20),
    dbz("c", None, r(None, "no key", 4), lsn=21),  # line 2
    dbz("u", r(None, "no key", 4), r(None, "still none", 5), lsn=22, wrap=True),
    dbz("d", r(2, "b", 2), None, lsn=23),
    dbz("d", r(None, "still none", 5), None, lsn=24),
]


def test_null_key_fails_the_batch_naming_sink_and_column(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "cdc"
    write_json_lines(data, "0001.json", FIRST)
    write_json_lines(data, "0002.json", WITH_NULL_KEYS)
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        setup(
            s,
            tmp_path,
            "CREATE SINK strict_sink FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'strict') "
            "KEY (id) MODE UPSERT",
        )
        with pytest.raises(ExecutionError) as ei:
            s.run(once=True)
        assert_path(s, spark)
        msg = ei.value.message
        assert "sink 'strict_sink'" in msg and "KEY column 'id' is null" in msg, msg
        assert "0002.json" in msg and "record 2" in msg, msg
        assert "NOT ENFORCED" in (ei.value.hint or "")
        assert "Traceback" not in msg and "ICESQL-" not in msg
        status = s.status()[0]
        assert status.state == "failed" and "KEY column 'id' is null" in (status.last_error or "")
    # the first batch was committed, nothing of the failing one
    assert rows(tmp_path, "ns.strict") == [(1, "a2", 10), (2, "b", 2)]


def test_null_key_not_enforced_drops_and_counts(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="icesql.sink")
    data = tmp_path / "cdc"
    write_json_lines(data, "0001.json", FIRST)
    write_json_lines(data, "0002.json", WITH_NULL_KEYS)
    home = tmp_path / "home"
    with icesql.Session(home=home, spark=spark) as s:
        setup(
            s,
            tmp_path,
            "CREATE SINK loose_sink FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'loose') "
            "KEY (id) NOT ENFORCED MODE UPSERT",
        )
        s.run(once=True)
        assert_path(s, spark)
        assert s.status()[0].skipped_records == 3
    assert rows(tmp_path, "ns.loose") == [(1, "a2", 10), (3, "c", 3)]
    warnings = [m.getMessage() for m in caplog.records if "null KEY" in m.getMessage()]
    assert warnings and "loose_sink" in warnings[0] and "dropped 3 change(s)" in warnings[0], warnings

    # a restart: the count carries on; a null-key change never touches the rows with a key
    write_json_lines(
        data,
        "0003.json",
        [dbz("c", None, r(None, "x", 0), lsn=30), dbz("u", r(3, "c", 3), r(3, "c2", 33), lsn=31)],
    )
    with icesql.Session(home=home, spark=spark) as s:
        s.run(once=True, sinks=["loose_sink"])
        assert_path(s, spark)
        (show,) = s.execute("SHOW SINK STATUS loose_sink")
        st = dict(zip(show.columns, show.rows[0], strict=True))
        assert st["state"] == "stopped" and st["skipped_records"] == 4, st
    assert rows(tmp_path, "ns.loose") == [(1, "a2", 10), (3, "c2", 33)]


def test_append_mode_on_a_changelog(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "cdc"
    write_json_lines(data, "0001.json", FIRST)
    write_json_lines(
        data,
        "0002.json",
        [
            dbz("d", r(2, "b", 2), None, lsn=20),  # a no-op
            dbz("u", r(1, "a2", 10), r(1, "a3", 11), lsn=21),  # inserts the new row
            dbz("r", None, r(5, "e", 5), lsn=22, wrap=True),
            dbz("d", r(99, "never", 0), None, lsn=23),  # a no-op as well
            dbz("c", None, r(2, "b-again", 22), lsn=24),
        ],
    )
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        setup(
            s,
            tmp_path,
            "CREATE SINK log_sink FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'log') "
            "MODE APPEND",
        )
        s.run(once=True)
        assert_path(s, spark)
    table = load_table(tmp_path, "ns.log", warehouse=tmp_path / "wh", catalog_name="lake")
    assert [f.name for f in table.schema().fields] == ["id", "name", "qty"]  # no changelog columns
    assert rows(tmp_path, "ns.log") == sorted(
        [(1, "a", 1), (2, "b", 2), (1, "a2", 10), (1, "a3", 11), (5, "e", 5), (2, "b-again", 22)], key=repr
    )
    # append-only commits: no delete files
    for snap in table.snapshots():
        assert snap.summary.operation.value == "append"
        assert "added-delete-files" not in snap.summary.additional_properties
