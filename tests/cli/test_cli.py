"""The ``icesql`` command through subprocesses: every command, every exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("shell", "run", "exec", "check", "parse", "serve", "status")

LAKE = (
    "CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse') "
    "WITH (VALIDATE = false);"
)

# A script with a syntax error in its middle (line 6, column 3) and a validation error after it.
BROKEN = """\
-- setup
CREATE SECRET pw AS 'hunter2';

CREATE CONNECTION aws TO AWS (
    REGION = 'eu-west-1',
  ENDPOINT 'http://127.0.0.1:8333'
);
CREATE SOURCE events FROM FILES 'data/' (FORMAT = 'json', SCHEMA = 'id BIGINT', BOGUS = 1);
"""


def icesql(
    *args: str, home: Path | None = None, cwd: Path | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("ICESQL_HOME", None)
    if home is not None:
        env["ICESQL_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "icesql", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        input=input if input is not None else "",
        timeout=120,
    )


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_for_every_command_has_an_example(command: str | None, icesql_home: Path) -> None:
    args = ["--help"] if command is None else [command, "--help"]
    p = icesql(*args, home=icesql_home)
    assert p.returncode == 0, p.stderr
    assert "example" in p.stdout and "icesql" in p.stdout
    assert "--home" in p.stdout and "--spark-master" in p.stdout and "--conf" in p.stdout
    assert not any(icesql_home.iterdir())  # --help touches nothing


@pytest.mark.parametrize(
    "args",
    [
        ["frobnicate"],
        ["run"],
        ["check"],
        ["parse"],
        ["exec"],
        ["--conf", "no-equals-sign", "status"],
        ["run", "missing.sql"],
        ["check", "missing.sql"],
        ["parse", "missing.sql", "--json"],
        ["status", "--bogus"],
    ],
)
def test_usage_errors_exit_2(args: list[str], icesql_home: Path) -> None:
    p = icesql(*args, home=icesql_home, cwd=icesql_home)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "icesql" in p.stderr and "error" in p.stderr
    assert "Traceback" not in p.stderr


def test_exec_prints_results(icesql_home: Path) -> None:
    p = icesql(
        "exec",
        f"CREATE SECRET pw AS 'hunter2'; {LAKE} SHOW SECRETS; SHOW CONNECTIONS",
        home=icesql_home,
        cwd=icesql_home,
    )
    assert p.returncode == 0, p.stderr
    assert "CREATE SECRET" in p.stdout and "CREATE CONNECTION" in p.stdout
    assert " pw " in p.stdout and "lake" in p.stdout and "(1 row)" in p.stdout
    assert "hunter2" not in p.stdout + p.stderr


def test_exec_reads_stdin_and_home_option_beats_environment(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    p = icesql("--home", str(a), "exec", "-", home=b, input="CREATE SECRET s AS 'x';")
    assert p.returncode == 0, p.stderr
    assert icesql("exec", "SHOW SECRETS", "--home", str(a), home=b).stdout.count("(1 row)") == 1
    assert "(0 rows)" in icesql("exec", "SHOW SECRETS", home=b).stdout


def test_sql_errors_exit_1_with_location_caret_and_no_traceback(icesql_home: Path) -> None:
    p = icesql("exec", "SHOW SECRETS;\nCREATE SOURCE s FROM FILES 42", home=icesql_home)
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    assert lines[0].startswith("<exec>:2:28: error: ")
    assert lines[1] == "  CREATE SOURCE s FROM FILES 42"
    assert lines[2] == "                             ^^"
    assert "Traceback" not in p.stderr
    p = icesql("exec", "DROP SINK nothing_here", home=icesql_home)  # a catalog error
    assert p.returncode == 1 and "nothing_here" in p.stderr
    p = icesql(
        "exec",
        "CREATE SOURCE s FROM FILES 'x/' (FORMAT = 'json', SCHEMA = 'id INT', BOGUS = 1)",
        home=icesql_home,
    )
    assert p.returncode == 1 and ": error: " in p.stderr and "BOGUS" in p.stderr


def test_verbose_adds_the_traceback(icesql_home: Path) -> None:
    p = icesql("-v", "exec", "CREATE SECRET pw 42", home=icesql_home)
    assert p.returncode == 1 and "Traceback" in p.stderr


def test_runtime_failure_exits_3(icesql_home: Path) -> None:
    sql = (
        "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'http://127.0.0.1:9/') "
        "WITH (VALIDATE = false); VALIDATE CONNECTION c"
    )
    p = icesql("exec", sql, home=icesql_home)
    assert p.returncode == 3, p.stderr
    assert "<exec>:1:" in p.stderr and "Traceback" not in p.stderr


def test_check_reports_every_error_with_file_positions(tmp_path: Path, icesql_home: Path) -> None:
    script = tmp_path / "broken.sql"
    script.write_text(BROKEN)
    good = tmp_path / "good.sql"
    good.write_text("CREATE SECRET pw AS 'x';\n" + LAKE + "\nSHOW SINKS;\n")
    p = icesql("check", str(good), str(script), home=icesql_home, cwd=tmp_path)
    assert p.returncode == 1
    assert f"{script}:6:12: error: expected " in p.stderr
    assert "  ENDPOINT 'http://127.0.0.1:8333'" in p.stderr
    assert f"{script}:8:" in p.stderr and "BOGUS" in p.stderr
    assert "2 errors in 2 files" in p.stderr
    assert "hunter2" not in p.stderr
    # nothing was stored
    assert "(0 rows)" in icesql("exec", "SHOW SECRETS", home=icesql_home).stdout
    ok = icesql("check", str(good), home=icesql_home, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "ok: 3 statements in 1 file" in ok.stdout


def test_parse_json_and_canonical_sql(tmp_path: Path) -> None:
    script = tmp_path / "p.sql"
    script.write_text("create secret PW as 'x';\nSHOW sinks;\n")
    p = icesql("parse", str(script), "--json", home=tmp_path / "unused")
    assert p.returncode == 0, p.stderr
    tree = json.loads(p.stdout)
    assert [s["type"] for s in tree] == ["CreateSecret", "Show"]
    assert tree[0]["name"]["name"] == "pw"
    p = icesql("parse", str(script), home=tmp_path / "unused")
    assert p.returncode == 0 and p.stdout.splitlines()[1] == "SHOW SINKS;"
    assert not (tmp_path / "unused").exists()  # parse needs no home


def test_parse_error_in_the_middle_of_a_script_is_located_in_the_file(tmp_path: Path) -> None:
    script = tmp_path / "broken.sql"
    script.write_text(BROKEN)
    p = icesql("parse", str(script), "--json", home=tmp_path / "unused")
    assert p.returncode == 1
    assert p.stderr.startswith(f"{script}:6:12: error: ")
    assert p.stdout == ""


def test_run_reports_a_syntax_error_with_file_positions_and_applies_nothing(
    tmp_path: Path, icesql_home: Path
) -> None:
    script = tmp_path / "broken.sql"
    script.write_text(BROKEN)
    p = icesql("run", str(script), "--once", home=icesql_home, cwd=tmp_path)
    assert p.returncode == 1
    assert p.stderr.startswith(f"{script}:6:12: error: ")
    assert "Traceback" not in p.stderr


def test_run_without_sinks_executes_and_exits_0(tmp_path: Path, icesql_home: Path) -> None:
    script = tmp_path / "setup.sql"
    script.write_text("CREATE SECRET pw AS 'x';\n" + LAKE + "\n")
    p = icesql("run", str(script), "--once", home=icesql_home, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "CREATE CONNECTION" in p.stdout and "nothing to run" in p.stderr


def test_status_and_serve_on_an_empty_home(icesql_home: Path) -> None:
    p = icesql("status", home=icesql_home)
    assert p.returncode == 0 and "(0 rows)" in p.stdout and "last error" in p.stdout
    p = icesql("serve", "--once", home=icesql_home)
    assert p.returncode == 0 and "nothing to serve" in p.stderr


def test_status_lists_created_sinks(tmp_path: Path, icesql_home: Path) -> None:
    sql = (
        LAKE
        + "CREATE SOURCE gen FROM GENERATOR (ROWS PER SECOND = 10, SCHEMA = 'id BIGINT');"
        + "CREATE SINK s FROM gen INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't');"
    )
    p = icesql("exec", sql, home=icesql_home, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = icesql("status", home=icesql_home)
    assert p.returncode == 0 and " s " in p.stdout and "never" in p.stdout


def test_shell_reads_a_script_from_stdin_when_not_a_terminal(icesql_home: Path) -> None:
    p = icesql(home=icesql_home, input="CREATE SECRET pw AS 'x';\nSHOW SECRETS;\n")
    assert p.returncode == 0, p.stderr
    assert "CREATE SECRET" in p.stdout and "(1 row)" in p.stdout
    p = icesql(home=icesql_home, input="SHOW SECRETS;\nCREATE SECRET pw 'no-as';\n")
    assert p.returncode == 1 and p.stderr.startswith("<stdin>:2:18: error:")


LIGHT_COMMANDS = {
    "help": (["--help"], 0),
    "parse": (["parse", "{script}", "--json"], 0),
    "check": (["check", "{script}"], 0),
    "exec": (["exec", "SHOW SECRETS"], 0),
    "status": (["status"], 0),
}


@pytest.mark.parametrize("name", sorted(LIGHT_COMMANDS))
def test_no_engine_is_imported_for_help_parse_check(name: str, tmp_path: Path, icesql_home: Path) -> None:
    script = tmp_path / "ok.sql"
    script.write_text("CREATE SECRET pw AS 'x';\nSHOW SECRETS;\n")
    args, code = LIGHT_COMMANDS[name]
    argv = [a.format(script=script) for a in args] + ["--home", str(icesql_home)] * (name != "help")
    probe = (
        "import sys\n"
        "from icesql.cli import main\n"
        "try:\n"
        f"    rc = main({argv!r})\n"
        "except SystemExit as e:\n"
        "    rc = e.code\n"
        "heavy = sorted(m for m in ('pyspark', 'py4j', 'pyiceberg', 'pyarrow', 'icesql.engine', 'prompt_toolkit') if m in sys.modules)\n"
        "print('RC', rc, 'HEAVY', heavy)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert f"RC {code} HEAVY []" in p.stdout, p.stdout + p.stderr


def test_entry_flushes_and_exits_with_mains_code() -> None:
    """``icesql`` ends with ``os._exit`` (no interpreter shutdown, so no native destructors racing
    daemon threads): what ``main`` printed, unflushed, still arrives, log records too, and
    ``main``'s code is the status."""
    code = (
        "import atexit, logging, sys, threading, time\n"
        "import icesql.cli as cli\n"
        "atexit.register(lambda: print('atexit-ran', file=sys.stderr, flush=True))\n"
        "def fake_main():\n"
        "    sys.stdout.write('out-without-newline')\n"
        "    sys.stderr.write('err-without-newline')\n"
        "    logging.basicConfig(stream=sys.stderr)\n"
        "    logging.getLogger('x').warning('logged')\n"
        "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # still running\n"
        "    return 3\n"
        "cli.main = fake_main\n"
        "cli.entry()\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert p.returncode == 3
    assert p.stdout == "out-without-newline"
    assert "err-without-newline" in p.stderr and "logged" in p.stderr
    assert "atexit-ran" not in p.stderr  # ended by os._exit: no interpreter shutdown ran
