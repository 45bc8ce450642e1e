"""Backslash commands against a real Session on a temporary home, through a stand-in shell."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from icesql.repl.commands import COMMANDS
from icesql.repl.format import format_table, status_line
from icesql.session import Session


class FakeShell:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.timing = False
        self.last_statement: str | None = None
        self.out: list[str] = []
        self.errors: list[str] = []
        self.next_input = ""
        self.exiting = False
        self.executed: list[tuple[str, str | None]] = []

    def echo(self, text: str) -> None:
        self.out.append(text)

    def echo_error(self, text: str) -> None:
        self.errors.append(text)

    def execute_text(self, sql: str, *, filename: str | None = None, base_dir: Path | None = None) -> bool:
        self.executed.append((sql, filename))
        self.session.execute(sql, filename=filename, base_dir=base_dir)
        return True

    def set_next_input(self, text: str) -> None:
        self.next_input = text

    def request_exit(self) -> None:
        self.exiting = True


@pytest.fixture
def shell(icesql_home: Path) -> FakeShell:
    session = Session(icesql_home, validate=False)
    session.execute(
        "CREATE SECRET pw AS 'hunter2';"
        "CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'rest', URI = 'http://x', USER = 'u', PASSWORD = SECRET pw);"
    )
    return FakeShell(session)


def test_help_is_generated_from_the_registry(shell: FakeShell) -> None:
    COMMANDS.dispatch(shell, "\\?")
    for command in COMMANDS:
        assert command.usage in shell.out[0] and command.description in shell.out[0]


def test_quit(shell: FakeShell) -> None:
    COMMANDS.dispatch(shell, "\\q")
    assert shell.exiting


def test_describe_lists_and_describes_without_secret_values(shell: FakeShell) -> None:
    COMMANDS.dispatch(shell, "\\d")
    listing = shell.out[-1]
    assert "connection | lake" in listing and "secret     | pw" in listing
    COMMANDS.dispatch(shell, "\\d pw")
    COMMANDS.dispatch(shell, "\\d lake")
    COMMANDS.dispatch(shell, "\\d l*")
    text = "\n".join(shell.out)
    assert "hunter2" not in text
    assert "SECRET pw" in text and "(1 row)" in shell.out[-1]
    COMMANDS.dispatch(shell, "\\d nothing*")
    assert "no object matches" in shell.errors[-1]


def test_include_runs_a_file_with_its_name(shell: FakeShell, tmp_path: Path) -> None:
    f = tmp_path / "more.sql"
    f.write_text("CREATE SECRET other AS 'x';\n")
    COMMANDS.dispatch(shell, f"\\i {f}")
    assert shell.executed == [("CREATE SECRET other AS 'x';\n", str(f))]
    COMMANDS.dispatch(shell, f"\\i {tmp_path / 'missing.sql'}")
    assert "cannot read" in shell.errors[-1]


def test_timing_toggles(shell: FakeShell) -> None:
    COMMANDS.dispatch(shell, "\\timing")
    assert shell.timing and shell.out[-1] == "Timing is on."
    COMMANDS.dispatch(shell, "\\timing off")
    assert not shell.timing


def test_compact_without_sinks_and_with_an_unknown_one(shell: FakeShell) -> None:
    """The success path (a real upserted table) is tested with the CLI in
    tests/engine/test_compact.py; both go through ``Session.compact``."""
    COMMANDS.dispatch(shell, "\\compact")
    assert shell.out[-1] == "no sink to compact"
    COMMANDS.dispatch(shell, "\\compact nope")
    assert "sink 'nope' does not exist" in shell.errors[-1]


def test_edit_puts_the_edited_statement_back(
    shell: FakeShell, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    editor = tmp_path / "ed.sh"
    editor.write_text('#!/bin/sh\nsed -i "s/SINKS/SOURCES/" "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))
    shell.last_statement = "SHOW SINKS;"
    COMMANDS.dispatch(shell, "\\e")
    assert shell.next_input == "SHOW SOURCES;"


def test_unknown_command(shell: FakeShell) -> None:
    COMMANDS.dispatch(shell, "\\zz")
    assert "unknown command" in shell.errors[-1]


def test_format_table_and_status_line() -> None:
    assert format_table(("a", "n"), [("x", 1), ("yy", 10)]).splitlines() == [
        " a  | n",
        "----+----",
        " x  |  1",
        " yy | 10",
        "(2 rows)",
    ]

    class S:
        name, state, rows_committed, bytes_committed = "orders", "running", 12, 2048
        last_commit_at, last_error = 100.0, "boom\ntrace"

    assert status_line(S(), now=103.0) == "orders running rows=12 bytes=2.0 KiB commit 3s ago error: boom"


def test_a_statements_output_is_written_before_the_next_prompt(icesql_home: Path) -> None:
    """The shell's loop: only the prompt runs under ``patch_stdout``, so what a statement prints
    goes straight to the terminal, never into the proxy's queue, whose writer thread could find
    no prompt running and write over the next one (a SELECT's table over a prompt that was then
    not drawn again). Output of other threads while the prompt is shown still goes above it."""
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput
    from prompt_toolkit.patch_stdout import StdoutProxy

    from icesql.repl.shell import Shell

    seen: list[tuple[str, bool]] = []

    class Prompt:
        def __init__(self) -> None:
            self.lines = ["SHOW SECRETS;"]

        def prompt(self, **kw: object) -> str:
            seen.append(("prompt", isinstance(sys.stdout, StdoutProxy)))
            if not self.lines:
                raise EOFError
            return self.lines.pop()

    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        shell = Shell(Session(icesql_home, validate=False), history_path=icesql_home / "h")
        shell.prompt_session = Prompt()  # type: ignore[assignment]
        shell.handle = lambda text: seen.append(("statement", isinstance(sys.stdout, StdoutProxy)))  # type: ignore[method-assign]
        assert shell.run() == 0
    assert seen == [("prompt", True), ("statement", False), ("prompt", True)]
