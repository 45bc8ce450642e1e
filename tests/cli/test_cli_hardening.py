"""Issue 18 at the command line: broken homes, files, pipes and bytes are usage errors or quiet
exits (never a raw exception and exit 3); exec shows what it applied; run applies nothing of a
failing script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VALUE = "Zq7vK2mWx9Lp"


def run(*args: str | bytes, home: Path | None = None, input: bytes = b"", cwd: Path | None = None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("ICESQL_HOME", None)
    argv: list[str | bytes] = [sys.executable, "-m", "icesql"]
    if home is not None:
        argv += ["--home", str(home)]
    return subprocess.run([*argv, *args], capture_output=True, env=env, input=input, cwd=cwd, timeout=120)


def text(p: subprocess.CompletedProcess[bytes]) -> tuple[str, str]:
    return p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def test_exec_prints_the_results_applied_before_the_error(tmp_path: Path) -> None:
    p = run("exec", "CREATE SECRET a AS 'x'; SHOW SECRETS; CREATE SECRET a AS 'y'; SHOW SINKS", home=tmp_path / "h")
    out, err = text(p)
    assert p.returncode == 1
    assert out.startswith("CREATE SECRET\n") and " a " in out and "(1 row)" in out
    assert "SHOW SINKS" not in out
    assert err.startswith("<exec>:1:39: error: secret \"a\" already exists")


def test_run_applies_nothing_of_a_failing_script(tmp_path: Path) -> None:
    home = tmp_path / "h"
    script = tmp_path / "s.sql"
    # valid statement by statement; the store refuses the last one (the secret exists)
    run("exec", "CREATE SECRET taken AS 'x'", home=home)
    script.write_text("CREATE SECRET fresh AS 'v';\nCREATE SECRET taken AS 'again';\n")
    p = run("run", str(script), "--once", home=home, cwd=tmp_path)
    assert p.returncode == 1, text(p)
    assert "already exists" in text(p)[1]
    # every error of the script is reported, none of it applied
    script.write_text("CREATE SECRET fresh AS 'v';\nDROP SINK nowhere;\nCREATE SOURCE s FROM FILES 42;\n")
    p = run("run", str(script), "--once", home=home, cwd=tmp_path)
    out, err = text(p)
    assert p.returncode == 1 and "s.sql:2:" in err and "s.sql:3:" in err and "nothing of it was applied" in err
    out, _ = text(run("exec", "SHOW SECRETS", home=home))
    assert " taken " in out and "fresh" not in out


@pytest.mark.parametrize("where", ["file", "under a file", "unwritable", "no such user"])
def test_a_home_that_cannot_be_one_is_a_usage_error(tmp_path: Path, where: str) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("x")
    home = {
        "file": str(a_file),
        "under a file": str(a_file / "home"),
        "unwritable": "/proc/icesql-home",
        "no such user": "~nosuchuser_icesql/h",
    }[where]
    for command in (["exec", "SHOW SINKS"], ["status"], ["check", str(a_file)]):
        p = run("--home", home, *command)
        out, err = text(p)
        assert p.returncode == 2, (command, err)
        lines = err.strip().splitlines()
        assert lines[0].startswith("icesql: error: cannot use ") and lines[1].startswith("hint: ")
        assert "Traceback" not in err and "Error:" not in err


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    script = tmp_path / "many.sql"
    script.write_text("SHOW SINKS;\n" * 20000)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "icesql", "parse", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert err == ""


def test_bytes_that_are_not_utf8_are_usage_errors(tmp_path: Path) -> None:
    home = tmp_path / "h"
    p = run("exec", "-", home=home, input=b"SHOW SECRETS; \xff\xfe;")
    assert p.returncode == 2 and "not UTF-8" in text(p)[1]
    p = run("exec", b"SHOW SINKS \xff", home=home)
    assert p.returncode == 2 and "not UTF-8" in text(p)[1]
    p = run(home=home, input=b"SHOW SECRETS;\xc3\x28")
    assert p.returncode == 2 and "not UTF-8" in text(p)[1]
    bad = tmp_path / "bad.sql"
    bad.write_bytes(b"SHOW SINKS; -- \xff")
    assert run("check", str(bad), home=home).returncode == 2


def test_a_file_name_of_stray_bytes_is_reported_not_crashed_on(tmp_path: Path) -> None:
    name = tmp_path.as_posix().encode() + b"/\xff.sql"
    Path(os.fsdecode(name)).write_text("SHOW SINKS;\nDROP SINK x y;\n")
    p = run("check", name, home=tmp_path / "h")
    assert p.returncode == 1 and b"Traceback" not in p.stderr and b"error: expected" in p.stderr


def test_a_byte_order_mark_is_no_syntax_error(tmp_path: Path) -> None:
    script = tmp_path / "bom.sql"
    script.write_bytes(b"\xef\xbb\xbfCREATE SECRET s AS 'x';\n")
    assert run("check", str(script), home=tmp_path / "h").returncode == 0
    assert run("exec", "-", home=tmp_path / "h", input=script.read_bytes()).returncode == 0
    assert run("exec", "\ufeffSHOW SINKS", home=tmp_path / "h").returncode == 0


@pytest.mark.parametrize("brk", ["\r", "\x0b", "\x0c", "\x85", "\u2028"])
def test_carets_under_the_error_whatever_the_line_breaks(tmp_path: Path, brk: str) -> None:
    sql = f"SHOW SINKS;{brk}CREATE SOURCE s FROM FILES 42"
    for p in (run("exec", sql, home=tmp_path / "h"), run("exec", "-", home=tmp_path / "h", input=sql.encode())):
        _, err = text(p)
        _, line, caret = err.splitlines()[:3]
        assert caret.index("^") == line.index("42"), err


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE SINK k FROM t TO ICEBERG CATALOG c (NAMESPACE = 'a', TABLE = 'b') WITH (MAXIMUM PERIOD = 1e400)",
        "CREATE SINK k FROM t TO ICEBERG CATALOG c (NAMESPACE = 'a', TABLE = 'b') WITH (MINIMUM SIZE = '" + "9" * 320 + "')",
        "CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = '--2', SCHEMA = 'id INT')",
        "CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'd DECIMAL(" + "9" * 5000 + ")')",
        "CREATE SOURCE f FROM FILES '~nosuchuser_icesql/x' (FORMAT = 'parquet')",
    ],
)
def test_odd_values_fail_check_and_exec_alike_with_exit_1(tmp_path: Path, sql: str) -> None:
    home = tmp_path / "h"
    run("exec", "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'local') WITH (VALIDATE = false)", home=home)
    script = tmp_path / "s.sql"
    script.write_text(sql)
    for p in (run("check", str(script), home=home), run("exec", sql, home=home)):
        _, err = text(p)
        assert p.returncode == 1 and "Traceback" not in err and ": error: " in err, err


def test_secret_values_never_reach_stderr(tmp_path: Path) -> None:
    home = tmp_path / "h"
    for sql in (
        f"CREATE SECRET pw '{VALUE}'",
        f"CREATE SECERT pw AS '{VALUE}'",
        f"CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY '{VALUE}')",
        f"CREATE SECRET pw AS '{VALUE}'; CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local') "
        "WITH (VALIDATE = false); CREATE SINK k FROM spark_tbl INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b')",
    ):
        out, err = text(run("exec", sql, home=home))
        assert not any(VALUE[i : i + 5] in out + err for i in range(len(VALUE) - 4)), err
