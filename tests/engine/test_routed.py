"""A routed sink's bad input and its idle tables, in this process (issue 53; both executors run
the same routing code: tests/conformance/test_routed.py, tests/kafka/test_routed_crash.py; the
maintenance of its tables: tests/engine/test_routed_maintenance.py).

Bad input never stops the other tables under ON ERROR = 'dead-letter': a message without a schema
block, a template resolving to a name that is no table name, a record with no key for an upsert
table; with ON ERROR = 'fail' (the default) the first one fails the sink in one line naming the
file and line. A table with nothing new in a batch gets no snapshot."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.errors import IcesqlError
from tests.support.connect_events import event
from tests.support.pipeline_helpers import load_table, write_json_lines
from tests.support.readers import read_duckdb

CUSTOMERS = [("id", "int"), ("name", "string")]
ORDERS = [("oid", "long"), ("amount", "decimal")]


def _session(tmp_path: Path, sink: str) -> Any:
    s = icesql.Session(home=tmp_path / "home")
    s.execute(
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp_path / 'wh'}');"
        f"CREATE SOURCE cdc FROM FILES '{tmp_path / 'cdc'}' (FORMAT = 'debezium-json');" + sink
    )
    return s


def _table(tmp_path: Path, name: str) -> Any:
    return load_table(tmp_path / "home", name, warehouse=tmp_path / "wh", catalog_name="lake")


def test_bad_messages_are_dead_letters_and_the_other_tables_are_written(tmp_path: Path) -> None:
    lines = [
        event("shop", "customers", CUSTOMERS, ["id"], "c", None, {"id": 1, "name": "a"}, 1)[1],
        json.dumps({"op": "c", "after": {"id": 2}}),  # no schema block
        event("shop", "bad.name", CUSTOMERS, ["id"], "c", None, {"id": 3, "name": "c"}, 2)[1],
        event("shop", "orders", ORDERS, ["oid"], "c", None, {"oid": 9, "amount": 1.25}, 3)[1],  # no id: no key
        event("shop", "customers", CUSTOMERS, ["id"], "u", {"id": 1, "name": "a"}, {"id": 1, "name": "b"}, 4)[1],
    ]
    write_json_lines(tmp_path / "cdc", "0.json", lines)
    with _session(
        tmp_path,
        "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'shop', TABLE = '{table}') "
        "KEY (id) MODE UPSERT WITH (ON ERROR = 'dead-letter');",
    ) as s:
        s.run(once=True, sinks=["k"])
        (status,) = s.execute("SHOW SINK STATUS k")
    assert status.rows[0][1] == "stopped"
    assert read_duckdb(_table(tmp_path, "shop.customers").metadata_location) == [(1, "b")]
    letters = _table(tmp_path, "shop.k_dead_letters").scan().to_arrow().to_pylist()
    errors = sorted(r["error"] for r in letters)
    assert len(errors) == 3, errors
    assert any("has no schema block" in e for e in errors)
    assert any("resolves to 'bad.name', which is not a table name: it holds '.'" in e for e in errors)
    assert any("table shop.orders gets a record with no key" in e for e in errors)
    assert all(r["record"] in (1, 2, 3) for r in letters)  # their lines in the file


def test_a_message_without_a_schema_fails_the_sink_in_one_line(tmp_path: Path) -> None:
    write_json_lines(tmp_path / "cdc", "0.json", [json.dumps({"payload": {"op": "c"}})])
    with _session(
        tmp_path, "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'shop', TABLE = '{table}');"
    ) as s:
        with pytest.raises(IcesqlError) as e:
            s.run(once=True, sinks=["k"])
    message = e.value.message
    assert "\n" not in message
    assert "0.json at 0" in message and "has no schema block" in message


def test_topic_of_a_files_source_names_no_table(tmp_path: Path) -> None:
    write_json_lines(
        tmp_path / "cdc", "0.json", [event("shop", "customers", CUSTOMERS, ["id"], "c", None, {"id": 1, "name": "a"}, 1)[1]]
    )
    with _session(
        tmp_path, "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'shop', TABLE = '{topic}');"
    ) as s:
        with pytest.raises(IcesqlError) as e:
            s.run(once=True, sinks=["k"])
    assert "the record has no {topic} for TABLE '{topic}'" in e.value.message


def test_tables_with_nothing_new_are_not_touched(tmp_path: Path) -> None:
    def customers(i: int, lsn: int) -> str:
        return event("shop", "customers", CUSTOMERS, ["id"], "c", None, {"id": i, "name": "x"}, lsn)[1]

    orders = event("shop", "orders", ORDERS, ["oid"], "c", None, {"oid": 1, "amount": 2.0}, 2)[1]
    write_json_lines(tmp_path / "cdc", "0.json", [customers(1, 1), orders])
    sink = "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'shop', TABLE = '{table}');"
    with _session(tmp_path, sink) as s:
        url = s.serve_metrics()
        s.run(once=True, sinks=["k"])
        write_json_lines(tmp_path / "cdc", "1.json", [customers(2, 3)])
        s.run(once=True, sinks=["k"])
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        with urllib.request.urlopen(f"{url}/status.json", timeout=10) as r:
            (page,) = json.loads(r.read())["sinks"]
    # the status page lists the tables under the sink
    assert page["table"] == "shop.{table}"
    # every table the sink knows, with its commits over both runs (the second found only
    # customers new): the store keeps each table's counters, so a restart carries them on
    assert {t["table"]: t["commits"] for t in page["tables"]} == {"shop.customers": 2, "shop.orders": 1}
    assert all(t["lag"] == 0.0 and t["staged_rows"] == 0 for t in page["tables"])
    # the metrics say per table: customers twice, orders once
    assert 'icesql_table_commits_total{sink="k",table="shop.customers"} 2.0' in metrics
    assert 'icesql_table_commits_total{sink="k",table="shop.orders"} 1.0' in metrics
    assert 'icesql_table_rows_committed_total{sink="k",table="shop.customers"} 2.0' in metrics
    assert 'icesql_table_commit_lag_seconds{sink="k",table="shop.orders"} 0.0' in metrics
    assert 'icesql_table_failing{sink="k",table="shop.customers"} 0.0' in metrics
    assert 'icesql_table_last_commit_timestamp_seconds{sink="k",table="shop.customers"}' in metrics
    assert len(_table(tmp_path, "shop.customers").snapshots()) == 2
    snapshots = _table(tmp_path, "shop.orders").snapshots()
    assert len(snapshots) == 1 and snapshots[0].summary["icesql.progress"] == "0"


def test_the_routed_sinks_maintainer_offers_every_hook_a_maintainer_does() -> None:
    """The runner calls the maintainer's public hooks; a routed sink's (which hands them on to its
    tables' maintainers) must have them all (a hook added to ``Maintainer`` and missing here fails
    a routed sink at start or stop)."""
    import inspect

    from icesql.engine.sink.maintainer import Maintainer
    from icesql.engine.sink.routed_maintenance import RoutedMaintainer

    hooks = {n for n, m in inspect.getmembers(Maintainer) if not n.startswith("_") and callable(m)}
    assert hooks - set(dir(RoutedMaintainer)) == set()


def test_each_tables_state_is_kept_across_runs_and_dropped_with_the_sink(tmp_path: Path) -> None:
    """SHOW SINK STATUS of a routed sink that is not running lists its tables from the store: rows,
    commits, last commit and last error per table, summing to the sink's row; a restart carries
    them on; DROP SINK drops them."""

    def customers(i: int, lsn: int) -> str:
        return event("shop", "customers", CUSTOMERS, ["id"], "c", None, {"id": i, "name": "x"}, lsn)[1]

    orders = event("shop", "orders", ORDERS, ["oid"], "c", None, {"oid": 1, "amount": 2.0}, 2)[1]
    bad = event("shop", "bad.name", CUSTOMERS, ["id"], "c", None, {"id": 3, "name": "c"}, 9)[1]
    write_json_lines(tmp_path / "cdc", "0.json", [customers(1, 1), orders, customers(2, 3)])
    sink = (
        "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'shop', TABLE = '{table}') "
        "WITH (ON ERROR = 'dead-letter');"
    )

    def status(s: Any) -> dict[str, dict[str, Any]]:
        (result,) = s.execute("SHOW SINK STATUS k")
        rows = [dict(zip(result.columns, r, strict=True)) for r in result.rows]
        return {r["table"]: r for r in rows}

    with _session(tmp_path, sink) as s:
        s.run(once=True, sinks=["k"])
    with icesql.Session(home=tmp_path / "home") as s:  # a new process: only the store
        first = status(s)
        write_json_lines(tmp_path / "cdc", "1.json", [customers(4, 5), bad])
        s.run(once=True, sinks=["k"])
        second = status(s)
        assert set(second) == {"shop.{table}", "shop.customers", "shop.orders"}
        assert first["shop.customers"]["rows_committed"] == 2 and first["shop.orders"]["rows_committed"] == 1
        assert second["shop.customers"]["rows_committed"] == 3 and second["shop.customers"]["commits"] == 2
        assert second["shop.orders"]["commits"] == 1  # nothing new for orders in the second run
        tables = [r for name, r in second.items() if name != "shop.{table}"]
        for column in ("rows_committed", "commits"):
            assert second["shop.{table}"][column] == sum(r[column] for r in tables), column
        assert second["shop.customers"]["last_commit_at"] != "-"
        s.execute("DROP SINK k")
    from catalog_store import CatalogStore

    with CatalogStore(tmp_path / "home" / "catalog.db") as store:
        assert store.sink_tables("k") == []
