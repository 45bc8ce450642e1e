"""examples/embedding.py: a PySpark program sinks its own streaming DataFrame through icesql.

The example goes through the public path (``icesql.Session`` + SQL: ``CREATE CONNECTION ...
TYPE = 'local'``, ``CREATE SINK demo FROM ticks``, where ``ticks`` is a temporary view the
program registered itself); the test runs its ``main`` on the test's Spark session.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.support.pipeline_helpers import icesql_summaries, load_table, spark_for_tests
from tests.support.readers import read_duckdb

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "embedding.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("icesql_embedding_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_embedding_example_sinks_a_programs_dataframe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spark = spark_for_tests()  # the program's own session: the engine reuses it
    example = load_example()
    home = tmp_path / "demo"
    assert example.main(["--home", str(home), "--seconds", "6", "--rows-per-second", "20"], spark=spark) == 0
    out = capsys.readouterr().out
    assert "sink demo: stopped" in out
    table = load_table(home, "demo.ticks", catalog_name="local")
    ids = [r["id"] for r in table.scan().to_arrow().to_pylist()]
    assert ids and len(ids) == len(set(ids))
    assert sorted(ids) == list(range(len(ids)))  # the rate source's prefix, no gaps
    reasons = [s["icesql.commit-reason"] for s in icesql_summaries(table)]
    # the last commit is 'shutdown' unless a 'period' commit took everything just before the
    # stop (timing); either way nothing staged is left behind (checked with the status below).
    # tests/cli/test_cli_spark.py proves the shutdown commit deterministically.
    assert reasons and set(reasons) <= {"period", "shutdown"}
    duck = read_duckdb(table.metadata_location, "id, label")
    assert duck == sorted(((i, f"tick-{i}") for i in ids), key=repr)

    # the SQL objects are in the icesql home: the sink reads the program's view by name
    import icesql

    with icesql.Session(home=home) as s:
        (sink,) = s.execute("SHOW SINKS")[0].rows
        assert sink[0] == "demo" and sink[2].startswith("ticks -> local.")
        assert [r[0] for r in s.execute("SHOW CONNECTIONS")[0].rows] == ["local"]
        (st,) = s.status()
        assert (st.state, st.rows_committed) == ("stopped", len(ids))
    assert not list(home.glob("sinks/*/staging/*.json"))  # the stop committed everything staged
