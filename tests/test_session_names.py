"""Unknown names answered at once, without Spark (``icesql.sessions.names``).

The golden cases of ``tests/golden/name_errors`` run in one child process through
``Session.execute``, as ``icesql exec`` runs them: a mistyped connection, namespace, table,
source or view in a SELECT, EXPLAIN, DESCRIBE or a sink's FROM is one rendered error with its
place and a did-you-mean; the names that are right (CTEs, table functions, struct fields, Spark's
own catalog and files) still pass. Each case is timed on its own (under a second: the catalog's
libraries are imported by the harness's setup, which creates the tables through pyiceberg), and
the child never imports pyspark, so no JVM can have started. Rewrite the expectations with
``--update-golden`` and review the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import icesql
from icesql.errors import IcesqlError
from tests.analyzer.golden import cases, split_expected

# icesql answers unknown names itself unless the program has a Spark of its own
pytestmark = pytest.mark.usefixtures("no_spark_of_the_program")

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "name_errors" / "names.sql"
SECONDS = 1.0

CHILD = r"""
import json, sys, time
from pathlib import Path
import pyarrow as pa
import icesql
from tests.analyzer.golden import cases


path, home = Path(sys.argv[1]), Path(sys.argv[2])
all_cases = cases(path)
out = []
with icesql.Session(home=home) as s:
    s.execute(all_cases[0].preamble, base_dir=home.parent)
    catalog, _, _ = s.engine.connection_catalog("lake")
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    catalog.create_namespace("analytics")
    catalog.create_table(("analytics", "events"), schema=rows.schema).append(rows)
    catalog.create_table(("analytics", "users"), schema=rows.schema)
    catalog.create_namespace("sales")
    for case in all_cases:
        started = time.perf_counter()
        try:
            results = s.execute(case.text, filename=path.name, base_dir=home.parent)
        except icesql.IcesqlError as err:
            text = f"{type(err).__name__}\n{err.render()}"
        else:
            last = results[-1]
            text = f"ok: {last.statement}\n" + "\n".join(" | ".join(map(str, r)) for r in last.rows[:3])
        out.append({"name": case.name, "text": text.rstrip("\n") + "\n", "seconds": time.perf_counter() - started})
heavy = sorted(m for m in ("pyspark", "py4j") if m in sys.modules)
print(json.dumps({"cases": out, "heavy": heavy}))
"""


def _run_golden(tmp_path: Path) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for var in ("SPARK_CONF_DIR", "SPARK_HOME", "ICESQL_SPARK_MASTER"):
        env.pop(var, None)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(GOLDEN), str(tmp_path / "home")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_unknown_names_golden(tmp_path: Path, update_golden: bool) -> None:
    found = _run_golden(tmp_path)
    assert found["heavy"] == [], "no case may import pyspark (a JVM)"
    got = found["cases"]
    assert isinstance(got, list)
    actual = "\n".join(f"-- case: {c['name']}\n{c['text']}" for c in got)
    expected_path = GOLDEN.with_suffix(".expected")
    if update_golden:
        expected_path.write_text(actual)
    want = split_expected(expected_path.read_text())
    assert [c["name"] for c in got] == list(want), "cases differ from the expected file: run with --update-golden"
    for c in got:
        assert c["text"].strip("\n") == want[c["name"]], c["name"]
        assert c["seconds"] < SECONDS, f"{c['name']} took {c['seconds']:.2f} s"
    print(f"slowest case: {max(c['seconds'] for c in got):.3f} s")
    errors = [c for c in got if not c["name"].startswith("ok_")]
    for c in errors:
        lines = c["text"].splitlines()
        assert lines[1].startswith("names.sql:") and "^" in lines[3] and lines[4].startswith("hint: "), c["name"]
        if "unknown" in lines[1] or "does not exist" in lines[1]:
            assert "did you mean" in c["text"] or ": " in lines[4], c["name"]
    assert len(errors) >= 20 and len(got) - len(errors) >= 5
    assert len(cases(GOLDEN)) == len(got)


def test_a_script_checks_its_sinks_before_applying_anything(tmp_path: Path) -> None:
    with icesql.Session(home=tmp_path / "home") as s:
        script = (
            "CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local') WITH (VALIDATE = false);\n"
            "CREATE SOURCE events FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id BIGINT');\n"
            "CREATE SINK ok FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b');\n"
            "CREATE SINK bad FROM evnts INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'c');\n"
        )
        with pytest.raises(IcesqlError) as info:
            s.execute(script, filename="p.sql", atomic=True)
        assert info.value.render().splitlines()[0] == "p.sql:4:22: error: unknown source or view evnts"
        assert s.object_names("connection") == [] and s.object_names("sink") == []
        [error] = s.check(script, filename="p.sql")
        assert error.render() == info.value.render()


def test_names_spark_may_know_are_left_to_it(tmp_path: Path) -> None:
    """With a catalog of the user's in Spark's settings, a name icesql does not know may be
    Spark's: it is not an error here (Spark says what it finds when it runs)."""
    conf = {"spark.sql.catalog.other": "org.apache.iceberg.spark.SparkCatalog"}
    with icesql.Session(home=tmp_path / "home", spark_conf=conf) as s:
        s.execute("CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local') WITH (VALIDATE = false)")
        [explained] = s.execute("EXPLAIN SELECT * FROM other.db.t JOIN spark_tbl USING (id)")
        assert explained.statement == "EXPLAIN"
        [created] = s.execute("CREATE SINK k FROM spark_tbl INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b')")
        assert "spark_tbl is not an icesql source or view" in created.warnings[0]


def test_icesql_exec_answers_a_mistyped_connection_at_once(tmp_path: Path) -> None:
    """Issue 51's case as a user meets it: ``icesql exec`` with a mistyped connection answered
    Spark's REQUIRES_SINGLE_PART_NAMESPACE after 42 s; now one error on stderr, exit code 1."""
    home = str(tmp_path / "home")
    sql = "SELECT count(*) FROM nolake.analytics.events"
    probe = (
        "import io, sys, time, contextlib\nfrom icesql.cli import main\n"
        f"main(['--home', {home!r}, 'exec', \"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local') WITH (VALIDATE = false)\"])\n"
        "err = io.StringIO()\nstarted = time.perf_counter()\n"
        f"with contextlib.redirect_stderr(err):\n    rc = main(['--home', {home!r}, 'exec', {sql!r}])\n"
        "took = time.perf_counter() - started\n"
        "heavy = sorted(m for m in ('pyspark', 'py4j') if m in sys.modules)\n"
        "print('RC', rc, 'HEAVY', heavy, 'TOOK', round(took, 3))\nprint(err.getvalue(), end='')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", "SPARK_HOME", "ICESQL_SPARK_MASTER")}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=dict(env, PYTHONPATH=str(ROOT)), timeout=120
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "CREATE CONNECTION", done.stdout + done.stderr
    first, *stderr = lines[1:]
    assert first.startswith("RC 1 HEAVY [] TOOK "), done.stdout + done.stderr
    assert float(first.split()[-1]) < SECONDS
    assert stderr == [
        "<exec>:1:22: error: unknown connection nolake",
        "  SELECT count(*) FROM nolake.analytics.events",
        "                       ^^^^^^",
        "hint: did you mean lake? ICEBERG CATALOG connections: lake",
    ]
