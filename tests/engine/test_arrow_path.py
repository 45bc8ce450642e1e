"""Sinks on the Arrow path: the same tables as on Spark's path, exactly once, upgrades, limits.

Each differential case runs the same sink over the same files twice, once with the Arrow path
(the default) and once with Spark's readers (``ICESQL_ARROW_PATH=0``), into two tables, and
compares every column of every row and the manifests' statistics (null counts, lower and upper
bounds, value counts, per column over the table's data files).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.engine import Engine
from icesql.plan import (
    OnError,
    PartitionFieldPlan,
    SinkMode,
    SinkPlan,
    SourceFormat,
    SourceKind,
    SourcePlan,
    Transform,
)
from tests.support.pipeline_helpers import (
    Objects,
    State,
    icesql_summaries,
    load_table,
    local_catalog,
    write_json_lines,
)
from tests.support.readers import read_duckdb

pytestmark = pytest.mark.spark


def run(
    spark: Any,
    home: Path,
    source: SourcePlan,
    plan: SinkPlan,
    *,
    arrow: bool,
    monkeypatch: pytest.MonkeyPatch,
    state: State | None = None,
) -> Engine:
    monkeypatch.setenv("ICESQL_ARROW_PATH", "1" if arrow else "0")
    objects = Objects({"cat": local_catalog(warehouse=home / "warehouse")}, {source.name: source})
    eng = Engine(
        home,
        objects=objects,
        secrets=lambda n: "x",
        state=state or State(),
        spark=spark,
        trigger_interval=0.2,
    )
    eng.run([plan], once=True)
    return eng


def table_rows(home: Path, name: str) -> list[Any]:
    rows = load_table(home, name).scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))


def column_stats(home: Path, name: str) -> dict[str, Any]:
    """Per column: total nulls and values, smallest lower bound, largest upper bound (over the
    table's data files, as the manifests record them)."""
    from pyiceberg.conversions import from_bytes

    table = load_table(home, name)
    schema = table.schema()
    out: dict[str, Any] = {}
    for task in table.scan().plan_files():
        f = task.file
        for fid in {*f.null_value_counts, *f.value_counts, *f.lower_bounds, *f.upper_bounds}:
            col = schema.find_column_name(fid)
            kind = schema.find_field(fid).field_type
            s = out.setdefault(col, {"nulls": 0, "values": 0, "lower": None, "upper": None})
            s["nulls"] += f.null_value_counts.get(fid, 0)
            s["values"] += f.value_counts.get(fid, 0)
            # compared as values: bytes order is not value order (little-endian integers)
            lo, hi = (
                None if b is None else from_bytes(kind, b)
                for b in (f.lower_bounds.get(fid), f.upper_bounds.get(fid))
            )
            if lo is not None:
                s["lower"] = lo if s["lower"] is None else min(s["lower"], lo)
            if hi is not None:
                s["upper"] = hi if s["upper"] is None else max(s["upper"], hi)
    return out


def sink(name: str, table: str, **kw: Any) -> SinkPlan:
    return SinkPlan(
        name=name,
        relation=kw.pop("relation", "src"),
        catalog_connection="cat",
        namespace=("ns",),
        table=table,
        **kw,
    )


def both_paths(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: SourcePlan, **kw: Any
) -> tuple[Path, Path]:
    homes = []
    for arrow in (True, False):
        home = tmp_path / ("arrow" if arrow else "spark")
        eng = run(spark, home, source, sink("s", "t", **kw), arrow=arrow, monkeypatch=monkeypatch)
        assert eng.runner("s").status_row()["path"] == ("arrow" if arrow else "spark")
        homes.append(home)
    return homes[0], homes[1]


JSON_ROWS = [
    {
        "id": 1,
        "name": "héllo 🧊",
        "score": 1.5,
        "ts": "2024-01-01T10:00:00Z",
        "day": "2024-01-01",
        "tags": ["a"],
        "amount": 12.34,
    },
    {"id": 2, "name": "", "score": None, "ts": "1969-12-31 23:59:59.999999", "day": "0001-01-01", "tags": []},
    {
        "id": 3,
        "name": None,
        "score": -0.0,
        "ts": "2024-06-01T00:00:00+05:30",
        "day": "9999-12-31",
        "tags": None,
        "amount": -0.01,
    },
    {"id": 4, "extra": "ignored", "info": {"a": 7, "b": ["x", None]}},
]
JSON_SCHEMA = "id BIGINT, name STRING, score DOUBLE, ts TIMESTAMP, day DATE, tags ARRAY<STRING>, amount DECIMAL(10,2), info STRUCT<a: INT, b: ARRAY<STRING>>"


def test_json_tables_identical_on_both_paths(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "in"
    for k in range(3):
        write_json_lines(data, f"f{k}.json", [dict(r, id=r["id"] + 10 * k) for r in JSON_ROWS])
    (data / "empty.json").write_text("")
    source = SourcePlan("src", SourceKind.FILES, path=str(data), format=SourceFormat.JSON, schema=JSON_SCHEMA)
    a, s = both_paths(
        spark,
        tmp_path,
        monkeypatch,
        source,
        partition_by=(PartitionFieldPlan("ts", Transform.DAY, name="ts_day"),),
    )
    assert table_rows(a, "ns.t") == table_rows(s, "ns.t")
    assert len(table_rows(a, "ns.t")) == 12
    assert column_stats(a, "ns.t") == column_stats(s, "ns.t")


def test_csv_tables_identical_on_both_paths(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.csv").write_text(
        "id,name,amount,ts\n1,alice,1.5,2024-01-01 10:00:00\n2,,2,2024-01-01T10:00:00Z\n"
    )
    (data / "b.csv").write_text('id,name,amount,ts\n3,"b, c",3.25,\n4,"",-1e3,1969-07-20 20:17:40\n')
    source = SourcePlan(
        "src",
        SourceKind.FILES,
        path=str(data),
        format=SourceFormat.CSV,
        schema="id INT, name STRING, amount DOUBLE, ts TIMESTAMP",
        header=True,
    )
    a, s = both_paths(spark, tmp_path, monkeypatch, source)
    assert table_rows(a, "ns.t") == table_rows(s, "ns.t")
    assert len(table_rows(a, "ns.t")) == 4
    assert column_stats(a, "ns.t") == column_stats(s, "ns.t")


def test_parquet_tables_identical_on_both_paths(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "in"
    data.mkdir()
    for k in range(3):
        n = 2000
        pq.write_table(
            pa.table(
                {
                    "id": pa.array(range(k * n, (k + 1) * n), pa.int64()),
                    "v": pa.array([None if i % 5 == 0 else f"v{i}" for i in range(n)]),
                    "ts": pa.array(
                        [
                            dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=i)
                            for i in range(n)
                        ],
                        pa.timestamp("us", tz="UTC"),
                    ),
                    "price": pa.array([Decimal(i) / 100 for i in range(n)], pa.decimal128(12, 2)),
                }
            ),
            data / f"p{k}.parquet",
            row_group_size=500,
        )
    source = SourcePlan("src", SourceKind.FILES, path=str(data), format=SourceFormat.PARQUET)
    a, s = both_paths(
        spark,
        tmp_path,
        monkeypatch,
        source,
        partition_by=(PartitionFieldPlan("ts", Transform.MONTH, name="ts_month"),),
    )
    assert table_rows(a, "ns.t") == table_rows(s, "ns.t")
    assert column_stats(a, "ns.t") == column_stats(s, "ns.t")


def test_malformed_records_same_errors_and_skips_on_both_paths(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A malformed file goes through Spark's reader on the Arrow path: the same error message
    with ON ERROR = 'fail', the same rows and the same skipped count with 'skip'."""
    data = tmp_path / "in"
    write_json_lines(data, "good.json", [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}])
    (data / "bad.json").write_text('{"id": 3, "v": "c"}\n{"id": "x", "v": "d"}\n{"id": 5, "v": \n')
    schema = "id BIGINT, v STRING"
    errors = []
    for arrow in (True, False):
        source = SourcePlan("src", SourceKind.FILES, path=str(data), format=SourceFormat.JSON, schema=schema)
        with pytest.raises(Exception) as info:
            run(
                spark,
                tmp_path / f"fail-{arrow}",
                source,
                sink("s", "t"),
                arrow=arrow,
                monkeypatch=monkeypatch,
            )
        errors.append(str(getattr(info.value, "message", info.value)))
    assert errors[0] == errors[1]
    assert "bad.json" in errors[0] and "record 2" in errors[0] and "field 'id'" in errors[0]

    results = []
    for arrow in (True, False):
        source = SourcePlan(
            "src",
            SourceKind.FILES,
            path=str(data),
            format=SourceFormat.JSON,
            schema=schema,
            on_error=OnError.SKIP,
        )
        home = tmp_path / f"skip-{arrow}"
        eng = run(spark, home, source, sink("s", "t"), arrow=arrow, monkeypatch=monkeypatch)
        row = eng.runner("s").status_row()
        results.append((table_rows(home, "ns.t"), row["skipped_records"]))
        if arrow:
            assert row["fallback_files"] == 1  # the malformed file only
    assert results[0] == results[1]
    assert [r["id"] for r in results[0][0]] == [1, 2, 3]


def test_upsert_from_debezium_identical_on_both_paths(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "in"
    events = []
    for i in range(30):
        events.append({"op": "c", "after": {"id": i % 10, "v": f"v{i}"}, "source": {"lsn": i}})
        if i % 7 == 0:
            events.append({"op": "d", "before": {"id": i % 10}, "source": {"lsn": i}})
    write_json_lines(data, "a.json", events[:20])
    write_json_lines(data, "b.json", events[20:])
    source = SourcePlan(
        "src",
        SourceKind.FILES,
        path=str(data),
        format=SourceFormat.DEBEZIUM_JSON,
        schema="id BIGINT, v STRING",
    )
    a, s = both_paths(spark, tmp_path, monkeypatch, source, key=("id",), mode=SinkMode.UPSERT)
    meta_a, meta_s = load_table(a, "ns.t").metadata_location, load_table(s, "ns.t").metadata_location
    assert read_duckdb(meta_a) == read_duckdb(meta_s)
    assert len(read_duckdb(meta_a)) > 0


# --------------------------------------------------------------------------- exactly once and resumption


def test_new_files_are_picked_up_once_and_the_watermark_is_recorded(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, data = tmp_path / "home", tmp_path / "in"
    state = State()
    source = SourcePlan(
        "src", SourceKind.FILES, path=str(data), format=SourceFormat.JSON, schema="id BIGINT, v STRING"
    )
    write_json_lines(data, "f1.json", [{"id": i, "v": "a"} for i in range(5)])
    run(spark, home, source, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)
    write_json_lines(data, "f2.json", [{"id": i, "v": "b"} for i in range(5, 9)])
    run(spark, home, source, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)
    run(spark, home, source, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)  # nothing new
    assert sorted(r["id"] for r in table_rows(home, "ns.t")) == list(range(9))
    summaries = icesql_summaries(load_table(home, "ns.t"))
    assert len(summaries) == 2
    mark = json.loads(summaries[-1]["icesql.source-watermark"])
    assert mark["path"].endswith("f2.json") and summaries[-1]["icesql.source-seq"] == "2"


def test_a_lost_checkpoint_neither_skips_nor_repeats_a_file(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pod without a persistent volume: the sink's checkpoint and staging are gone between runs.
    The table's watermark says which files were consumed; batch ids restart at 0 but the progress
    goes on after the table's."""
    home, data = tmp_path / "home", tmp_path / "in"
    state = State()
    source = SourcePlan(
        "src", SourceKind.FILES, path=str(data), format=SourceFormat.JSON, schema="id BIGINT, v STRING"
    )
    write_json_lines(data, "f1.json", [{"id": i, "v": "a"} for i in range(5)])
    write_json_lines(data, "f2.json", [{"id": i, "v": "a"} for i in range(5, 10)])
    run(spark, home, source, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)
    first = icesql_summaries(load_table(home, "ns.t"))[-1]
    shutil.rmtree(home / "sinks")
    import time

    time.sleep(0.05)  # a newer modification time than the watermark's
    write_json_lines(data, "f3.json", [{"id": i, "v": "b"} for i in range(10, 13)])
    run(spark, home, source, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)
    assert sorted(r["id"] for r in table_rows(home, "ns.t")) == list(range(13))
    last = icesql_summaries(load_table(home, "ns.t"))[-1]
    assert int(last["icesql.progress"]) > int(first["icesql.progress"])


def test_upgrade_from_sparks_file_source_keeps_exactly_once(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sink created and run by the previous release (Spark's file source and its checkpoint),
    then run on the Arrow path: the files its committed batches read are not read again, the new
    ones are, and its progress goes on."""
    home, data = tmp_path / "home", tmp_path / "in"
    state = State()
    source = SourcePlan(
        "src", SourceKind.FILES, path=str(data), format=SourceFormat.JSON, schema="id BIGINT, v STRING"
    )
    write_json_lines(data, "f1.json", [{"id": i, "v": "old"} for i in range(4)])
    run(spark, home, source, sink("s", "t"), arrow=False, monkeypatch=monkeypatch, state=state)
    write_json_lines(data, "f2.json", [{"id": i, "v": "old"} for i in range(4, 6)])
    run(spark, home, source, sink("s", "t"), arrow=False, monkeypatch=monkeypatch, state=state)
    old_progress = int(icesql_summaries(load_table(home, "ns.t"))[-1]["icesql.progress"])
    write_json_lines(data, "f3.json", [{"id": i, "v": "new"} for i in range(6, 9)])
    eng = run(spark, home, source, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)
    assert eng.runner("s").status_row()["path"] == "arrow"
    rows = table_rows(home, "ns.t")
    assert sorted(r["id"] for r in rows) == list(range(9))
    assert {r["v"] for r in rows if r["id"] >= 6} == {"new"}
    assert int(icesql_summaries(load_table(home, "ns.t"))[-1]["icesql.progress"]) > old_progress


def test_maximum_files_per_trigger_makes_several_batches(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, data = tmp_path / "home", tmp_path / "in"
    for k in range(5):
        write_json_lines(data, f"f{k}.json", [{"id": k, "v": "x"}])
    source = SourcePlan(
        "src",
        SourceKind.FILES,
        path=str(data),
        format=SourceFormat.JSON,
        schema="id BIGINT, v STRING",
        max_files_per_trigger=2,
    )
    run(spark, home, source, sink("s", "t"), arrow=True, monkeypatch=monkeypatch)
    summaries = icesql_summaries(load_table(home, "ns.t"))
    assert len(summaries) == 3  # 2 + 2 + 1 files, one commit per batch
    assert sorted(r["id"] for r in table_rows(home, "ns.t")) == list(range(5))


def test_upsert_of_plain_rows_identical_on_both_paths(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source without a changelog into MODE UPSERT: every row upserts its key (the newer file
    of a batch wins within a key only through the changelog order, so keys are distinct here)."""
    data = tmp_path / "in"
    write_json_lines(data, "a.json", [{"id": i, "v": f"a{i}"} for i in range(10)])
    source = SourcePlan(
        "src", SourceKind.FILES, path=str(data), format=SourceFormat.JSON, schema="id BIGINT, v STRING"
    )
    homes = {}
    for arrow in (True, False):
        home = tmp_path / ("arrow" if arrow else "spark")
        state = State()
        run(
            spark,
            home,
            source,
            sink("s", "t", key=("id",), mode=SinkMode.UPSERT),
            arrow=arrow,
            monkeypatch=monkeypatch,
            state=state,
        )
        homes[arrow] = (home, state)
    write_json_lines(data, "b.json", [{"id": i, "v": f"b{i}"} for i in range(5, 15)])
    for arrow, (home, state) in homes.items():
        run(
            spark,
            home,
            source,
            sink("s", "t", key=("id",), mode=SinkMode.UPSERT),
            arrow=arrow,
            monkeypatch=monkeypatch,
            state=state,
        )
    a = read_duckdb(load_table(homes[True][0], "ns.t").metadata_location)
    s = read_duckdb(load_table(homes[False][0], "ns.t").metadata_location)
    assert a == s
    assert sorted(r[1] for r in a) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5, 15)])


def test_the_watermark_survives_a_compaction_of_the_table(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction's snapshot carries the sink's progress and its source watermark, so a lost
    checkpoint after it still reads each file once."""
    from icesql.engine.maintenance.compact import compact_table

    home, data = tmp_path / "home", tmp_path / "in"
    state = State()
    source = SourcePlan(
        "src", SourceKind.FILES, path=str(data), format=SourceFormat.JSON, schema="id BIGINT, v STRING"
    )
    for k in range(3):
        write_json_lines(data, f"f{k}.json", [{"id": 10 * k + i, "v": "a"} for i in range(3)])
        run(spark, home, source, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)
    compact_table(load_table(home, "ns.t"))
    shutil.rmtree(home / "sinks")
    import time

    time.sleep(0.05)
    write_json_lines(data, "f9.json", [{"id": 90, "v": "b"}])
    run(spark, home, source, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)
    assert sorted(r["id"] for r in table_rows(home, "ns.t")) == [0, 1, 2, 10, 11, 12, 20, 21, 22, 90]


def test_warm_up_registers_the_files_source_and_starts_two_workers_per_core(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Engine.warm_up`` (``start_sink`` first thing; ``Session.warm_up`` with ``query``) where
    Spark's streaming query runs the source (``ICESQL_PLANNED_BATCHES=0``): the Arrow path's data
    source is registered in the background, once, the warm-up job of two chained Arrow stages runs
    to the end, and the throwaway query ends and leaves nothing."""
    from icesql.engine.backends.spark import session
    from icesql.engine.sources.files import source

    monkeypatch.setenv("ICESQL_PLANNED_BATCHES", "0")
    session._registered.discard((id(spark), source.NAME))  # another test of this session may have registered it
    eng = Engine(tmp_path, objects=Objects({}, {}), secrets=lambda n: "x", state=State(), spark=spark)
    import tempfile

    before = set(Path(tempfile.gettempdir()).glob("icesql-warm-*"))
    caplog.set_level(logging.DEBUG, logger="icesql.engine")
    eng.warm_up()
    eng.warm_up()  # once per engine
    eng.warm_up(query=True)  # Session.warm_up: and a throwaway query of the source, to its end
    eng.wait_warm(180)
    assert eng.warmer._thread is not None and not eng.warmer._thread.is_alive()
    assert (id(spark), source.NAME) in session._registered
    assert not [q.name for q in spark.streams.active if (q.name or "").startswith("icesql_warm_up")]
    assert set(Path(tempfile.gettempdir()).glob("icesql-warm-*")) == before  # its scratch is gone
    ran = [r.getMessage() for r in caplog.records if "a query of the files data source ran" in r.getMessage()]
    assert len(ran) == 1, ran  # the throwaway query ran to its end, once
    assert not [r for r in caplog.records if "warming" in r.getMessage() and "failed" in r.getMessage()]
    # registered with Spark itself: a streaming DataFrame of the source can be defined
    df = spark.readStream.format(source.NAME).schema(source.PIECE_SCHEMA).options(
        path=str(tmp_path), format="json", log=str(tmp_path / "log")
    ).load()
    assert df.isStreaming and df.columns == [f.name for f in source.PIECE_SCHEMA.fields]


def test_warm_up_with_planned_batches_starts_workers_and_leaves_the_data_source_alone(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Where a sink's batches are planned in the driver (the default: ``backends.spark.planned``)
    no Python data source runs: the warm-up registers none (Spark's look-up of installed data
    sources is a Python process of its own) and runs no throwaway query; its job of one Arrow
    stage per core runs to the end."""
    from icesql.engine.backends.spark import session
    from icesql.engine.sources.files import source

    session._registered.discard((id(spark), source.NAME))
    eng = Engine(tmp_path, objects=Objects({}, {}), secrets=lambda n: "x", state=State(), spark=spark)
    caplog.set_level(logging.DEBUG, logger="icesql.engine")
    eng.warm_up(query=True)
    eng.wait_warm(180)
    assert eng.warmer._thread is not None and not eng.warmer._thread.is_alive()
    assert (id(spark), source.NAME) not in session._registered
    assert not [r for r in caplog.records if "a query of the files data source ran" in r.getMessage()]
    assert not [r for r in caplog.records if "warming" in r.getMessage() and "failed" in r.getMessage()]
