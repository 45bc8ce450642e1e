"""Spark's streaming source runner (the process that plans the Arrow path's micro-batches) and
pandas: pyarrow would import pandas there on its first conversion, for nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

RUNNER_PROBE = """
import sys
from importlib.machinery import ModuleSpec
if sys.argv[1] == "runner":
    sys.modules["__main__"].__spec__ = ModuleSpec("pyspark.sql.streaming.python_streaming_source_runner", None)
from icesql.engine.sources.files.source import runner_without_pandas
done = runner_without_pandas()
import pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.Table.from_pylist([{"a": 1}]), sys.argv[2])
rows = pq.read_table(sys.argv[2]).to_pylist()
before = "pandas" in sys.modules
frame = pa.table({"a": [1]}).to_pandas()  # asked for outright: pyarrow imports it then
print(done, before, rows == [{"a": 1}], type(frame).__name__)
"""


@pytest.mark.parametrize("process", ["runner", "other"])
def test_the_streaming_source_runner_never_imports_pandas(tmp_path: Path, process: str) -> None:
    """In Spark's streaming source runner, pyarrow's conversions and Parquet reads leave pandas
    unimported (0.15-0.5 s of every query's start); pandas asked for outright still comes. Any
    other process is left alone. (A fresh interpreter per case: the choice is once per process.)"""
    out = subprocess.run(
        [sys.executable, "-c", RUNNER_PROBE, process, str(tmp_path / "t.parquet")],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout.split()
    if process == "runner":
        assert out == ["True", "False", "True", "DataFrame"]
    else:
        assert out == ["False", "True", "True", "DataFrame"]


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return False
        pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
    return False


def _runner_maps() -> list[str]:
    """The memory maps of the streaming source runners Spark started for this process."""
    from icesql.engine.sources.files.source import RUNNER_MODULE

    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if RUNNER_MODULE.encode() in cmdline and _descends_from(int(entry.name), os.getpid()):
                out.append((entry / "maps").read_text())
        except OSError:
            continue
    return out


@pytest.mark.spark
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc (Linux)")
def test_the_runner_spark_starts_has_no_pandas_loaded(spark: Any, tmp_path: Path) -> None:
    """The process Spark really starts for a query of the files source (not a stand-in for it):
    after it admitted a file to the file log (pyarrow writes the log's segment) it has pyarrow's
    libraries mapped and none of pandas'."""
    from icesql.engine.sources.files import source

    source.register(spark)
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.json").write_text('{"a": 1}\n')
    batches: list[int] = []
    df = spark.readStream.format(source.NAME).schema(source.PIECE_SCHEMA).options(
        path=str(data), format="json", log=str(tmp_path / "log")
    ).load()
    q = (
        df.writeStream.foreachBatch(lambda b, i: batches.append(i))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="0.5 seconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while not batches and time.monotonic() < deadline:
            time.sleep(0.2)
        assert batches, "the query ran no batch"
        maps = _runner_maps()
        assert len(maps) == 1
        assert "pyarrow/lib" in maps[0]  # the right process, and its maps readable
        assert "pandas/_libs" not in maps[0]
    finally:
        q.stop()
