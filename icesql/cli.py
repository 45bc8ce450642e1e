"""The ``icesql`` command (SPEC §3): a thin argparse layer over ``icesql.Session``.

Exit codes: 0 success, 1 an SQL error (syntax or validation), 2 usage, 3 a runtime failure.

Only argparse and the standard library are imported at module level: ``icesql --help`` must
answer in well under a second, and nothing here starts Spark unless a sink has to run. The
session, the parser and prompt-toolkit are imported inside the commands that need them.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from icesql.errors import IcesqlError
    from icesql.session import Session

EXIT_OK = 0
EXIT_SQL_ERROR = 1
EXIT_USAGE = 2
EXIT_RUNTIME = 3

PROG = "icesql"

DESCRIPTION = """\
icesql: a SQL front-end that streams data from Apache Spark into Apache Iceberg tables.
Without a command it opens the interactive shell (or executes standard input when it is not a
terminal)."""

EPILOG = """\
examples:
  icesql                                     open the shell
  icesql run pipeline.sql                    create the objects, then run the sinks until Ctrl-C
  icesql run pipeline.sql --once             process what is available, commit, exit
  icesql exec "SHOW SINKS"                   run statements given inline
  icesql check pipeline.sql                  report every error, run nothing
  icesql parse pipeline.sql --json           print the syntax tree
  icesql serve                               run every sink in the catalog store
  icesql status                              sink states

