"""ALTER SOURCE ... SET (SCHEMA = ...) and CREATE OR REPLACE VIEW: the sinks reading the changed
relation add its new columns to their tables (older rows null, read by DuckDB and DataFusion),
and refuse a changed type naming the sink, the column, both types and a hint."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.errors import IcesqlError
from tests.support.pipeline_helpers import load_table, wait_for, write_json_lines
from tests.support.readers import read_datafusion, read_duckdb

pytestmark = pytest.mark.spark


def rows(tmp: Path, table: str, columns: str = "*") -> list[tuple[Any, ...]]:
    meta = load_table(tmp, table, warehouse=tmp / "wh", catalog_name="lake").metadata_location
    got = sorted(read_duckdb(meta, columns), key=repr)
    assert sorted(read_datafusion(meta, columns), key=repr) == got
    return got


def create(s: icesql.Session, tmp: Path, data: Path, *statements: str) -> None:
    """Connection ``lake`` (a local catalog under ``tmp``), source ``ev`` over the JSON files in
    ``data`` (id BIGINT, a STRING), then ``statements`` (the views and sinks over it)."""
    s.execute(
        ";\n".join(
            (
                f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp / 'wh'}')",
                f"CREATE SOURCE ev FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, a STRING')",
                *statements,
            )
        )
        + ";"
    )


def test_altered_source_and_replaced_view_evolve_their_sinks_tables(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "in"
    write_json_lines(data, "1.json", [{"id": 1, "a": "x", "b": 100}])  # b: not declared yet
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        create(
            s,
            tmp_path,
            data,
            "CREATE VIEW v AS SELECT id, upper(a) AS a FROM ev",
            "CREATE SINK direct FROM ev INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'direct')",
            "CREATE SINK viewed FROM v INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'viewed')",
        )
        s.run(once=True)
        assert rows(tmp_path, "ns.direct") == [(1, "x")]

        s.execute("ALTER SOURCE ev SET (SCHEMA = 'id BIGINT, a STRING, b BIGINT')")
        s.execute("CREATE OR REPLACE VIEW v AS SELECT id, upper(a) AS a, b * 10 AS b10 FROM ev")
        shown = s.execute("SHOW CREATE SOURCE ev")[0].rows[0][1]
        assert "SCHEMA = 'id BIGINT, a STRING, b BIGINT'" in shown and shown.startswith("CREATE SOURCE ev")
        assert (
            s.execute("SHOW CREATE VIEW v")[0].rows[0][1].startswith("CREATE VIEW v AS SELECT id, upper(a)")
        )
        write_json_lines(data, "2.json", [{"id": 2, "a": "y", "b": 5}])
        s.run(once=True)
    # the new column is added by the commit that first holds it; the older row reads null
    assert rows(tmp_path, "ns.direct") == [(1, "x", None), (2, "y", 5)]
    assert rows(tmp_path, "ns.viewed") == [(1, "X", None), (2, "Y", 50)]
    table = load_table(tmp_path, "ns.direct", warehouse=tmp_path / "wh", catalog_name="lake")
    b = table.schema().find_field("b")
    assert str(b.field_type) == "long" and not b.required


def test_a_changed_type_is_refused_naming_sink_column_and_types(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "in"
    write_json_lines(data, "1.json", [{"id": 1, "a": "x"}])
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        create(
            s,
            tmp_path,
            data,
            "CREATE SINK direct FROM ev INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 't')",
        )
        s.run(once=True)
        s.execute("ALTER SOURCE ev SET (SCHEMA = 'id BIGINT, a BIGINT')")
        write_json_lines(data, "2.json", [{"id": 2, "a": 7}])
        with pytest.raises(IcesqlError) as ei:
            s.run(once=True)
    msg = ei.value.message
    # Iceberg's names of the types: bigint is long
    assert "sink direct" in msg and "column 'a' is long in the source but string in the table" in msg
    assert ei.value.hint is not None and "ALTER SOURCE" in ei.value.hint and "by hand" in ei.value.hint
    assert rows(tmp_path, "ns.t") == [(1, "x")]  # nothing of the refused batch committed


@pytest.mark.parametrize("how", ["start", "run"])
def test_a_running_sink_restarts_and_evolves_when_its_source_changes(
    spark: Any, tmp_path: Path, how: str
) -> None:
    """``start``: in the background, as the shell runs sinks (stopped and started again);
    ``run``: under the supervisor, as ``icesql run``/``serve`` (restarted as after a transient
    failure)."""
    data = tmp_path / "in"
    write_json_lines(data, "1.json", [{"id": 1, "a": "x"}])
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        create(
            s,
            tmp_path,
            data,
            "CREATE SINK live FROM ev INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'live')",
        )
        runner = None
        if how == "start":
            s.start()
        else:
            runner = threading.Thread(target=s.run, daemon=True)
            runner.start()

        def table_rows() -> list[tuple[Any, ...]]:
            try:
                return rows(tmp_path, "ns.live")
            except Exception:  # not created or not committed yet
                return []

        wait_for(lambda: table_rows() == [(1, "x")], what="the first file committed")
        result = s.execute("ALTER SOURCE ev SET (SCHEMA = 'id BIGINT, a STRING, b BIGINT')")[0]
        assert "sinks restarting: live" in result.message
        write_json_lines(data, "2.json", [{"id": 2, "a": "y", "b": 5}])
        wait_for(lambda: table_rows() == [(1, "x", None), (2, "y", 5)], what="the evolved table")
        wait_for(lambda: {st.name: st.state for st in s.status()}["live"] == "running", what="running")
        if runner is not None:
            s.stop()
            runner.join(timeout=120)
            assert not runner.is_alive()
