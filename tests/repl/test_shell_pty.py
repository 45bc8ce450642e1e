"""The real shell, driven through a pseudo-terminal as a user would drive it."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli_spark import SPARK_CONF, wait_staged
from tests.repl.terminal import Terminal

LAKE = (
    "CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse') "
    "WITH (VALIDATE = false);"
)


def spark_terminal(home: Path, **env: str) -> Terminal:
    """The shell on a local Spark of two cores (the CLI tests' settings), workers on this Python."""
    return Terminal(home, *SPARK_CONF, env={"PYSPARK_PYTHON": sys.executable, **env})


@pytest.fixture
def term(icesql_home: Path) -> Iterator[Terminal]:
    t = Terminal(icesql_home)
    t.prompt()
    yield t
    t.close()


def test_multi_line_entry_until_semicolon(term: Terminal) -> None:
    term.line("SHOW")
    term.expect("->")  # continuation prompt: no ';' yet
    term.line("  SECRETS -- a ';' in a comment does not end it")
    term.expect("->")
    term.line("  ;")
    term.expect("(0 rows)")
    term.prompt()
    term.line("CREATE SECRET s AS 'a;")  # inside a string
    term.expect("->")
    term.line("b';")
    term.reply("CREATE SECRET")
    term.prompt()


def test_completion_after_create(term: Terminal) -> None:
    term.send("CREATE ")
    term.send("\t")
    screen = term.settle(1.5)
    for keyword in ("CONNECTION", "SECRET", "SINK", "SOURCE", "VIEW"):
        assert keyword in screen
    term.send("\x03")  # Ctrl-C cancels the input
    term.prompt()


def test_completion_of_connections_after_iceberg_catalog(term: Terminal) -> None:
    term.line(LAKE)
    term.reply("CREATE CONNECTION")
    term.prompt()
    term.line("CREATE SECRET pw AS 'x';")
    term.reply("CREATE SECRET")
    term.prompt()
    term.send("CREATE SINK s FROM src TO ICEBERG CATALOG ")
    term.send("\t")
    screen = term.settle(1.5)
    assert re.search(r"lake\s+connection", screen), screen
    assert not re.search(r"pw\s+secret", screen)  # a secret is not a catalog
    term.send("\x03")
    term.prompt()


def test_completion_of_transforms_inside_partition_by(term: Terminal) -> None:
    term.send("CREATE SINK s FROM src TO ICEBERG CATALOG lake NAMESPACE n TABLE t PARTITION BY (")
    term.send("\t")
    screen = term.settle(1.5)
    for transform in ("bucket", "truncate", "day", "hour", "identity"):
        assert re.search(rf"{transform}\s+transform", screen), screen
    term.send("\x03")
    term.prompt()


def test_error_shows_a_caret_under_the_problem(term: Terminal) -> None:
    term.line("SHOW SECRETS;")
    term.prompt()
    term.line("CREATE SOURCE s FROM FILES 42;")
    out = term.expect(r"<input>:\d+:\d+: error: .*\n.*\n *\^+", regex=True)
    headline, source, carets = out.splitlines()[-3:]
    col = int(re.search(r":1:(\d+): error", headline).group(1))  # type: ignore[union-attr]
    assert source.strip() == "CREATE SOURCE s FROM FILES 42;"
    # the caret sits under column ``col`` of the source line (both indented by two spaces)
    assert carets.index("^") == col + 1 == source.index("42")
    term.prompt()


def test_history_file_never_holds_a_secret(term: Terminal, icesql_home: Path) -> None:
    term.line("CREATE SECRET pw AS 'hunter2-do-not-store';")
    term.reply("CREATE SECRET")
    term.prompt()
    term.line("SHOW SECRETS;")
    term.expect("(1 row)")
    term.prompt()
    assert term.exit() == 0
    history = (icesql_home / "history").read_text()
    assert "hunter2" not in history
    assert "CREATE SECRET pw AS '<redacted>';" in history
    assert "SHOW SECRETS;" in history


def test_drop_asks_for_confirmation(term: Terminal) -> None:
    term.line("CREATE SECRET pw AS 'x';")
    term.prompt()
    term.line("DROP SECRET pw;")
    term.expect("DROP SECRET pw")
    term.expect("Continue? [y/N]")
    term.line("n")
    term.expect("cancelled")
    term.prompt()
    term.line("SHOW SECRETS;")
    term.expect("(1 row)")
    term.prompt()
    term.line("DROP SECRET pw;")
    term.expect("Continue? [y/N]")
    term.line("y")
    term.reply("DROP SECRET")
    term.prompt()
    term.line("SHOW SECRETS;")
    term.expect("(0 rows)")


def test_ctrl_c_cancels_input_and_ctrl_d_exits(term: Terminal) -> None:
    term.send("SHOW SIN")
    term.settle(0.3)
    term.send("\x03")
    term.prompt()
    term.line("SHOW SINKS;")
    term.expect("(0 rows)")  # not "SHOW SINSHOW SINKS"
    term.prompt()
    assert term.exit() == 0


def test_backslash_commands(term: Terminal, icesql_home: Path) -> None:
    term.line("\\?")
    for name in ("\\?", "\\q", "\\d [pattern]", "\\i FILE", "\\timing", "\\e"):
        term.expect(name)
    term.prompt()
    script = icesql_home / "setup.sql"
    script.write_text("CREATE SECRET token AS 'abc';\n" + LAKE + "\n")
    term.line(f"\\i {script}")
    term.reply("CREATE CONNECTION")
    term.prompt()
    term.line("\\d")
    term.expect("connection | lake")
    term.expect("secret     | token")
    term.prompt()
    term.line("\\d lake")
    term.expect("TYPE = 'local'")
    term.prompt()
    term.line("\\d tok*")
    term.expect("(1 row)")
    term.prompt()
    term.line("\\timing")
    term.expect("Timing is on.")
    term.line("SHOW SECRETS;")
    term.expect("Time: ")
    term.prompt()
    term.line("\\nope")
    term.expect("unknown command")
    term.prompt()
    term.line("\\q")
    term.child.expect(__import__("pexpect").EOF, timeout=30)


def test_edit_last_statement_in_editor(icesql_home: Path) -> None:
    editor = icesql_home / "editor.py"
    # a scripted "editor": turns the statement it is given into another one
    editor.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text().replace('SECRETS', 'CONNECTIONS'))\n"
    )
    term = Terminal(icesql_home, env={"EDITOR": f"{sys.executable} {editor}", "VISUAL": ""})
    try:
        term.prompt()
        term.line("SHOW SECRETS;")
        term.prompt()
        term.line("\\e")
        term.expect("SHOW CONNECTIONS;")  # put back at the prompt for review
        term.send("\r")
        term.expect(" name | type")
        term.prompt()
    finally:
        term.close()