exit codes: 0 ok, 1 SQL error (syntax or validation), 2 usage, 3 runtime failure
environment: ICESQL_HOME (default ~/.icesql), ICESQL_SECRET_KEY (encrypts secrets at rest)"""

COMMAND_HELP: dict[str, tuple[str, str, str]] = {
    # name: (one-line help, description, example epilog)
    "shell": (
        "open the interactive shell (the default)",
        "Open the interactive shell: multi-line SQL ending with ';', completion, history, "
        "backslash commands (\\? lists them).",
        "example:\n  icesql shell --home ./demo-home",
    ),
    "run": (
        "execute scripts, then run the sinks they create",
        "Execute FILE.sql scripts in order, then run the sinks they create (or name with "
        "CREATE SINK IF NOT EXISTS) until interrupted. SIGINT/SIGTERM stop the sinks with a "
        "final commit (reason 'shutdown') and exit 0. Use '-' to read standard input.",
        "example:\n  icesql run pipeline.sql --once\n  icesql --home ./prod run secrets.sql pipeline.sql",
    ),
    "exec": (
        "execute statements given inline",
        "Execute the SQL statements given as one argument ('-' reads standard input) and print "
        "their results. Sinks are created, not run (see 'icesql serve').",
        "example:\n  icesql exec \"CREATE SECRET pw AS 'hunter2'; SHOW SECRETS\"",
    ),
    "check": (
        "parse and validate scripts, report every error, run nothing",
        "Parse and validate every statement of every FILE without changing anything, print "
        "every error (file:line:col), and exit 1 if there was any.",
        "example:\n  icesql check pipeline.sql more/*.sql",
    ),
    "parse": (
        "print the syntax tree of scripts",
        "Parse FILE.sql and print its statements: canonical SQL, or the syntax tree as JSON "
        "with --json. Uses no catalog store and no Spark.",
        "example:\n  icesql parse pipeline.sql --json | jq '.[0].type'",
    ),
    "serve": (
        "run every sink of the catalog store until interrupted",
        "Run every sink stored in the icesql home until SIGINT/SIGTERM (final commit, exit 0), "
        "or with --once until the available input is committed. A sink that fails on a transient "
        "cause (a catalog that cannot be reached) is restarted with backoff; --metrics-port serves "
        "Prometheus metrics, /healthz, /readyz and a status page.",
        "example:\n  ICESQL_HOME=/var/lib/icesql icesql serve --metrics-port 9464",
    ),
    "compact": (
        "rewrite sink tables without delete files",
        "Rewrite the Iceberg table of each named sink (every sink when none is named): apply "
        "the upserts' equality deletes, write the surviving rows as few data files, and commit "
        "one 'replace' snapshot without delete files, so that every reader stays fast. Uses no "
        "Spark; safe while the sinks run (a commit in between makes it start over).",
        "example:\n  icesql compact orders_sink --home ./prod",
    ),
    "maintain": (
        "maintain sink tables: compact, expire snapshots, delete orphan files",
        "Run every maintenance step due on the Iceberg table of each named sink (every sink "
        "when none is named), under the sink's options: compact small files and files with "
        "many deletes, merge manifests, expire old snapshots (never the one holding a sink's "
        "progress) and delete files nothing references (never a staged batch's). Prints one "
        "line per step. Uses no Spark; meant for tables whose sinks are not running (a commit in "
        "between makes a step retry). --dry-run changes nothing and says what would be done.",
        "example:\n  icesql maintain orders_sink --home ./prod --dry-run",
    ),
    "status": (
        "show sink states",
        "Print each sink's state, rows and bytes committed, last commit, snapshot id and last "
        "error, from the catalog store.",
        "example:\n  icesql status --home ./demo-home",
    ),
}


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, found {text!r}")
    return key.strip(), value


def _add_common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # On the subcommands the defaults are suppressed so that `icesql --home X run f.sql`
    # and `icesql run f.sql --home X` both work without one overwriting the other.
    default: Any = None if top else argparse.SUPPRESS
    group = parser.add_argument_group("common options")
    group.add_argument(
        "--home",
        metavar="DIR",
        default=default,
        help="icesql home: catalog store, checkpoints, history (env ICESQL_HOME, default ~/.icesql)",
    )
    group.add_argument(
        "--spark-master",
        metavar="URL",
        default=default,
        help="Spark master or Spark Connect URL sc://host:port (env ICESQL_SPARK_MASTER, default local[*])",
    )
    group.add_argument(
        "--conf",
        metavar="KEY=VALUE",
        type=_conf_pair,
        action="append",
        default=[] if top else argparse.SUPPRESS,
        help="a Spark setting (repeatable)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="debug logging, and tracebacks for unexpected failures",
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, found {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535, found {port}")
    return port


def _add_metrics(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("metrics and health")
    group.add_argument(
        "--metrics-port",
        metavar="PORT",
        type=_port,
        default=None,
        help="serve Prometheus /metrics, /healthz, /readyz and a status page on this port (0: a free one)",
    )
    group.add_argument(
        "--metrics-host",
        metavar="HOST",
        default="127.0.0.1",
        help="the address the metrics server listens on (default 127.0.0.1; 0.0.0.0 for every interface)",
    )


def _add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=("table", "csv", "json"),
        default="table",
        help="how rows print: aligned tables, or for scripts CSV with a header / JSON lines "
        "(one object per row; status messages then go to standard error)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=_Formatter
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    def command(name: str) -> argparse.ArgumentParser:
        short, description, example = COMMAND_HELP[name]
        p = sub.add_parser(
            name,
            help=short,
            description=textwrap.fill(description, 90),
            epilog=example,
            formatter_class=_Formatter,
        )
        _add_common(p, top=False)
        return p

    command("shell")
    p = command("run")
    p.add_argument("files", nargs="+", metavar="FILE.sql", help="scripts to execute, in order")
    p.add_argument("--once", action="store_true", help="process what is available, commit, exit")
    _add_format(p)
    _add_metrics(p)
    p = command("exec")
    p.add_argument("sql", metavar="SQL", help="statements separated by ';' ('-' reads standard input)")
    _add_format(p)
    p = command("check")
    p.add_argument("files", nargs="+", metavar="FILE.sql", help="scripts to check")
    p = command("parse")
    p.add_argument("files", nargs="+", metavar="FILE.sql", help="scripts to parse")
    p.add_argument("--json", action="store_true", help="print the syntax tree as JSON")
    p = command("serve")
    p.add_argument("--once", action="store_true", help="stop once the available input is committed")
    _add_metrics(p)
    p = command("compact")
    p.add_argument("sinks", nargs="*", metavar="SINK", help="sinks whose tables to compact (default: all)")
    p = command("maintain")
    p.add_argument("sinks", nargs="*", metavar="SINK", help="sinks whose tables to maintain (default: all)")
    p.add_argument("--dry-run", action="store_true", help="change nothing; say what would be done")
    command("status")
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("icesql")
    except Exception:
        return "unknown"


# --------------------------------------------------------------------------- helpers


class _Usage(Exception):
    """A usage problem found after argument parsing (unreadable file); exit code 2."""


def _read(path: str) -> str:
    """A script's text: UTF-8, a byte order mark dropped; anything else is a usage error."""
    if path == "-":
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise _Usage(f"cannot read standard input: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise _Usage(f"cannot read {path}: no such file") from None
    except IsADirectoryError:
        raise _Usage(f"cannot read {path}: is a directory") from None
    except UnicodeDecodeError as exc:
        raise _Usage(f"cannot read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (OSError, ValueError) as exc:
        raise _Usage(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _argument_text(text: str) -> str:
    """SQL given on the command line: bytes that were not UTF-8 arrive as lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Usage(f"the SQL argument is not UTF-8 text (a byte that is not UTF-8 at character {exc.start})") from None
    return text.removeprefix("\ufeff")


def _display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def _base_dir(path: str) -> Path:
    return Path.cwd() if path == "-" else Path(path).resolve().parent


def _open_session(args: argparse.Namespace, **kwargs: Any) -> Session:
    from icesql.session import Session

    return Session(
        home=args.home,
        spark_master=args.spark_master,
        spark_conf=dict(args.conf or []),
        verbose=args.verbose,
        **kwargs,
    )


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _exit_code(error: IcesqlError) -> int:
    from icesql.errors import ExecutionError, UsageError

    if isinstance(error, UsageError):
        return EXIT_USAGE
    if isinstance(error, ExecutionError):
        return EXIT_RUNTIME
    return EXIT_SQL_ERROR


def _print_results(results: Iterable[Any], fmt: str = "table") -> None:
    """Print each result as it comes: with ``Session.execute_iter`` the statements applied
    before an error are shown before it, as psql does. ``fmt`` csv or json prints rows only
    (messages of statements without rows go to standard error)."""
    from icesql.repl.format import format_csv, format_json_lines, format_result

    for result in results:
        if fmt == "table":
            print(format_result(result), flush=True)
        elif not result.columns:
            _err(result.message)
        else:
            out = format_csv(result.columns, result.rows) if fmt == "csv" else format_json_lines(result.columns, result.rows)
            sys.stdout.write(out)
            sys.stdout.flush()
        for warning in result.warnings:
            _err(warning if ": warning: " in warning else f"warning: {warning}")


def _execute_files(session: Session, files: Sequence[str], fmt: str = "table") -> int:
    """Execute each script whole or not at all: every error of a script is reported and
    nothing of it is applied (earlier scripts stay applied). Returns the exit code."""
    texts = [(f, _read(f)) for f in files]  # every file is readable before anything runs
    for path, text in texts:
        name, base = _display_name(path), _base_dir(path)
        errors = session.check(text, filename=name, base_dir=base)
        if errors:
            for error in errors:
                _err(error.render())
            _err(f"{len(errors)} error{'s' if len(errors) != 1 else ''} in {name}; nothing of it was applied")
            return EXIT_SQL_ERROR
        _print_results(session.execute(text, filename=name, base_dir=base, atomic=True), fmt)
    return EXIT_OK


def _serve_metrics(session: Session, args: argparse.Namespace) -> None:
    if args.metrics_port is None:
        return
    url = session.serve_metrics(host=args.metrics_host, port=args.metrics_port)
    _err(f"icesql: metrics on {url}/metrics, health on {url}/healthz and {url}/readyz, status page {url}/")


def _run_until_stopped(session: Session, target: Callable[[], None], *, sinks: Sequence[str] | None) -> int:
    """Run ``target`` (which blocks while sinks run) in a worker thread, so that the main
    thread can turn SIGINT/SIGTERM into ``session.stop()``: a final commit, then exit 0."""
    import signal
    import threading

    from icesql.repl.progress import LiveProgress, configure_logging

    live = None
    if sys.stderr.isatty():
        live = LiveProgress(session.status, sys.stderr, sinks=sinks)
    configure_logging(verbose=session.verbose, stream=sys.stderr, live=live)
    if live is not None:
        live.start()

    failure: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            target()
        except BaseException as exc:  # reported by the main thread
            failure.append(exc)
        finally:
            done.set()

    signals: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        if signals:  # a second signal: give up on the final commit
            _err("icesql: stopped without a final commit")
            os._exit(EXIT_RUNTIME)
        signals.append(signum)
        # at once, not at the next poll: with the whole process group signalled (systemd),
        # Spark's JVM is shutting down already and a batch's job is being cancelled
        session.stopping()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    worker = threading.Thread(target=work, name="icesql-run", daemon=True)
    worker.start()
    try:
        while not done.wait(0.2):
            if signals:
                _err(f"icesql: {signal.Signals(signals[0]).name} received, stopping sinks (final commit)...")
                session.stop()
                done.wait()
                break
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if live is not None:
            live.close()
    if failure:
        raise failure[0]
    return EXIT_OK


# --------------------------------------------------------------------------- commands


def cmd_shell(args: argparse.Namespace) -> int:
    if not sys.stdin.isatty():
        # `icesql < script.sql`: execute standard input statement by statement, as psql does.
        text = _read("-")
        with _open_session(args) as session:
            _print_results(session.execute_iter(text, filename="<stdin>", base_dir=Path.cwd()))
        return EXIT_OK
    session = _open_session(args)
    try:
        from icesql.repl.shell import run_shell

        return run_shell(session, verbose=args.verbose)
    finally:
        session.close()


def cmd_run(args: argparse.Namespace) -> int:
    with _open_session(args) as session:
        code = _execute_files(session, args.files, args.format)
        if code != EXIT_OK:
            return code
        from icesql.engine.base.hooks import mark

        mark("script applied")
        sinks = list(session.created_sinks)
        if not sinks:
            _err("icesql: the scripts create no sink; nothing to run")
            return EXIT_OK
        _err(
            f"icesql: running {', '.join(sinks)}{' once' if args.once else ' (Ctrl-C stops with a final commit)'}"
        )
        _serve_metrics(session, args)
        return _run_until_stopped(session, lambda: session.run(once=args.once, sinks=sinks), sinks=sinks)


def cmd_exec(args: argparse.Namespace) -> int:
    text = _read("-") if args.sql == "-" else _argument_text(args.sql)
    if args.verbose:  # the debug log says, among the rest, which engine answers each SELECT
        from icesql.repl.progress import configure_logging

        configure_logging(verbose=True, stream=sys.stderr)
    with _open_session(args) as session:
        # each result is printed once applied; an error then stops the rest (psql's way)
        _print_results(session.execute_iter(text, filename="<stdin>" if args.sql == "-" else "<exec>"), args.format)
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    texts = [(f, _read(f)) for f in args.files]
    errors = 0
    statements = 0
    with _open_session(args, validate=False) as session:
        from icesql.syntax.parser import split_statements

        for path, text in texts:
            found = session.check(text, filename=_display_name(path), base_dir=_base_dir(path))
            for error in found:
                _err(error.render())
            errors += len(found)
            statements += sum(1 for s, e in split_statements(text) if text[s:e].strip(" \t\r\n;"))
    if errors:
        _err(
            f"{errors} error{'s' if errors != 1 else ''} in {len(texts)} file{'s' if len(texts) != 1 else ''}"
        )
        return EXIT_SQL_ERROR
    print(
        f"ok: {statements} statement{'s' if statements != 1 else ''} in {len(texts)} file{'s' if len(texts) != 1 else ''}"
    )
    return EXIT_OK


def cmd_parse(args: argparse.Namespace) -> int:
    import json

    from icesql.errors import IcesqlError
    from icesql.syntax.parser import parse

    texts = [(f, _read(f)) for f in args.files]
    parsed: list[tuple[str, list[Any]]] = []
    failed = False
    for path, text in texts:
        try:
            parsed.append((path, parse(text, filename=_display_name(path))))
        except IcesqlError as error:
            _err(error.with_source(text, _display_name(path)).render())
            failed = True
    if failed:
        return EXIT_SQL_ERROR
    if args.json:
        if len(parsed) == 1:
            doc: Any = [s.to_dict() for s in parsed[0][1]]
        else:
            doc = {path: [s.to_dict() for s in stmts] for path, stmts in parsed}
        print(json.dumps(doc, indent=2))
    else:
        for path, stmts in parsed:
            if len(parsed) > 1:
                print(f"-- {path}")
            for stmt in stmts:
                print(stmt.to_sql() + ";")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    with _open_session(args) as session:
        sinks = session.object_names("sink")
        if not sinks:
            _err("icesql: the catalog store has no sink; nothing to serve")
            return EXIT_OK
        _err(
            f"icesql: serving {', '.join(sinks)}{' once' if args.once else ' (Ctrl-C stops with a final commit)'}"
        )
        _serve_metrics(session, args)
        return _run_until_stopped(session, lambda: session.serve(once=args.once), sinks=None)


def cmd_compact(args: argparse.Namespace) -> int:
    from icesql.repl.format import format_compaction
    from icesql.repl.progress import configure_logging

    with _open_session(args) as session:
        configure_logging(verbose=session.verbose, stream=sys.stderr)
        names = list(args.sinks) or session.object_names("sink")
        if not names:
            _err("icesql: the catalog store has no sink; nothing to compact")
            return EXIT_OK
        for name in names:
            results = session.compact([name])
            if not results:  # a routed sink that has written no table yet
                print(f"{name}: no table written yet, nothing to compact", flush=True)
            for result in results:  # one per table (a routed sink's: each it has written)
                print(f"{name}: {format_compaction(result)}", flush=True)
    return EXIT_OK


def cmd_maintain(args: argparse.Namespace) -> int:
    from icesql.errors import ExecutionError
    from icesql.repl.format import format_maintenance
    from icesql.repl.progress import configure_logging

    with _open_session(args) as session:
        configure_logging(verbose=session.verbose, stream=sys.stderr)
        names = list(args.sinks) or session.object_names("sink")
        if not names:
            _err("icesql: the catalog store has no sink; nothing to maintain")
            return EXIT_OK
        status = EXIT_OK
        for name in names:
            try:
                runs = session.maintain([name], dry_run=args.dry_run)
            except ExecutionError as exc:  # one sink's table (missing, unreachable): go on with the rest
                _err(f"{name}: {exc.render()}")
                status = EXIT_RUNTIME
                continue
            if not runs:  # a routed sink that has written no table yet
                print(f"{name}: no table written yet, nothing to maintain", flush=True)
            for run in runs:  # one per table (a routed sink's: each it has written)
                for line in format_maintenance(run):
                    print(line, flush=True)
    return status


def cmd_status(args: argparse.Namespace) -> int:
    from icesql.repl.format import STATUS_COLUMNS, format_table, status_rows

    with _open_session(args) as session:
        print(format_table(STATUS_COLUMNS, status_rows(session.status())))
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "shell": cmd_shell,
    "run": cmd_run,
    "exec": cmd_exec,
    "check": cmd_check,
    "parse": cmd_parse,
    "serve": cmd_serve,
    "compact": cmd_compact,
    "maintain": cmd_maintain,
    "status": cmd_status,
}


def main(argv: Sequence[str] | None = None) -> int:
    # Text that cannot be encoded (a file name of stray bytes) is escaped, never a crash.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command or "shell"
    try:
        return COMMANDS[command](args)
    except _Usage as exc:
        _usage_error(parser, str(exc))
    except KeyboardInterrupt:
        _err("icesql: interrupted")
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except Exception as exc:
        from icesql.errors import IcesqlError, UsageError

        if isinstance(exc, UsageError):
            # one line and a hint, like argparse's own usage errors
            _err(f"{PROG}: error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""))
            return EXIT_USAGE
        if isinstance(exc, IcesqlError):
            _err(exc.render())
            if args.verbose:
                import traceback

                traceback.print_exc()
            return _exit_code(exc)
        _err(f"icesql: error: {type(exc).__name__}: {exc}")
        if args.verbose:
            import traceback

            traceback.print_exc()
        else:
            _err("hint: run with --verbose to see the traceback")
        return EXIT_RUNTIME


def entry() -> None:
    """The ``icesql`` command (and ``python -m icesql``): ``main``, then a hard exit.

    Once the command is done (its sinks committed and stopped, its output flushed) the process
    ends with ``os._exit``: an ordinary interpreter exit runs the destructors of native libraries
    (Arrow's thread pools) while daemon threads may still sit in their calls, and one upsert run in
    about ten ended with ``terminate called without an active exception`` (SIGABRT) after its last
    commit. Spark's JVM, a child process, exits when its standard input closes."""
    code = main()
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to say
            pass
    os._exit(code)


def _closed_pipe() -> int:
    """The reader of standard output went away (``icesql parse x.sql | head -1``): stop
    quietly, as Unix tools do when SIGPIPE ends them (the shell's status is 128 + SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
    except (OSError, ValueError):
        pass
    return 128 + 13


def _usage_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    parser.exit(EXIT_USAGE, f"{PROG}: error: {message}\n")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
