"""Tables Iceberg Java made as v3, written by icesql (issue 55): Spark 3.5 + Iceberg Java 1.10
(``tests/support/java_tables.py``) creates v3 tables (unpartitioned, ``days(ts)``,
``bucket(4, id)``), inserts rows and deletes some in merge-on-read, so Java's own deletion vectors
are there; each table is registered in icesql's local catalog (``register_table``) and icesql's
sinks append to one and upsert into two, on both executors. Then:

* the metadata stays v3 and row lineage goes on from Java's ``next-row-id`` (the first icesql
  snapshot's ``first-row-id`` is Java's ``next-row-id``; ``check_row_lineage`` for the rest);
* icesql's vectors merge Java's: at most one live DV per data file, and a Java data file's live
  vector holds every position Java deleted in it;
* Iceberg Java, DuckDB and DataFusion read exactly the rows computed here;
* Java reads icesql's metadata back with its own parsers (the ``snapshots``, ``manifests``,
  ``files`` and ``delete_files`` metadata tables) and writes on top of it (an INSERT and a
  merge-on-read DELETE, which merges icesql's vectors into Java's new ones); the result is checked
  again here.

And a v3 table holding a column icesql cannot write (nanosecond timestamps, ``unknown``, and
``variant``, which pyiceberg 0.12 cannot even load) is refused in one line, nothing committed.
Spark SQL cannot name those types, so the columns are added through Iceberg's Java API.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import StaticTable

import icesql
from icesql.errors import ExecutionError
from tests.conformance.test_v3 import check_row_lineage, deletion_vectors
from tests.support.conformance import Twins
from tests.support.java_tables import (
    V3_PROPERTIES,
    java_api,
    java_deleted_positions,
    java_metadata_location,
    java_sql,
    live_positions_query,
    local_path,
)
from tests.support.pipeline_helpers import dbz, sql_catalog, write_json_lines
from tests.support.readers import canonical_digest, read_datafusion, read_duckdb, read_java

pytestmark = [pytest.mark.java, pytest.mark.spark]

EXECUTORS = ("in_process", "spark")
SINK = "INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = '{table}')"
DAY = "2024-01-0{d} 00:00:00"


def _tables(x: str) -> list[str]:
    """What Java does to executor ``x``'s three tables: ``a_x`` (days(ts), appended to), ``u_x``
    (bucket(4, id)) and ``w_x`` (unpartitioned), upserted into. Several files each (two tasks), a
    DV on most."""
    return [
        f"CREATE TABLE j.db.a_{x} (id BIGINT, s STRING, ts TIMESTAMP) USING iceberg PARTITIONED BY (days(ts)) {V3_PROPERTIES}",
        f"INSERT INTO j.db.a_{x} SELECT id, CAST(id AS STRING), TIMESTAMP '2024-01-01 00:00:00' + make_interval(0, 0, 0, CAST(id % 3 AS INT)) FROM range(0, 300, 1, 2)",
        f"DELETE FROM j.db.a_{x} WHERE id % 10 = 3",
        f"CREATE TABLE j.db.u_{x} (id BIGINT, v STRING, n INT) USING iceberg PARTITIONED BY (bucket(4, id)) {V3_PROPERTIES}",
        f"INSERT INTO j.db.u_{x} SELECT id, CONCAT('j', CAST(id AS STRING)), CAST(id AS INT) FROM range(0, 200, 1, 2)",
        f"DELETE FROM j.db.u_{x} WHERE id % 7 = 0",
        f"CREATE TABLE j.db.w_{x} (id BIGINT, v STRING, n INT) USING iceberg {V3_PROPERTIES}",
        f"INSERT INTO j.db.w_{x} SELECT id, CONCAT('j', CAST(id AS STRING)), CAST(id AS INT) FROM range(0, 200, 1, 2)",
        f"DELETE FROM j.db.w_{x} WHERE id % 5 = 0",
        f"DELETE FROM j.db.w_{x} WHERE id BETWEEN 40 AND 49",
    ]


# the columns icesql cannot write, added by Iceberg's Java API (Spark 3.5 has no name for them)
UNWRITABLE = {
    "tsns": ("TimestampNanoType.withZone()", "timestamptz_ns"),
    "ntzns": ("TimestampNanoType.withoutZone()", "timestamp_ns"),
    "unk": ("UnknownType.get()", "unknown"),
    "var": ("VariantType.get()", "variant"),
}


def _typed(name: str, java_type: str) -> list[Any]:
    return [
        f"CREATE TABLE j.db.{name} (id BIGINT, s STRING) USING iceberg {V3_PROPERTIES}",
        java_api(
            f"t = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, 'j.db.{name}')\n"
            f"t.updateSchema().addColumn('x', jvm.org.apache.iceberg.types.Types.{java_type}).commit()"
        ),
    ]


@pytest.fixture(scope="module")
def java_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every table of the module, made by one Spark start."""
    wh = tmp_path_factory.mktemp("java-wh")
    statements: list[Any] = [s for x in EXECUTORS for s in _tables(x)]
    for name, (java_type, _) in UNWRITABLE.items():
        statements += _typed(name, java_type)
    java_sql(wh, statements)
    return wh


