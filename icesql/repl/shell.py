"""The interactive shell: a prompt-toolkit loop over a ``Session``.

Enter submits when ``is_complete`` says so (a ``;`` outside quotes and comments, or a
``\\command``), otherwise it starts a continuation line. Sinks created here run in the
background; the bottom toolbar shows them, and leaving the shell (Ctrl-D, ``\\q``) stops them
with a final commit.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit import prompt as ask
from prompt_toolkit.application.current import get_app
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.patch_stdout import patch_stdout

from icesql.errors import IcesqlError
from icesql.repl.commands import COMMANDS, CommandRegistry
from icesql.repl.format import format_result, status_line
from icesql.repl.redact import redact_secrets
from icesql.repl.scan import destructive_statements, is_complete
from icesql.repl.widgets import STYLE, IcesqlCompleter, IcesqlLexer

PROMPT = "icesql> "
CONTINUATION = "    -> "
HISTORY_FILE = "history"


class RedactingFileHistory(FileHistory):
    """A history file that never receives a secret value, readable by its owner only.

    Every entry goes through the dialect's secret redaction (mistyped statements included);
    the file is created ``0600`` (and tightened if an older one was not), and a home that is
    not writable costs the history, never the shell.
    """

    def __init__(self, filename: str) -> None:
        _private_file(Path(filename))
        super().__init__(filename)

    def store_string(self, string: str) -> None:
        try:
            super().store_string(redact_secrets(string))
        except OSError:
            pass  # a read-only home: the shell goes on without writing history


def _private_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.close(fd)
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o600)
    except OSError:
        pass


def _warm_up_parser() -> None:
    # Loading the grammar takes a moment; do it while the user reads the prompt, not on Tab.
    try:
        from icesql.syntax.parser import expected_tokens

        expected_tokens("")
    except Exception:
        pass


class TableNames:
    """The ``connection.namespace.table`` names of each connection for completion: served from a
    cache, refreshed in a background thread when older than ``ttl`` seconds, so that the prompt
    never waits on a catalog (a catalog that is down keeps the names it had)."""

    def __init__(self, fetch: Any, ttl: float = 30.0) -> None:
        self._fetch = fetch
        self._ttl = ttl
        self._cache: dict[str, tuple[float, list[str]]] = {}
        self._loading: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, connection: str) -> list[str]:
        with self._lock:
            when, names = self._cache.get(connection, (float("-inf"), []))
            if time.monotonic() - when >= self._ttl and connection not in self._loading:
                self._loading.add(connection)
                threading.Thread(target=self._load, args=(connection,), name="icesql-tables", daemon=True).start()
            return list(names)

    def _load(self, connection: str) -> None:
        try:
            names: list[str] | None = [".".join((connection, *t)) for t in self._fetch(connection)]
        except Exception:
            names = None
        with self._lock:
            self._loading.discard(connection)
            kept = self._cache.get(connection, (0.0, []))[1]
            self._cache[connection] = (time.monotonic(), names if names is not None else kept)

    def wait(self, timeout: float = 10.0) -> None:
        """Until no refresh is under way (tests)."""
        end = time.monotonic() + timeout
        while self._loading and time.monotonic() < end:
            time.sleep(0.05)


class Shell:
    def __init__(
        self,
        session: Any,
        *,
        registry: CommandRegistry = COMMANDS,
        verbose: bool = False,
        history_path: Path | None = None,
    ) -> None:
        self.session = session
        self.registry = registry
        self.verbose = verbose
        self.timing = False
        self.last_statement: str | None = None
        self.interactive = sys.stdin.isatty()
        self._next_input = ""
        self._exit = False
        self._started_sinks: list[str] = []
        self._known_sinks = set(getattr(session, "created_sinks", ()))
        self._status_cache: tuple[float, list[Any]] = (0.0, [])
        self._warmed = False
        self.table_names = TableNames(lambda connection: session.tables(connection))
        history_path = history_path or Path(session.home) / HISTORY_FILE
        try:
            history_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # the history cannot be written; the shell works without it
        self.prompt_session: PromptSession[str] = PromptSession(
            message=[("class:prompt", PROMPT)],
            multiline=Condition(lambda: not is_complete(get_app().current_buffer.text)),
            prompt_continuation=lambda width, line_number, wrap_count: [("class:continuation", CONTINUATION)],
            history=RedactingFileHistory(str(history_path)),
            completer=IcesqlCompleter(self._object_names, self.registry.names, self.table_names),
            complete_while_typing=True,
            lexer=IcesqlLexer(),
            style=STYLE,
            include_default_pygments_style=False,
            bottom_toolbar=self._toolbar,
        )

    # ------------------------------------------------------------------ ShellContext

    def echo(self, text: str) -> None:
        print(text, flush=True)

    def echo_error(self, text: str) -> None:
        head, _, rest = text.partition("\n")
        fragments = [("class:error", head)]
        if rest:
            fragments.append(("", "\n" + rest))
        print_formatted_text(FormattedText(fragments), style=STYLE)

    def set_next_input(self, text: str) -> None:
        self._next_input = text

    def request_exit(self) -> None:
        self._exit = True

    def execute_text(self, sql: str, *, filename: str | None = None, base_dir: Path | None = None) -> bool:
        """Execute ``sql``, print its results or its error; True when it succeeded."""
        if self.interactive and not self._confirm_destructive(sql):
            self.echo("cancelled")
            return False
        started = time.perf_counter()
        ok = False
        execute_iter = getattr(self.session, "execute_iter", None)
        try:
            # each result is shown once applied, then the error that stopped the rest (psql's way)
            if execute_iter is not None:
                results = execute_iter(sql, filename=filename, base_dir=base_dir)
            else:
                results = self.session.execute(sql, filename=filename, base_dir=base_dir)
            for result in results:
                self._show_result(result)
            ok = True
        except IcesqlError as exc:
            self.echo_error(exc.render())
        except KeyboardInterrupt:
            self.echo("cancelled")
        except Exception as exc:  # an engine bug must not end the shell
            self.echo_error(f"error: {type(exc).__name__}: {exc}")
            if self.verbose:
                self.echo(traceback.format_exc())
            else:
                self.echo("hint: run icesql --verbose to see the traceback")
        if self.timing:
            self.echo(f"Time: {(time.perf_counter() - started) * 1000:.3f} ms")
        if filename is None:
            self.last_statement = sql.strip()
        self._start_new_sinks()
        return ok

    def _show_result(self, result: Any) -> None:
        text = format_result(result)
        if not (self.interactive and result.columns and self._page(text)):
            self.echo(text)
        for warning in result.warnings:
            text = warning if ": warning: " in warning else f"warning: {warning}"
            print_formatted_text(FormattedText([("class:warning", text)]), style=STYLE)

    def _page(self, text: str) -> bool:
        """Show ``text`` in the pager when it is taller than the terminal (``PAGER``, default
        ``less -SRFX``: wide tables scroll sideways in it); False when it fits (a short wide
        table prints, as before: ``less`` would wait on its chopped lines), when paging is off
        (``PAGER`` set empty) or the pager cannot start."""
        import shlex
        import shutil
        import subprocess

        from icesql import settings

        raw = settings.PAGER.raw()
        if raw is not None and not raw.strip():
            return False
        size = shutil.get_terminal_size()
        lines = text.split("\n")
        if len(lines) < size.lines - 1:
            return False
        sys.stdout.flush()
        try:
            subprocess.run([*shlex.split(settings.PAGER.get() or "less -SRFX")], input=text + "\n", text=True, check=False)
        except (OSError, ValueError):
            return False
        return True

    # ------------------------------------------------------------------ the loop

    def run(self) -> int:
        self.echo(f"icesql shell — home {self.session.home}. Type \\? for help, Ctrl-D to quit.")
        while not self._exit:
            default, self._next_input = self._next_input, ""
            try:
                # Output of other threads (a sink's log line) goes above the prompt while it is
                # shown. The patch ends with the prompt: a statement's own output is written as
                # it is printed, all of it before the next prompt is drawn. (Kept on across
                # statements, the proxy wrote its queue from a thread of its own, which could
                # find no prompt running and write straight over the next one: a SELECT's table
                # printed over the new prompt, which was then not drawn again.)
                with patch_stdout(raw=True):
                    text = self.prompt_session.prompt(
                        default=default,
                        refresh_interval=1.0 if self._started_sinks else None,
                        pre_run=self._pre_run,
                    )
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            self.handle(text)
        self.shutdown()
        return 0

    def handle(self, text: str) -> None:
        stripped = text.strip()
        if not stripped:
            return
        if stripped.startswith("\\"):
            self.registry.dispatch(self, stripped)
        elif stripped.rstrip(";").strip().lower() in ("quit", "exit"):
            self.request_exit()
        else:
            self.execute_text(text)

    def shutdown(self) -> None:
        """Stop the sinks started here: a final commit (reason ``shutdown``) each."""
        if not self._started_sinks:
            return
        self.echo(f"stopping {', '.join(self._started_sinks)} (final commit)...")
        try:
            self.session.stop()
        except IcesqlError as exc:
            self.echo_error(exc.render())
        except Exception as exc:
            self.echo_error(f"error: stopping sinks failed: {type(exc).__name__}: {exc}")
        self._started_sinks.clear()

    def _pre_run(self) -> None:
        if not self._warmed:
            self._warmed = True
            threading.Thread(target=_warm_up_parser, name="icesql-warm-up", daemon=True).start()

    def _confirm_destructive(self, sql: str) -> bool:
        statements = destructive_statements(sql)
        if not statements:
            return True
        listed = "\n".join(f"  {s}" for s in statements)
        self.echo(f"This will run:\n{listed}")
        try:
            answer = ask("Continue? [y/N] ")
        except (KeyboardInterrupt, EOFError):
            return False
        return answer.strip().lower() in ("y", "yes")

    # ------------------------------------------------------------------ sinks

    def _start_new_sinks(self) -> None:
        created = list(getattr(self.session, "created_sinks", ()))
        new = [name for name in created if name not in self._known_sinks]
        self._known_sinks.update(new)
        if not new:
            return
        self.echo(f"starting sink{'s' if len(new) > 1 else ''} {', '.join(new)} (see SHOW SINK STATUS)")
        try:
            self.session.start(sinks=new)
        except IcesqlError as exc:
            self.echo_error(exc.render())
            return
        except Exception as exc:
            self.echo_error(f"error: sink {', '.join(new)} did not start: {type(exc).__name__}: {exc}")
            if self.verbose:
                self.echo(traceback.format_exc())
            return
        self._started_sinks.extend(new)

    def _object_names(self, kind: str) -> list[str]:
        return list(self.session.object_names(kind))

    def _toolbar(self) -> Any:
        if not self._started_sinks:
            return None
        now = time.time()
        when, statuses = self._status_cache
        if now - when >= 1.0:
            try:
                statuses = list(self.session.status())
            except Exception:
                statuses = []
            self._status_cache = (now, statuses)
        if not statuses:
            return None
        fragments: list[tuple[str, str]] = []
        for i, s in enumerate(statuses[:6]):
            style = "class:bottom-toolbar.failed" if s.last_error else ""
            fragments.append((style, ("\n" if i else "") + " " + status_line(s, now)))
        return fragments


def run_shell(session: Any, *, verbose: bool = False) -> int:
    return Shell(session, verbose=verbose).run()


__all__ = ["RedactingFileHistory", "Shell", "TableNames", "run_shell"]
