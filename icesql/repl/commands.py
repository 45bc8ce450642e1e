r"""Backslash commands: a small registry whose help text (``\?``) is generated from it.

A handler receives the shell (anything with the ``ShellContext`` attributes) and the argument
text after the command name. Handlers use only the session's public API, so they behave the
same under the real shell and in unit tests with a stand-in context.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from icesql.repl.format import format_compaction, format_maintenance, format_table
from icesql.repl.redact import redact_secrets


class ShellContext(Protocol):
    session: Any
    timing: bool
    last_statement: str | None

    def echo(self, text: str) -> None: ...
    def echo_error(self, text: str) -> None: ...
    def execute_text(
        self, sql: str, *, filename: str | None = None, base_dir: Path | None = None
    ) -> bool: ...
    def set_next_input(self, text: str) -> None: ...
    def request_exit(self) -> None: ...


Handler = Callable[[ShellContext, str], None]


@dataclass(frozen=True)
class BackslashCommand:
    name: str  # with the backslash: "\d"
    args: str  # usage of the argument, "" when it takes none
    description: str
    handler: Handler

    @property
    def usage(self) -> str:
        return f"{self.name} {self.args}".strip()


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, BackslashCommand] = {}

    def register(self, name: str, args: str = "", *, description: str) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            self._commands[name] = BackslashCommand(name, args, description, handler)
            return handler

        return decorate

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._commands.values())

    def names(self) -> list[str]:
        return list(self._commands)

    def lookup(self, name: str) -> BackslashCommand | None:
        return self._commands.get(name)

    def help_text(self) -> str:
        width = max(len(c.usage) for c in self)
        lines = ["Backslash commands:"]
        lines += [f"  {c.usage.ljust(width)}  {c.description}" for c in self]
        lines.append(
            "SQL statements end with ';' and may span lines; Ctrl-C cancels the input, Ctrl-D exits."
        )
        return "\n".join(lines)

    def dispatch(self, ctx: ShellContext, line: str) -> None:
        """Run the command ``line`` (``\\d orders``), or say that it is unknown."""
        name, _, arg = line.strip().partition(" ")
        command = self.lookup(name)
        if command is None:
            ctx.echo_error(f"error: unknown command {name!r}\nhint: \\? lists the commands")
            return
        try:
            command.handler(ctx, arg.strip())
        except Exception as exc:  # a command's odd argument must not end the shell
            ctx.echo_error(f"error: {name}: {type(exc).__name__}: {exc}")


COMMANDS = CommandRegistry()


@COMMANDS.register("\\?", description="show this help")
def _help(ctx: ShellContext, arg: str) -> None:
    ctx.echo(COMMANDS.help_text())


@COMMANDS.register("\\q", description="quit (stops running sinks with a final commit, like Ctrl-D)")
def _quit(ctx: ShellContext, arg: str) -> None:
    ctx.request_exit()


def _quote_ident(name: str) -> str:
    if name.isidentifier() and name == name.lower():
        return name
    return '"' + name.replace('"', '""') + '"'


@COMMANDS.register(
    "\\d",
    "[pattern]",
    description="list objects (pattern: name or glob such as ord*), or describe the one named",
)
def _describe(ctx: ShellContext, arg: str) -> None:
    objects = ctx.session.store.list_objects()
    if arg:
        exact = [o for o in objects if o.name == arg or o.name == arg.lower()]
        if len(exact) == 1 and not any(ch in arg for ch in "*?["):
            _describe_one(ctx, exact[0])
            return
        objects = [
            o for o in objects if fnmatch.fnmatchcase(o.name, arg) or fnmatch.fnmatchcase(o.name, arg.lower())
        ]
        if not objects:
            ctx.echo_error(f"error: no object matches {arg!r}")
            return
    rows = sorted((o.kind, o.name) for o in objects)
    ctx.echo(format_table(("kind", "name"), rows))


def _describe_one(ctx: ShellContext, obj: Any) -> None:
    from icesql.errors import IcesqlError

    ctx.echo(f"{obj.kind} {obj.name}")
    if obj.kind != "secret":
        try:
            results = ctx.session.execute(f"DESCRIBE {_quote_ident(obj.name)}")
        except IcesqlError:
            results = []
        for result in results:
            if result.columns:
                ctx.echo(format_table(result.columns, result.rows))
    if obj.sql:
        ctx.echo(redact_secrets(obj.sql))


@COMMANDS.register("\\i", "FILE", description="execute the statements in FILE")
def _include(ctx: ShellContext, arg: str) -> None:
    if not arg:
        ctx.echo_error("error: \\i needs a file name\nhint: \\i pipeline.sql")
        return
    path = Path(os.path.expanduser(arg))
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name, bytes that are not UTF-8
        ctx.echo_error(f"error: cannot read {arg}: {getattr(exc, 'strerror', None) or exc}")
        return
    ctx.execute_text(text, filename=arg, base_dir=path.resolve().parent)


@COMMANDS.register(
    "\\compact", "[sink ...]", description="rewrite sink tables without delete files (icesql compact)"
)
def _compact(ctx: ShellContext, arg: str) -> None:
    from icesql.errors import IcesqlError

    names = arg.split() or ctx.session.object_names("sink")
    if not names:
        ctx.echo("no sink to compact")
        return
    for name in names:
        try:
            results = ctx.session.compact([name])
        except IcesqlError as exc:
            ctx.echo_error(exc.render())
            return
        if not results:  # a routed sink that has written no table yet
            ctx.echo(f"{name}: no table written yet, nothing to compact")
        for result in results:  # one per table (a routed sink's: each it has written)
            ctx.echo(f"{name}: {format_compaction(result)}")


@COMMANDS.register(
    "\\maintain",
    "[sink ...]",
    description="run the maintenance due on sink tables: compact, expire, orphans (icesql maintain)",
)
def _maintain(ctx: ShellContext, arg: str) -> None:
    from icesql.errors import IcesqlError

    names = arg.split() or ctx.session.object_names("sink")
    if not names:
        ctx.echo("no sink to maintain")
        return
    for name in names:
        try:
            runs = ctx.session.maintain([name])
        except IcesqlError as exc:
            ctx.echo_error(exc.render())
            return
        if not runs:  # a routed sink that has written no table yet
            ctx.echo(f"{name}: no table written yet, nothing to maintain")
        for run in runs:  # one per table (a routed sink's: each it has written)
            for line in format_maintenance(run):
                ctx.echo(line)


@COMMANDS.register("\\timing", "[on|off]", description="toggle printing how long each statement took")
def _timing(ctx: ShellContext, arg: str) -> None:
    if arg.lower() in ("on", "off"):
        ctx.timing = arg.lower() == "on"
    elif arg:
        ctx.echo_error(f"error: \\timing takes on or off, not {arg!r}")
        return
    else:
        ctx.timing = not ctx.timing
    ctx.echo(f"Timing is {'on' if ctx.timing else 'off'}.")


@COMMANDS.register(
    "\\e", description="edit the last statement in $VISUAL / $EDITOR, then review it at the prompt"
)
def _edit(ctx: ShellContext, arg: str) -> None:
    from icesql import settings

    editor = settings.EDITOR.get() or settings.EDITOR_FALLBACK.get() or "vi"
    fd, name = tempfile.mkstemp(prefix="icesql-", suffix=".sql")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(ctx.last_statement or "")
        try:
            rc = subprocess.call([*shlex.split(editor), name])
        except OSError as exc:
            ctx.echo_error(f"error: cannot start editor {editor!r}: {exc.strerror or exc}\nhint: set EDITOR")
            return
        if rc != 0:
            ctx.echo_error(f"error: editor {editor!r} exited with status {rc}; nothing changed")
            return
        text = Path(name).read_text(encoding="utf-8").rstrip()
    finally:
        os.unlink(name)
    ctx.set_next_input(text)