# ---------------------------------------------------------------------------- expected rows


def _java_rows() -> dict[str, dict[int, tuple[Any, ...]]]:
    """Each table's rows after Java, by id, as Java's statements leave them."""
    a = {i: (i, str(i)) for i in range(300) if i % 10 != 3}
    u = {i: (i, f"j{i}", i) for i in range(200) if i % 7 != 0}
    w = {i: (i, f"j{i}", i) for i in range(200) if i % 5 != 0 and not 40 <= i <= 49}
    return {"a": a, "u": u, "w": w}


def _appended(r: int) -> list[dict[str, Any]]:
    return [
        {"id": 1000 + 10 * r + i, "s": f"r{r}-{i}", "ts": DAY.format(d=2 + r).replace(" ", "T")}
        for i in range(10)
    ]


def _changes(r: int) -> list[dict[str, Any]]:
    """Round ``r``'s changes: updates of Java's rows (some Java deleted: an insert then), deletes,
    new keys; round 1 changes again rows round 0 changed (icesql's own files and vectors)."""
    lsn = 1000 * (r + 1)
    out = []
    for i in range(r, 120, 3):  # updates
        out.append(dbz("u", {"id": i, "v": "old", "n": 0}, {"id": i, "v": f"up{r}", "n": -i}, lsn + i))
    for i in range(1 + r, 120, 5):  # deletes, after the updates of the same key
        out.append(dbz("d", {"id": i, "v": "old", "n": 0}, None, lsn + 200 + i))
    for i in range(4):
        out.append(dbz("c", None, {"id": 500 + 10 * r + i, "v": "new", "n": i}, lsn + 400 + i))
    return out


def _replay(rows: dict[int, tuple[Any, ...]], changes: list[dict[str, Any]]) -> None:
    for c in sorted(changes, key=lambda c: c["source"]["lsn"]):
        if c["op"] == "d":
            rows.pop(c["before"]["id"], None)
        else:
            a = c["after"]
            rows[a["id"]] = (a["id"], a["v"], a["n"])


# ---------------------------------------------------------------------------- checks


def _meta(location: str) -> dict[str, Any]:
    return dict(json.loads(Path(local_path(location)).read_text()))


def _positions_of_data_files(table: Any) -> dict[str, set[int]]:
    """Per data file, the positions its live deletion vector deletes."""
    from icesql.engine.base.pyiceberg_v3 import referenced_data_file
    from icesql.engine.iceberg.deletes import file_positions

    out: dict[str, set[int]] = {}
    for d in deletion_vectors(table):  # at most one live per data file, checked there
        (positions,) = file_positions(table.io, d.data_file).values()
        out[referenced_data_file(d.data_file)] = {int(p) for p in positions}
    return out


def _point_java_at(java_wh: Path, name: str, metadata_location: str) -> None:
    """Make the Hadoop catalog's ``j.db.<name>`` be icesql's current metadata: the catalog names
    its current file in ``version-hint.text`` and calls it ``v<N>.metadata.json``, so icesql's
    file is copied as the next version (what a catalog's register or a pointer swap does)."""
    meta = java_wh / "db" / name / "metadata"
    n = int((meta / "version-hint.text").read_text().strip()) + 1
    shutil.copyfile(local_path(metadata_location), meta / f"v{n}.metadata.json")
    (meta / "version-hint.text").write_text(str(n))


TABLES = ("a", "u", "w")
COLUMNS = {"a": ["id", "s"], "u": ["id", "v", "n"], "w": ["id", "v", "n"]}  # what is compared


