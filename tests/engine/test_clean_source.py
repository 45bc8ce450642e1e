"""FILES sources that stay cheap: CLEAN SOURCE (files moved away or deleted once committed), MAX
BYTES PER TRIGGER, and a file log whose compaction never rereads what it merged before.

The sinks run on local Spark and write a local catalog; the files are real files of a temporary
directory (the S3 case is in ``tests/e2e/test_s3_files_source.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.analyzer import MemoryCatalog, analyze
from icesql.engine.connections.stores.location import Listed, Location
from icesql.engine.engine import Engine
from icesql.engine.sources.files.clean import Cleaner, clean_through, committed_seq
from icesql.engine.sources.files.log import COMPACT_EVERY, SMALL_SEGMENT, FileLog
from icesql.errors import AnalysisError, CatalogError
from icesql.plan import CleanSource, SourceFormat, SourceKind, SourcePlan, plan_from_dict, to_dict
from icesql.syntax.parser import parse_one
from tests.engine.test_arrow_path import run, sink, table_rows
from tests.support.pipeline_helpers import (
    Objects,
    State,
    icesql_summaries,
    load_table,
    local_catalog,
    wait_for,
    write_json_lines,
)

SCHEMA = "id BIGINT, v STRING"


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.is_file()) if directory.exists() else []


def source(data: Path, **kw: Any) -> SourcePlan:
    return SourcePlan("src", SourceKind.FILES, path=str(data), format=SourceFormat.JSON, schema=SCHEMA, **kw)


# --------------------------------------------------------------------------- the statement


def analyze_source(sql: str) -> SourcePlan:
    plan = analyze(parse_one(sql), MemoryCatalog(), source=sql).plan
    return plan.definition  # type: ignore[attr-defined,no-any-return]


def test_clean_source_options_become_the_plan_and_survive_the_store(tmp_path: Path) -> None:
    plan = analyze_source(
        f"CREATE SOURCE s FROM FILES '{tmp_path}/in/' (FORMAT = 'json', SCHEMA = '{SCHEMA}', "
        f"CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = '{tmp_path}/done/', MAX BYTES PER TRIGGER = '64MiB')"
    )
    assert plan.clean_source is CleanSource.ARCHIVE
    assert plan.archive_directory == f"{tmp_path}/done"
    assert plan.max_bytes_per_trigger == 64 * 1024 * 1024
    assert plan_from_dict(to_dict(plan)) == plan
    plain = analyze_source(f"CREATE SOURCE s FROM FILES '{tmp_path}/in/' (FORMAT = 'json', SCHEMA = '{SCHEMA}')")
    assert "clean_source" not in to_dict(plain)  # stored definitions of older sources are unchanged


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("CLEAN SOURCE = 'archive'", "CLEAN SOURCE = 'archive' needs ARCHIVE DIRECTORY"),
        ("ARCHIVE DIRECTORY = '/tmp/a'", "ARCHIVE DIRECTORY applies only with CLEAN SOURCE = 'archive'"),
        ("CLEAN SOURCE = 'delete', ARCHIVE DIRECTORY = '/tmp/a'", "applies only with CLEAN SOURCE = 'archive'"),
        ("CLEAN SOURCE = 'move'", "CLEAN SOURCE"),
        ("CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = '/data/in/'", "must not be the source's directory"),
        ("CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = 's3://b/a/'", "must be on the source's storage"),
        (
            "CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = '/data/in/old', RECURSIVE = true",
            "inside the directory a RECURSIVE source reads",
        ),
        ("MAX BYTES PER TRIGGER = 0", "option MAX BYTES PER TRIGGER must be positive"),
        ("MAX FILES PER TRIGGER = 2, MAX BYTES PER TRIGGER = '1MiB'", "cannot both be set"),
    ],
)
def test_bad_clean_source_and_limit_options_are_located_errors(options: str, message: str) -> None:
    sql = f"CREATE SOURCE s FROM FILES '/data/in/' (FORMAT = 'json', SCHEMA = '{SCHEMA}', {options})"
    with pytest.raises(AnalysisError) as info:
        analyze(parse_one(sql), MemoryCatalog(), source=sql)
    text = info.value.render()
    assert message in text
    assert "^" in text  # a caret under the option


def test_a_cleaned_source_feeds_one_sink(tmp_path: Path) -> None:
    """A second sink on a source whose files the first one moves away would miss them: refused,
    through a view too; a source without CLEAN SOURCE takes any number of sinks."""
    sql = f"""
    CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp_path}/wh');
    CREATE SOURCE moved FROM FILES '{tmp_path}/in/' (FORMAT = 'json', SCHEMA = '{SCHEMA}', CLEAN SOURCE = 'delete');
    CREATE SOURCE kept FROM FILES '{tmp_path}/in2/' (FORMAT = 'json', SCHEMA = '{SCHEMA}');
    CREATE VIEW recent AS SELECT * FROM moved WHERE id > 0;
    CREATE SINK first FROM moved INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'a');
    CREATE SINK k1 FROM kept INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'k1');
    CREATE SINK k2 FROM kept INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'k2');
    """
    with icesql.Session(home=tmp_path / "home") as s:
        s.execute(sql)
        for stmt in (
            "CREATE SINK second FROM moved INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'b')",
            "CREATE SINK second FROM recent INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'b')",
        ):
            with pytest.raises(CatalogError) as info:
                s.execute(stmt)
            assert "source 'moved' has CLEAN SOURCE = 'delete' and sink 'first' already reads it" in str(info.value)
        s.execute("DROP SINK first")
        s.execute("CREATE SINK second FROM recent INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'b')")


# --------------------------------------------------------------------------- the parts


def test_archive_targets_keep_the_files_path_as_sparks_cleaner_does() -> None:
    local = Cleaner("archive", "/data/done")
    assert local.archive_target(Location("/data/in"), "/data/in/f.json") == "/data/done/data/in/f.json"
    s3 = Cleaner("archive", "s3://bucket/done")
    loc = Location("s3://bucket/in/", {"s3.endpoint": "http://127.0.0.1:1"})
    assert s3.archive_target(loc, "s3://bucket/in/f.json") == "bucket/done/in/f.json"


def test_cleaning_moves_deletes_and_never_overwrites(tmp_path: Path) -> None:
    data, done = tmp_path / "in", tmp_path / "done"
    a = write_json_lines(data, "a.json", [{"id": 1}])
    b = write_json_lines(data, "b.json", [{"id": 2}])
    loc = Location(str(data))
    archive = Cleaner("archive", str(done))
    assert archive.clean(loc, str(a))
    moved = Path(archive.archive_target(loc, str(a)))
    assert moved.read_text() == '{"id": 1}\n' and not a.exists()
    # a different file under an archived name: the archive name is taken, so it stays where it is
    a2 = write_json_lines(data, "a.json", [{"id": 30}])
    assert not archive.clean(loc, str(a2))
    assert a2.exists() and moved.read_text() == '{"id": 1}\n'
    # the same bytes in both places: a move a crash cut short between its copy and its delete
    a3 = write_json_lines(data, "a.json", [{"id": 1}])
    assert archive.clean(loc, str(a3))
    assert not a3.exists() and moved.read_text() == '{"id": 1}\n'
    assert Cleaner("delete").clean(loc, str(b)) and not b.exists()
    assert Cleaner("delete").clean(loc, str(b))  # gone already (a crash before the mark): done


def test_clean_through_follows_the_log_and_records_its_mark(tmp_path: Path) -> None:
    data = tmp_path / "in"
    paths = [write_json_lines(data, f"f{i}.json", [{"id": i}]) for i in range(5)]
    flog = FileLog(str(tmp_path / "log"))
    flog.append([Listed(str(p), p.stat().st_size, i) for i, p in enumerate(paths)])
    cleaner, loc = Cleaner("delete"), Location(str(data))
    assert clean_through(flog, loc, cleaner, 3, flog.cleaned_through()) == 3
    assert files_in(data) == ["f3.json", "f4.json"]
    assert FileLog(str(tmp_path / "log")).cleaned_through() == 3  # durable, for the next process
    assert clean_through(flog, loc, cleaner, 2, 3) == 3  # never backwards
    assert clean_through(flog, loc, cleaner, 5, 3) == 5
    assert files_in(data) == []
    flog.close()


def test_files_a_log_was_seeded_with_are_never_cleaned(tmp_path: Path) -> None:
    """After a lost checkpoint the seed is the files up to the table's watermark, which may hold a
    late file no batch read: cleaning starts after the seed, so such a file is never deleted."""
    data = tmp_path / "in"
    late = write_json_lines(data, "late.json", [{"id": 0}])
    new = write_json_lines(data, "new.json", [{"id": 1}])
    flog = FileLog(str(tmp_path / "log"))
    assert flog.write_seed([Listed(str(late), late.stat().st_size, 1)], progress_base=3) == 1
    flog.append([Listed(str(new), new.stat().st_size, 2)])
    assert clean_through(flog, Location(str(data)), Cleaner("delete"), 2, flog.cleaned_through()) == 2
    assert files_in(data) == ["late.json"]
    flog.close()


def test_compaction_merges_only_the_small_segments_at_the_end(tmp_path: Path) -> None:
    """A log that has seen many files: the big merged segment is not read or rewritten again."""
    flog = FileLog(str(tmp_path / "log"))
    flog.append([Listed(f"/in/big{i:05d}", 1, i) for i in range(SMALL_SEGMENT)])
    for k in range(COMPACT_EVERY + 1):
        flog.append([Listed(f"/in/s{k:03d}", 1, SMALL_SEGMENT + k)])
    big = flog.segments(refresh=True)[0]
    flog.compact()
    segs = flog.segments(refresh=True)
    assert segs[0] == big  # untouched
    assert len(segs) == 2 and segs[1][:2] == (SMALL_SEGMENT + 1, SMALL_SEGMENT + COMPACT_EVERY + 1)
    entries = flog.entries(0, flog.high())
    assert [e.seq for e in entries] == list(range(1, SMALL_SEGMENT + COMPACT_EVERY + 2))
    assert entries[-1].path == f"/in/s{COMPACT_EVERY:03d}"
    flog.close()


def test_committed_seq_reads_sparks_commit_log(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    assert committed_seq(ck) is None
    (ck / "offsets").mkdir(parents=True)
    (ck / "commits").mkdir()
    for batch, seq in ((0, 2), (1, 5), (2, 9)):
        (ck / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"seq":{seq}}}\n')
    (ck / "commits" / "0").write_text("v1\n{}\n")
    (ck / "commits" / "1").write_text("v1\n{}\n")
    assert committed_seq(ck) == 5  # batch 2 is planned, not committed
    assert committed_seq(f"file://{ck}") == 5


# --------------------------------------------------------------------------- sinks


@pytest.mark.spark
def test_run_once_deletes_what_it_committed(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, data = tmp_path / "home", tmp_path / "in"
    state = State()
    src = source(data, clean_source=CleanSource.DELETE)
    write_json_lines(data, "f1.json", [{"id": i, "v": "a"} for i in range(3)])
    write_json_lines(data, "f2.json", [{"id": i, "v": "a"} for i in range(3, 5)])
    run(spark, home, src, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)
    assert files_in(data) == []
    write_json_lines(data, "f3.json", [{"id": 5, "v": "b"}])
    run(spark, home, src, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)
    run(spark, home, src, sink("s", "t"), arrow=True, monkeypatch=monkeypatch, state=state)  # nothing new
    assert files_in(data) == []
    assert sorted(r["id"] for r in table_rows(home, "ns.t")) == list(range(6))
    assert len(icesql_summaries(load_table(home, "ns.t"))) == 2


@pytest.mark.spark
@pytest.mark.parametrize("without_spark", [False, True])
def test_archive_with_several_batches_per_run(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_spark: bool
) -> None:
    """MAX BYTES PER TRIGGER makes one batch per file here; every file ends in the archive under
    its own path, each read once - on Spark, and in a run without it (``local_query``)."""
    home, data, done = tmp_path / "home", tmp_path / "in", tmp_path / "done"
    for k in range(4):
        write_json_lines(data, f"f{k}.json", [{"id": k, "v": "x" * 50}])
    size = (data / "f0.json").stat().st_size
    src = source(data, clean_source=CleanSource.ARCHIVE, archive_directory=str(done), max_bytes_per_trigger=size)
    eng = run(None if without_spark else spark, home, src, sink("s", "t"), arrow=True, monkeypatch=monkeypatch)
    assert (eng._spark is None) == without_spark
    assert len(icesql_summaries(load_table(home, "ns.t"))) == 4  # one batch (and commit) per file
    assert files_in(data) == []
    archived = done / str(data).lstrip("/")
    assert files_in(archived) == [f"f{k}.json" for k in range(4)]
    assert sorted(r["id"] for r in table_rows(home, "ns.t")) == list(range(4))


@pytest.mark.spark
def test_max_bytes_per_trigger_on_sparks_path(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, data = tmp_path / "home", tmp_path / "in"
    for k in range(3):
        write_json_lines(data, f"f{k}.json", [{"id": k, "v": "y" * 50}])
    size = (data / "f0.json").stat().st_size
    eng = run(
        spark, home, source(data, max_bytes_per_trigger=size), sink("s", "t"), arrow=False, monkeypatch=monkeypatch
    )
    assert eng.runner("s").status_row()["path"] == "spark"
    assert len(icesql_summaries(load_table(home, "ns.t"))) == 3
    assert files_in(data) == ["f0.json", "f1.json", "f2.json"]  # no CLEAN SOURCE: left alone


@pytest.mark.spark
def test_a_running_sink_cleans_each_batch_at_the_next_trigger(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trigger starts from the offsets Spark has committed: the files before them go then."""
    monkeypatch.setenv("ICESQL_ARROW_PATH", "1")
    home, data = tmp_path / "home", tmp_path / "in"
    state = State()
    src = source(data, clean_source=CleanSource.DELETE)
    objects = Objects({"cat": local_catalog(warehouse=home / "warehouse")}, {"src": src})
    eng = Engine(home, objects=objects, secrets=lambda n: "x", state=state, spark=spark, trigger_interval=0.2)
    plan = sink("s", "t")

    def committed() -> list[int]:
        try:
            return sorted(r["id"] for r in table_rows(home, "ns.t"))
        except Exception:  # noqa: BLE001 - the table does not exist before the first commit
            return []

    try:
        eng.start_sink(plan)
        for k in (1, 2):
            write_json_lines(data, f"f{k}.json", [{"id": k, "v": "a"}])
            wait_for(lambda k=k: committed() == list(range(1, k + 1)), what=f"f{k} committed")
            wait_for(lambda: files_in(data) == [], what=f"f{k} deleted")
    finally:
        eng.stop()
    run(spark, home, src, plan, arrow=True, monkeypatch=monkeypatch, state=state)  # nothing new
    assert committed() == [1, 2]
    assert len(icesql_summaries(load_table(home, "ns.t"))) == 2


@pytest.mark.spark
def test_sparks_path_archives_with_the_same_layout(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Spark's path (a view, or ICESQL_ARROW_PATH=0) Spark's own cleaner moves the files:
    a batch's files go when the next batch is planned, to the same archive paths."""
    home, data, done = tmp_path / "home", tmp_path / "in", tmp_path / "done"
    state = State()
    src = source(data, clean_source=CleanSource.ARCHIVE, archive_directory=str(done))
    write_json_lines(data, "f1.json", [{"id": 1, "v": "a"}])
    run(spark, home, src, sink("s", "t"), arrow=False, monkeypatch=monkeypatch, state=state)
    write_json_lines(data, "f2.json", [{"id": 2, "v": "a"}])
    run(spark, home, src, sink("s", "t"), arrow=False, monkeypatch=monkeypatch, state=state)
    assert "f1.json" not in files_in(data)
    assert files_in(done / str(data).lstrip("/"))[:1] == ["f1.json"]
    assert sorted(r["id"] for r in table_rows(home, "ns.t")) == [1, 2]
