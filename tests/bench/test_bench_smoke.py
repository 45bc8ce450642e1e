"""Smoke runs of the benchmark suite (benchmarks/), so it cannot rot.

Tiny sizes only: the data generator and its expected upsert state, the pyarrow / pyiceberg /
Spark-Parquet baselines, the icesql hooks (append, upsert, commit; one child process) and run.py's
report. The Spark 3.5 + Iceberg Java
baseline needs the reader harness (``java`` marker); full-size runs are marked ``bench``.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks import baselines, datagen, run

ROWS = 20_000


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> datagen.Dataset:
    return datagen.generate_append(tmp_path_factory.mktemp("bench-data") / "append", ROWS, files=2)


@pytest.fixture(scope="module")
def upsert(tmp_path_factory: pytest.TempPathFactory) -> datagen.UpsertDataset:
    return datagen.generate_upsert(tmp_path_factory.mktemp("bench-upsert") / "u", keys=2_000, batches=3,
                                   batch_size=200)


def _sane(r: dict, rows: int) -> None:
    assert r["status"] == "ok", r
    assert r["rows"] == rows
    assert r["seconds"] > 0 and r["rows_per_s"] > 0 and r["mb_per_s"] > 0
    assert r["files"] >= 1 and r["bytes"] > 0
    assert 0 <= r["file_mb_min"] <= r["file_mb_median"] <= r["file_mb_max"]
    assert r["peak_rss_mb"] > 10
    assert r["wall_seconds"] >= r["seconds"]


def test_dataset_is_deterministic_with_ten_columns(ds: datagen.Dataset, tmp_path: Path) -> None:
    t = pa.concat_tables(pq.read_table(f) for f in ds.files)
    assert t.num_rows == ROWS and t.schema.equals(datagen.SCHEMA) and len(t.schema) == 10
    assert t.column("id").to_pylist() == list(range(ROWS))
    again = datagen.generate_append(tmp_path / "again", ROWS, files=3)  # other file split, same rows
    assert pa.concat_tables(pq.read_table(f) for f in again.files).equals(t)
    assert datagen.Dataset.load(ds.path) == ds
    lengths = pa.compute.utf8_length(t.column("payload"))
    assert 35 <= pa.compute.mean(lengths).as_py() <= 50
    assert len(t.column("category").unique()) == len(datagen.CATEGORIES)


def test_upsert_batches_and_expected_state(upsert: datagen.UpsertDataset) -> None:
    assert upsert.mix == {"update": 140, "delete": 20, "insert": 40}
    base = pa.concat_tables(pq.read_table(f) for f in upsert.base.files)
    changes = [pq.read_table(f) for f in upsert.change_files]
    for ch in changes:
        ops = collections.Counter(ch.column("op").to_pylist())
        assert ops == {"U": 140, "D": 20, "I": 40}
        assert len(set(ch.column("id").to_pylist())) == ch.num_rows  # distinct keys per batch (MERGE needs it)
        assert ch.column("pos").to_pylist() == list(range(ch.num_rows))
    expected = pq.read_table(upsert.expected)
    assert expected.num_rows == upsert.expected_rows == 2_000 + 3 * (40 - 20)
    assert datagen.apply_changes_python(base, changes).equals(expected)
    # the Debezium rendering of the same changes
    events = [json.loads(line) for line in Path(upsert.debezium_files[0]).read_text().splitlines()]
    assert collections.Counter(e["op"] for e in events) == {"u": 140, "d": 20, "c": 40}
    assert [e["source"]["pos"] for e in events] == list(range(200))
    first = changes[0].slice(0, 1).to_pylist()[0]
    ev = events[0]
    image = ev["before"] if first["op"] == "D" else ev["after"]
    assert image["id"] == first["id"] and image["payload"] == first["payload"]
    assert all((e["before"] is None) == (e["op"] == "c") and (e["after"] is None) == (e["op"] == "d") for e in events)


@pytest.mark.parametrize("partitioned", [False, True])
def test_pyarrow_baseline(ds: datagen.Dataset, tmp_path: Path, partitioned: bool) -> None:
    r = baselines.pyarrow_append(ds, tmp_path, partitioned)
    _sane(r, ROWS)
    assert r["files"] >= (20 if partitioned else 1)  # the ~30 days of ts
    assert r["peak_rss_mb_by_kind"].get("driver_python", 0) > 0


def test_pyiceberg_baseline(ds: datagen.Dataset, tmp_path: Path) -> None:
    r = baselines.pyiceberg_append(ds, tmp_path, partitioned=True)
    _sane(r, ROWS)
    assert r["rows_in_table"] == ROWS and r["files"] >= 20


@pytest.mark.spark
def test_icesql_hooks_at_tiny_size(ds: datagen.Dataset, upsert: datagen.UpsertDataset, tmp_path: Path) -> None:
    """append (day(ts)), upsert (load + one Debezium batch) and the commit path, one child process."""
    args = {
        "append": {"source_dir": ds.path, "files": ds.files, "rows": ds.rows, "arrow_bytes": ds.arrow_bytes,
                   "partitioned": True, "spark_conf": {"spark.sql.shuffle.partitions": "2"}},
        "upsert": {"base_files": upsert.base.files, "base_dir": upsert.base.path,
                   "change_files": upsert.change_files[:1], "debezium_files": upsert.debezium_files[:1],
                   "expected_rows": upsert.expected_rows},
        "home": str(tmp_path / "home"),
    }
    r = baselines.run_worker("icesql_smoke", baselines.PROJECT_PY, "benchmarks.icesql_hooks:smoke", args, tmp_path)
    assert r["status"] == "ok", r
    a = r["append"]
    assert a["rows"] == a["rows_in_table"] == ROWS and a["files"] >= 20 and a["sink_commits"] == 1
    assert a["seconds"] > 0 and a["rows_per_s"] > 0 and a["partitioned"] is True
    u = r["upsert"]
    assert len(u["batch_seconds"]) == 1 and u["changes"] == 200 and u["snapshots"] == 1 + 1
    assert u["files"] >= 2 and u["delete_files"] == 1 and u["metadata"].endswith(".metadata.json")
    c = r["commit"]
    assert c["n"] == 5 and c["snapshots"] == 5 and 0 < c["p50_ms"] < 5_000
    assert r["peak_rss_mb_by_kind"].get("jvm", 0) > 100  # the driver JVM is in the sampled tree


def test_run_py_reports_ratios_only_when_both_sides_ran(tmp_path: Path) -> None:
    out = tmp_path / "res.json"
    rc = run.main(["--only", "append", "--rows", "5000", "--out", str(out), "--data-dir", str(tmp_path / "d"),
                   "--work-dir", str(tmp_path / "w"), "--skip", "icesql,spark35_iceberg,spark35_parquet,spark4_parquet"])
    assert rc == 0
    res = json.loads(out.read_text())
    ap = res["sections"]["append"]
    assert ap["unpartitioned"]["pyarrow_parquet"]["status"] == "ok"
    assert ap["partitioned_day_ts"]["pyiceberg_append"]["status"] == "ok"
    ratios = {r["ratio"]: r for r in res["ratios"]}
    ctx = ratios["append unpartitioned: (context) pyiceberg append vs best raw Parquet"]
    assert ctx["value"] is not None and ctx["value"] > 0
    ice = ratios["append unpartitioned: icesql vs Spark+Iceberg Java"]
    assert ice["value"] is None and ice["met"] is None  # neither side ran (both skipped)
    md = out.with_suffix(".md").read_text()
    assert "### Ratios" in md and "pyarrow_parquet" in md and res["command"].startswith("python benchmarks/run.py")


@pytest.mark.spark
def test_spark4_parquet_baseline(ds: datagen.Dataset, tmp_path: Path) -> None:
    r = baselines.spark_parquet_append(ds, tmp_path, partitioned=False, spark="4")
    _sane(r, ROWS)
    assert r["peak_rss_mb_by_kind"].get("jvm", 0) > 100  # the driver JVM is in the sampled tree


@pytest.mark.java
@pytest.mark.skipif(not baselines.harness_available(), reason="reader harness not built")
def test_spark_iceberg_java_baselines(ds: datagen.Dataset, upsert: datagen.UpsertDataset, tmp_path: Path) -> None:
    r = baselines.spark_iceberg_append(ds, tmp_path / "append", partitioned=True)
    _sane(r, ROWS)
    assert r["rows_in_table"] == ROWS
    m = baselines.spark_iceberg_merge(upsert, tmp_path / "merge")
    assert m["status"] == "ok" and m["rows_match"] and len(m["batch_seconds"]) == 3 and m["delete_files"] >= 1
    d = baselines.read_duckdb(m["metadata"], upsert.expected, tmp_path / "duck", "smoke")
    assert d["status"] == "ok" and d["matches_expected"], d
    j = baselines.read_java(m["metadata"], upsert.expected, tmp_path / "java", "smoke")
    assert j["status"] == "ok" and j["matches_expected"], j


@pytest.mark.bench
def test_full_size_suite(tmp_path: Path) -> None:
    """The whole suite at its default sizes (long: run with -m bench)."""
    out = tmp_path / "full.json"
    assert run.main(["--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["sections"]["append"]["unpartitioned"]["pyarrow_parquet"]["status"] == "ok"