def _register(twins: Twins, java_wh: Path) -> tuple[dict[Any, int], dict[Any, dict[str, list[int]]]]:
    """Java's tables registered in each executor's catalog as ``n.a``, ``n.u``, ``n.w``. Returns
    each table's ``next-row-id`` and, for the upserted ones, the positions Java's vectors delete
    per data file, keyed by (executor, table)."""
    next_row_id: dict[Any, int] = {}
    for x, p in twins.items():
        catalog = sql_catalog(p.warehouse, "lake")
        catalog.create_namespace("n")
        for t in TABLES:
            location = java_metadata_location(java_wh, f"{t}_{x}")
            meta = _meta(location)
            assert meta["format-version"] == 3 and meta["next-row-id"] > 0
            next_row_id[x, t] = meta["next-row-id"]
            catalog.register_table(("n", t), "file:" + location)
    keys = [(x, t) for x in EXECUTORS for t in ("u", "w")]
    live = java_sql(java_wh, [live_positions_query(f"j.db.{t}_{x}") for x, t in keys])
    deleted = {}
    for (x, t), rows in zip(keys, live, strict=True):
        deleted[x, t] = java_deleted_positions(java_metadata_location(java_wh, f"{t}_{x}"), rows)
        assert deleted[x, t], f"Java wrote no deletion vector into {t}_{x}"
    return next_row_id, deleted


def _same_rows(metadata_location: str, t: str, rows: dict[int, tuple[Any, ...]]) -> None:
    """DuckDB, DataFusion and Iceberg Java read exactly ``rows`` (the appended table's Java
    digest would need its timestamps: Java's row count there)."""
    want = sorted(rows.values(), key=repr)
    columns = ", ".join(COLUMNS[t])
    assert read_duckdb(metadata_location, columns) == want
    assert read_datafusion(metadata_location, columns) == want
    got = read_java(metadata_location)
    if t == "a":
        assert got["rows"] == len(want)
    else:
        digest = canonical_digest([dict(zip(COLUMNS[t], row, strict=True)) for row in want])["digest"]
        assert got["digest"] == digest, (got["rows"], len(want))


def _check_icesql_commits(
    table: Any, java_location: str, next_row_id: int, java_deleted: dict[str, list[int]] | None
) -> dict[str, set[int]]:
    """Row lineage from Java's ``next-row-id`` on, and (upserts) Java's vectors merged into
    icesql's, one live per data file. Returns the live vectors' positions per data file."""
    meta = _meta(table.metadata_location)
    assert meta["format-version"] == 3
    check_row_lineage(table)
    javas = {s["snapshot-id"] for s in _meta(java_location)["snapshots"]}
    ours = [s for s in meta["snapshots"] if s["snapshot-id"] not in javas]
    assert len(ours) == 2, f"{len(ours)} icesql snapshots"
    assert ours[0]["first-row-id"] == next_row_id, (ours[0], next_row_id)
    if java_deleted is None:
        return {}
    vectors = _positions_of_data_files(table)
    merged = 0
    for path, positions in java_deleted.items():
        # an upsert never rewrites a data file: each of Java's is live, its vector kept or merged
        assert path in vectors, f"Java's vector of {path} is gone"
        assert set(positions) <= vectors[path], f"Java's deletes lost in {path}"
        merged += len(vectors[path]) > len(positions)
    assert merged, "icesql merged no vector with Java's"
    return vectors


def _java_on_top(java_wh: Path, final: dict[Any, str]) -> Any:
    """Java reads each table's metadata as icesql left it (its metadata tables parse the metadata
    JSON, manifest lists and manifests), then an INSERT and a merge-on-read DELETE commit on top
    (reading icesql's vectors to merge them). Yields per table what Java's queries returned."""
    statements: list[Any] = []
    for (x, t), location in final.items():
        _point_java_at(java_wh, f"{t}_{x}", location)
        name = f"j.db.{t}_{x}"
        row = "(9000, 'java', TIMESTAMP '2024-01-05 00:00:00')" if t == "a" else "(9000, 'java', 1)"
        statements += [
            f"SELECT snapshot_id, operation FROM {name}.snapshots",
            f"SELECT content, added_data_files_count, added_delete_files_count FROM {name}.all_manifests",
            f"SELECT content, file_path, record_count FROM {name}.files",
            f"SELECT file_format, referenced_data_file, record_count FROM {name}.delete_files",
            f"SELECT count(*) AS c FROM {name}",
            f"INSERT INTO {name} VALUES {row}",
            f"DELETE FROM {name} WHERE id BETWEEN 2 AND 9 OR id = 1001",
        ]
    results = java_sql(java_wh, statements)
    for i, key in enumerate(final):
        yield key, results[7 * i : 7 * i + 5]


