"""Spark's streaming source runner (the process that plans the Arrow path's micro-batches) and
pandas: pyarrow would import pandas there on its first conversion, for nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RUNNER_PROBE = """
import sys
from importlib.machinery import ModuleSpec
if sys.argv[1] == "runner":
    sys.modules["__main__"].__spec__ = ModuleSpec("pyspark.sql.streaming.python_streaming_source_runner", None)
from icesql.engine.files.source import runner_without_pandas
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
