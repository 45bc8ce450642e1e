"""Sources, staging and the pieces of the pipeline that need no Spark (plus a few that do)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.base.changelog import CORRUPT
from icesql.engine.base.wire import BAD_RECORD_MARKER
from icesql.engine.commit.staging import StagedBatch, Staging
from icesql.engine.sources.generator import generator_expr
from icesql.engine.sources.guard import BadRecordError, RecordGuard, translate_bad_record
from icesql.plan import Column, SourceFormat, SourceKind, SourcePlan

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- staging


def test_staging_roundtrip_order_and_discard(tmp_path: Path) -> None:
    st = Staging.for_sink(tmp_path, "sink-1")
    assert st.directory == tmp_path / "sinks" / "sink-1" / "staging"
    assert st.pending() == []
    for bid in (3, 1, 12):
        st.add(StagedBatch(batch_id=bid, data_files=(f"d{bid}",), delete_files=(), rows=bid, bytes=10 * bid))
    assert [e.batch_id for e in st.pending()] == [1, 3, 12]
    assert st.totals() == (16, 160, 3)
    assert st.last_batch_id() == 12
    e = st.pending()[0]
    assert e.data_files == ("d1",) and e.files == 1 and not e.empty
    assert st.discard_through(3) == 2
    assert [e.batch_id for e in Staging(st.directory).pending()] == [12]
    assert st.discard_through(None) == 0


def test_staging_ignores_and_cleans_torn_writes(tmp_path: Path) -> None:
    st = Staging(tmp_path / "s")
    st.add(StagedBatch(batch_id=0, data_files=("a",)))
    (st.directory / ".00000000000000000001.json.123.tmp").write_text('{"batch_id": 1, "da')
    assert [e.batch_id for e in st.pending()] == [0]
    assert st.remove_temporaries() == 1
    assert sorted(p.name for p in st.directory.iterdir()) == ["00000000000000000000.json"]


def test_staging_survives_sigkill_after_add(tmp_path: Path) -> None:
    code = (
        f"import os, signal, sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from icesql.engine.commit.staging import Staging, StagedBatch\n"
        f"st = Staging({str(tmp_path / 's')!r})\n"
        "st.add(StagedBatch(batch_id=5, data_files=('x',), rows=1, bytes=2))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    rc = subprocess.run([sys.executable, "-c", code]).returncode
    assert rc == -9
    assert [e.batch_id for e in Staging(tmp_path / "s").pending()] == [5]


def test_staged_batch_json() -> None:
    e = StagedBatch(
        batch_id=7, data_files=("a", "b"), delete_files=("c",), rows=3, deletes=1, bytes=99, skipped=2
    )
    assert StagedBatch.from_json(e.to_json()) == e


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "altered", "renamed"])
def test_a_damaged_staging_entry_is_refused_naming_the_file(tmp_path: Path, how: str) -> None:
    """An entry damaged on disk after it was staged (the soak's staging_corrupt fault) is never
    committed nor taken for another batch: reading it fails with one line naming the file, the
    batch and what is wrong, and a hint; an entry the table already holds is discarded unread."""
    from icesql.engine.commit.recovery import recover
    from icesql.engine.commit.staging import StagingDamaged

    st = Staging(tmp_path / "s")
    path = st.add(StagedBatch(batch_id=13, data_files=("ZGF0YQ==",), rows=4, bytes=40))
    st.add(StagedBatch(batch_id=14, data_files=("b",), rows=1, bytes=1))
    original = path.read_bytes()
    if how == "truncated":
        path.write_bytes(original[:40])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(original[:20] + bytes([0xED, 0xA0, 0x80, 0xFF] * 4) + original[36:])
    elif how == "altered":  # still JSON, still UTF-8: only the checksum tells
        path.write_bytes(original.replace(b'"rows": 4', b'"rows": 5'))
    else:  # another batch's entry under this name
        path.write_bytes((st.directory / "00000000000000000014.json").read_bytes())

    with pytest.raises(StagingDamaged) as info:
        st.pending()
    err = info.value
    line = err.headline()
    assert "\n" not in line and str(path) in line and "batch 13" in line, line
    assert {"truncated": "not valid JSON", "empty": "it is empty", "garbage": "not UTF-8",
            "altered": "checksum", "renamed": "names batch 14"}[how] in line, line
    assert err.hint and "restore" in err.hint

    # committed already: discarded by name, never read
    assert recover(st, committed=13).committed == 13
    assert [e.batch_id for e in st.pending()] == [14]


def test_a_staging_entry_without_a_checksum_is_read(tmp_path: Path) -> None:
    """Entries staged by a release before the checksum still commit after an upgrade."""
    st = Staging(tmp_path / "s")
    entry = StagedBatch(batch_id=2, data_files=("a",), rows=1)
    d = json.loads(entry.to_json())
    del d["checksum"]
    (st.directory / "00000000000000000002.json").write_text(json.dumps(d))
    assert st.pending() == [entry]


# --------------------------------------------------------------------------- bad records (executor-side guard)


def guard(fmt: str = "json", **kw: Any) -> RecordGuard:
    return RecordGuard(
        source=kw.pop("source", "events"),
        fmt=fmt,
        columns=kw.pop("columns", ["id", "ts", "v"]),
        header=False,
        skip=kw.pop("skip", False),
        debezium=kw.pop("debezium", False),
        counter=None,
    )


def test_guard_names_the_field_of_a_json_type_error() -> None:
    row = {"id": None, "ts": None, "v": "x", CORRUPT: '{"id": "abc", "v": "x"}'}
    msg = guard().describe(row, "file:/data/in/a.json", 0, 1)
    assert msg.startswith("source 'events', file '/data/in/a.json', record 2, field 'id'")


def test_guard_reports_malformed_json_and_csv_fields() -> None:
    assert "malformed JSON" in guard().describe({CORRUPT: "nope"}, "file:///x/a.json", 0, 0)
    row = {"id": 1, "ts": None, "v": "a", CORRUPT: "1,notatime,a"}
    msg = guard("csv").describe(row, "file:/x/a.csv", 0, 4)
    assert "field 'ts'" in msg and "'notatime'" in msg and "record 5" in msg
    msg = guard("csv").describe({CORRUPT: "1,2"}, "file:/x/a.csv", 0, 0)
    assert "expected 3 fields, found 2" in msg


def test_guard_debezium_diagnostics() -> None:
    g = guard(debezium=True)
    bad_op = json.dumps({"op": "x", "after": {"id": 1}})
    assert "field 'op'" in g.describe({"op": "x", "after": {"id": 1}, CORRUPT: bad_op}, "f", 0, 0)
    missing = {"op": "c", "after": None, "before": None, CORRUPT: None}
    assert "field 'after'" in g.describe(missing, "f", 0, 0)
    wrapped = json.dumps({"payload": {"op": "c", "after": {"id": "one"}}})
    row = {"payload": {"op": "c", "after": {"id": None}}, "op": None, CORRUPT: wrapped}
    assert "field 'after.id'" in g.describe(row, "f", 0, 0)


def test_guard_raises_or_skips_on_executor_batches() -> None:
    import pyarrow as pa

    batch = pa.record_batch(
        {
            "id": pa.array([1, None, 3], pa.int64()),
            "v": ["a", None, "c"],
            CORRUPT: [None, '{"id": "two"}', None],
            "__file": ["file:/d/a.json"] * 3,
            "__blk": pa.array([0, 0, 0], pa.int64()),
        }
    )
    with pytest.raises(ValueError) as ei:
        list(guard(columns=["id", "v"])(iter([batch])))
    err = translate_bad_record(ei.value)
    assert isinstance(err, BadRecordError)
    assert "source 'events', file '/d/a.json', record 2, field 'id'" in err.message
    out = list(guard(columns=["id", "v"], skip=True)(iter([batch])))
    assert len(out) == 1 and out[0].column("id").to_pylist() == [1, 3]
    assert CORRUPT not in out[0].schema.names


def test_translate_bad_record_through_wrapped_exceptions() -> None:
    inner = Exception(
        "org.apache.spark.api.python.PythonException: ValueError: "
        + BAD_RECORD_MARKER
        + "source 's', file 'f'|END\n at ..."
    )
    outer = RuntimeError("query failed")
    outer.__cause__ = inner
    err = translate_bad_record(outer)
    assert err is not None and err.message == "bad record in source 's', file 'f'"
    assert translate_bad_record(RuntimeError("other")) is None


# --------------------------------------------------------------------------- generator expressions


def test_generator_expressions_are_deterministic_per_type() -> None:
    assert generator_expr(Column("id", "bigint")) == "CAST(value AS BIGINT) AS `id`"
    assert "concat('name-'" in generator_expr(Column("name", "string"))
    assert "timestamp_seconds(1704067200" in generator_expr(Column("ts", "timestamp"))
    assert "date_add(DATE'2024-01-01'" in generator_expr(Column("d", "date"))
    assert generator_expr(Column("s", "struct<a:int>")) == "CAST(NULL AS struct<a:int>) AS `s`"


# --------------------------------------------------------------------------- imports


def test_engine_import_does_not_import_pyspark() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "import icesql.engine.engine, icesql.engine.sink.runner, icesql.engine.sink.batch, icesql.engine.commit.staging, "
        "icesql.engine.sources.relation, icesql.engine.connections.catalogs, icesql.engine.connections.fileio, icesql.engine.connections.target\n"
        "bad = [m for m in ('pyspark', 'pyiceberg', 'pyarrow') if m in sys.modules]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_kill_point_is_inert_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from icesql.engine.base.hooks import KILL_ENV, kill_point

    monkeypatch.delenv(KILL_ENV, raising=False)
    kill_point("staged", 1)
    monkeypatch.setenv(KILL_ENV, "staged:3,write")
    kill_point("staged", 1)  # another batch
    kill_point("committed", 3)  # another point


# --------------------------------------------------------------------------- with Spark


@pytest.mark.spark
def test_debezium_source_rows_and_position(spark: Any, tmp_path: Path) -> None:
    from icesql.engine.backends.spark.frames import SparkBackend
    from icesql.engine.sources.resolve import build_relation
    from tests.support.pipeline_helpers import write_json_lines

    data = tmp_path / "cdc"
    write_json_lines(
        data,
        "a.json",
        [
            {"op": "c", "after": {"id": 1, "v": "a"}, "before": None, "ts_ms": 5, "source": {"lsn": 100}},
            {
                "payload": {
                    "op": "d",
                    "before": {"id": 1, "v": "a"},
                    "after": None,
                    "ts_ms": 6,
                    "source": {"lsn": 101},
                }
            },
            {"op": "u", "before": None, "after": {"id": 2, "v": "b"}, "ts_ms": 7, "source": {"ts_ms": 3}},
        ],
    )
    plan = SourcePlan(
        name="cdc",
        source_kind=SourceKind.FILES,
        path=str(data),
        format=SourceFormat.DEBEZIUM_JSON,
        schema="id BIGINT, v STRING",
    )
    rel = build_relation(SparkBackend(spark), "cdc", {"cdc": plan}.get)
    assert rel.changelog and rel.streaming and rel.data_columns == ["id", "v"]
    got: list[Any] = []
    q = (
        rel.df.writeStream.foreachBatch(lambda df, _: got.extend(df.collect()))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    rows = sorted(got, key=lambda r: r["__line"])
    assert [(r["id"], r["v"], r["__op"], r["__seq"]) for r in rows] == [
        (1, "a", "c", 100),
        (1, "a", "d", 101),
        (2, "b", "u", 3),
    ]
    assert all(r["__file"].endswith("a.json") and r["__blk"] == 0 for r in rows)
    assert [r["__line"] for r in rows] == [0, 1, 2]


@pytest.mark.spark
def test_parquet_source_infers_schema_and_csv_header(spark: Any, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from icesql.engine.backends.spark.frames import SparkBackend
    from icesql.engine.sources.relation import columns_of
    from icesql.engine.sources.resolve import build_relation

    pdir = tmp_path / "pq"
    pdir.mkdir()
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int32()), "b": ["x", "y"]}), pdir / "one.parquet")
    p = SourcePlan(name="p", source_kind=SourceKind.FILES, path=str(pdir), format=SourceFormat.PARQUET)
    assert [(c.name, c.type) for c in columns_of(build_relation(SparkBackend(spark), "p", {"p": p}.get).df)] == [
        ("a", "int"),
        ("b", "string"),
    ]
    cdir = tmp_path / "csv"
    cdir.mkdir()
    (cdir / "a.csv").write_text("id,name\n1,x\n2,y\n")
    c = SourcePlan(
        name="c",
        source_kind=SourceKind.FILES,
        path=str(cdir),
        format=SourceFormat.CSV,
        schema="id INT, name STRING",
        header=True,
    )
    rel = build_relation(SparkBackend(spark), "c", {"c": c}.get)
    assert [f.name for f in rel.df.schema.fields] == ["id", "name"]
    got: list[Any] = []
    rel.df.writeStream.foreachBatch(lambda df, _: got.extend(df.collect())).trigger(
        availableNow=True
    ).start().awaitTermination()
    assert sorted((r["id"], r["name"]) for r in got) == [(1, "x"), (2, "y")]


@pytest.mark.spark
def test_unknown_relation_is_a_clear_error(spark: Any) -> None:
    from icesql.engine.backends.spark.frames import SparkBackend
    from icesql.engine.sources.resolve import build_relation
    from icesql.errors import ExecutionError

    with pytest.raises(ExecutionError, match="neither an icesql source or view nor a table or view"):
        build_relation(SparkBackend(spark), "no_such_thing_anywhere", lambda n: None)


def test_env_is_clean() -> None:
    assert "ICESQL_TEST_KILL_AT" not in os.environ


# --------------------------------------------------------------------------- values as lines, timestamps


def test_values_become_one_line_each() -> None:
    """A Kafka JSON value column as lines for Arrow's JSON reader: nulls left out, a line break
    inside a value a space, a blank value (empty or only whitespace) a fallback; a slice reads
    only its own values."""
    import pyarrow as pa

    from icesql.engine.sources.decode import one_per_line
    from icesql.engine.sources.types import Fallback

    values = pa.array([b'{"a": 1}', None, b'{"a":\n2}', b' {"a": 3}\r\n', b"x"], pa.binary())
    assert one_per_line(values) == b'{"a": 1}\n{"a": 2}\n {"a": 3}  \nx\n'
    assert one_per_line(values.slice(2, 2)) == b'{"a": 2}\n {"a": 3}  \n'
    assert one_per_line(pa.array(["é"], pa.string())) == "é\n".encode()
    assert one_per_line(pa.array([None], pa.binary())) == one_per_line(pa.array([], pa.binary())) == b""
    for blank in (b"", b" \t\r\n\x0b\x0c"):
        with pytest.raises(Fallback):
            one_per_line(pa.array([b"{}", blank, b"{}"], pa.binary()))
    # a tab is no line break: kept as it is
    assert one_per_line(pa.array([b'{"a":\t1}', b"{}"], pa.binary())) == b'{"a":\t1}\n{}\n'
    # the bytes are looked at a megabyte at a time: a line break past the first is found too
    big = [b'{"v": "' + b"x" * 1000 + b'"}'] * 3000
    big[2500] = b'{"v":\n"y"}'
    text = bytes(one_per_line(pa.array(big, pa.binary())))
    assert text.count(b"\n") == 3000 and text.split(b"\n")[2500] == b'{"v": "y"}'


def test_timestamps_as_writers_spell_them_read_as_every_other_spelling() -> None:
    """The one-pass path for yyyy-MM-ddTHH:mm:ss[.f{1,6}][zone] gives what the rewrites give: zones
    honoured, zoneless text in the session's zone, nulls kept, a zone refused for TIMESTAMP_NTZ."""
    import datetime as dt

    import pyarrow as pa

    from icesql.engine.sources.types import Fallback, convert

    utc = pa.timestamp("us", tz="UTC")

    def read(values: list[str | None], target: Any = utc, tz: str = "UTC") -> list[Any]:
        return convert(pa.array(values, pa.string()), target, session_tz=tz).to_pylist()

    t = dt.datetime(2026, 11, 1, 0, 16, 39, 999000, tzinfo=dt.timezone.utc)
    assert read(["2026-11-01T00:16:39.999Z", None, "2026-11-01T01:16:39.999+01:00"]) == [t, None, t]
    # the same instants spelled otherwise (a space, no seconds' fraction digits beyond six)
    assert read(["2026-11-01 00:16:39.9990001Z", "2026-11-01T00:16:39.999000Z"]) == [t, t]
    assert read(["2026-11-01T01:16:39.999", "2026-11-01T00:16:39.999Z"], tz="Europe/Madrid") == [t, t]
    ntz = pa.timestamp("us")
    assert read(["2026-11-01T00:16:39.999"], ntz) == [t.replace(tzinfo=None)]
    with pytest.raises(Fallback):
        read(["2026-11-01T00:16:39.999Z"], ntz)