def test_icesql_appends_and_upserts_into_java_v3_tables(
    spark: Any, java_warehouse: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data, cdc = tmp_path / "in", tmp_path / "cdc"
    twins = Twins.make(tmp_path, spark, caplog)
    next_row_id, java_deleted = _register(twins, java_warehouse)
    twins.execute(
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, s STRING, ts TIMESTAMP');"
        f"CREATE SOURCE cdc FROM FILES '{cdc}' (FORMAT = 'debezium-json', SCHEMA = 'id BIGINT, v STRING, n INT');"
        f"CREATE SINK ka FROM src {SINK.format(table='a')};"
        f"CREATE SINK ku FROM cdc {SINK.format(table='u')} KEY (id) MODE UPSERT WITH (MAINTENANCE = 'off');"
        f"CREATE SINK kw FROM cdc {SINK.format(table='w')} KEY (id) MODE UPSERT WITH (MAINTENANCE = 'off');"
    )
    expected = _java_rows()
    for r in range(2):
        write_json_lines(data, f"{r}.json", _appended(r))
        changes = _changes(r)
        write_json_lines(cdc, f"{r}.json", changes)
        twins.run(["ka", "ku", "kw"])
        expected["a"].update((row["id"], (row["id"], row["s"])) for row in _appended(r))
        _replay(expected["u"], changes)
        _replay(expected["w"], changes)

    final: dict[Any, str] = {}
    vectors: dict[Any, dict[str, set[int]]] = {}
    for x, p in twins.items():
        for t in TABLES:
            table = p.table(f"n.{t}")
            java_location = java_metadata_location(java_warehouse, f"{t}_{x}")
            vectors[x, t] = _check_icesql_commits(
                table, java_location, next_row_id[x, t], java_deleted.get((x, t))
            )
            _same_rows(table.metadata_location, t, expected[t])
            final[x, t] = table.metadata_location

    for (x, t), (snapshots, _manifests, files, deletes, count) in _java_on_top(java_warehouse, final):
        # what Java read of icesql's metadata
        table = twins[x].table(f"n.{t}")
        assert [s["snapshot_id"] for s in snapshots] == [s.snapshot_id for s in table.snapshots()]
        assert count == [{"c": len(expected[t])}]
        assert deletes and all(d["file_format"] == "PUFFIN" for d in deletes)
        refs = [d["referenced_data_file"] for d in deletes]
        assert len(refs) == len(set(refs)), f"{x} {t}: Java sees two live vectors for a data file"
        assert {f["file_path"] for f in files if f["content"] == 0} >= set(refs)
        # what Java wrote on top of icesql's commits: row lineage goes on, Java merged icesql's
        # vectors into its own, and every reader reads the rows
        java_location = java_metadata_location(java_warehouse, f"{t}_{x}")
        javas = StaticTable.from_metadata("file:" + java_location)
        check_row_lineage(javas)
        if t != "a":
            after = _positions_of_data_files(javas)
            for path, positions in vectors[x, t].items():
                assert positions <= after.get(path, set()), (
                    f"{x} {t}: Java dropped icesql's deletes in {path}"
                )
        rows = {k: v for k, v in expected[t].items() if not (2 <= k <= 9 or k == 1001)}
        rows[9000] = (9000, "java") if t == "a" else (9000, "java", 1)
        _same_rows(java_location, t, rows)


@pytest.mark.parametrize("name", list(UNWRITABLE))
def test_a_table_with_a_column_icesql_cannot_write_is_refused(
    name: str, java_warehouse: Path, tmp_path: Path
) -> None:
    """One line naming the column and its type, a hint, and nothing committed: nanosecond
    timestamps and ``unknown`` load and are refused by ``unwritable_columns``; a ``variant`` table
    pyiceberg 0.12 cannot load at all (``register_table`` itself fails after recording it)."""
    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "in"
    with icesql.Session(home=home) as s:
        s.execute(f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');")
    catalog = sql_catalog(wh, "lake")
    catalog.create_namespace("n")
    location = java_metadata_location(java_warehouse, name)
    before = Path(location).read_text()
    try:
        catalog.register_table(("n", name), "file:" + location)
    except Exception as e:  # pyiceberg records the table, then cannot load it
        assert name == "var", e
    write_json_lines(data, "1.json", [{"id": 1, "s": "a"}])
    with icesql.Session(home=home) as s:
        s.execute(
            f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, s STRING');"
            f"CREATE SINK k FROM src {SINK.format(table=name)};"
        )
        with pytest.raises(ExecutionError) as raised:
            s.run(once=True, sinks=["k"])
    _, type_name = UNWRITABLE[name]
    message = str(raised.value).split("\n")
    assert len([line for line in message if not line.startswith("hint:")]) == 1, message
    assert f"'{type_name}'" in message[0] or f"({type_name})" in message[0], message[0]
    if name != "var":
        assert "column 'x'" in message[0]
    assert raised.value.hint
    # nothing written: the table's metadata is Java's, and no data file was added
    assert java_metadata_location(java_warehouse, name) == location
    assert Path(location).read_text() == before
    assert not list((java_warehouse / "db" / name).glob("data/**/*.parquet"))
    if name != "var":
        assert catalog.load_table(("n", name)).metadata_location == "file:" + location