@pytest.mark.spark
def test_running_sink_shows_in_the_toolbar_and_ctrl_d_commits(icesql_home: Path) -> None:
    term = spark_terminal(icesql_home)
    try:
        term.prompt()
        term.line(LAKE)
        term.reply("CREATE CONNECTION")
        term.line("CREATE SOURCE gen FROM GENERATOR (ROWS PER SECOND = 50, SCHEMA = 'id BIGINT');")
        term.reply("CREATE SOURCE")
        term.line(
            "CREATE SINK gen_sink FROM gen INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't') "
            "WITH (MAXIMUM PERIOD = '1h', MINIMUM SIZE = '1GiB');"
        )
        term.expect("starting sink gen_sink", timeout=60)
        term.expect("gen_sink running rows=0", timeout=180)  # the bottom toolbar
        term.line("SHOW SINK STATUS;")
        term.expect("gen_sink")
        term.expect("(1 row)")
        wait_staged(icesql_home)
        assert term.exit(timeout=180) == 0
        assert "stopping gen_sink (final commit)" in term.text
    finally:
        term.close()
    from icesql.session import Session

    with Session(icesql_home) as s:
        (status,) = s.status()
    assert status.rows_committed > 0  # committed on the way out: the period is an hour


@pytest.mark.spark
def test_select_shows_a_table_and_ctrl_c_cancels_a_long_query(icesql_home: Path) -> None:
    term = spark_terminal(icesql_home)
    try:
        term.prompt()
        term.line("CREATE SOURCE gen FROM GENERATOR (ROWS PER SECOND = 5, SCHEMA = 'id BIGINT, name STRING');")
        term.reply("CREATE SOURCE")
        term.prompt()
        term.line("SELECT id, name FROM gen ORDER BY id LIMIT 3;")
        term.expect("(3 rows)", timeout=180)
        screen = term.text.replace("\r", "")
        assert re.search(r" id \| name\s*\n-+\+-+\n\s+0 \| name-0\n\s+1 \| name-1\n\s+2 \| name-2", screen), screen
        term.prompt()
        # a second per row for a thousand rows on two cores: Ctrl-C stops it, the shell stays
        term.line("SELECT id, reflect('java.lang.Thread', 'sleep', CAST(1000 AS BIGINT)) FROM gen LIMIT 1000;")
        term.settle(8)
        assert "(1 row)" not in term.text
        term.send("\x03")
        term.expect("cancelled", timeout=60)
        term.prompt()
        term.line("SELECT 'still here' AS s;")
        term.expect("still here", timeout=60)
        term.expect("(1 row)", timeout=60)
        assert term.exit(timeout=120) == 0
    finally:
        term.close()


@pytest.mark.spark
def test_a_long_select_result_is_paged(icesql_home: Path) -> None:
    term = spark_terminal(icesql_home, PAGER="less -SRFX")
    try:
        term.prompt()
        term.line("CREATE SOURCE gen FROM GENERATOR (ROWS PER SECOND = 5, SCHEMA = 'id BIGINT');")
        term.reply("CREATE SOURCE")
        term.prompt()
        term.line("SELECT id FROM gen ORDER BY id;")  # 100 rows on a 40-line terminal
        term.expect(" 36", timeout=180)
        term.settle(1)
        assert "(100 rows)" not in term.text  # the pager holds the rest
        term.send("G")  # to the end
        term.expect("(100 rows)", timeout=30)
        term.send("q")
        term.prompt()
        term.line("SELECT 1 AS one;")  # a short result prints without the pager
        term.expect("(1 row)", timeout=60)
        assert term.exit(timeout=120) == 0
    finally:
        term.close()
