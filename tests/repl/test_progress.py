"""Live sink progress for ``icesql run`` on a terminal: status lines redrawn under log lines."""

from __future__ import annotations

import io
import logging
from typing import Any

from icesql.repl.progress import LiveProgress, configure_logging
from icesql.session import SinkStatus


def test_log_lines_print_above_the_redrawn_status_block() -> None:
    stream = io.StringIO()
    statuses = [SinkStatus("orders", "running", rows_committed=10, bytes_committed=2048, last_commit_at=None)]
    live = LiveProgress(lambda: statuses, stream, interval=3600, sinks=["orders"])
    live.redraw()
    assert stream.getvalue() == "  orders running rows=10 bytes=2.0 KiB commit never\n"
    configure_logging(verbose=False, stream=stream, live=live)
    try:
        logging.getLogger("icesql.sink").info("commit sink=orders reason=period rows=5")
    finally:
        live.close()
        logging.getLogger().removeHandler(live)
    out = stream.getvalue()
    # the block is erased (cursor up one line, clear), the log line written, the block redrawn
    assert "\x1b[1F\x1b[J" in out
    after = out.split("\x1b[1F\x1b[J", 1)[1]
    assert "commit sink=orders reason=period rows=5" in after.splitlines()[0]
    assert after.splitlines()[1] == "  orders running rows=10 bytes=2.0 KiB commit never"


def test_plain_log_lines_when_not_a_terminal() -> None:
    stream = io.StringIO()
    configure_logging(verbose=False, stream=stream)
    root = logging.getLogger()
    try:
        logging.getLogger("icesql.sink").info("commit sink=a")
        logging.getLogger("py4j").info("chatter")  # kept out unless --verbose
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
    assert "commit sink=a" in stream.getvalue() and "chatter" not in stream.getvalue()
    assert "\x1b" not in stream.getvalue()


def test_a_retrying_sink_shows_its_attempt_and_the_time_to_the_next() -> None:
    from icesql.repl.format import status_line, status_rows

    s = SinkStatus(
        "orders", "retrying", last_error="catalog unreachable", retry_attempt=3, next_attempt_at=1004.2
    )
    assert status_line(s, now=1000.0) == (
        "orders retrying (attempt 3, next in 4s) rows=0 bytes=0 B commit never error: catalog unreachable"
    )
    assert status_rows([s], now=1000.0)[0][1] == "retrying (attempt 3, next in 4s)"


def test_no_traceback_without_verbose_one_with_it() -> None:
    """py4j and urllib3 log connection errors with a traceback; a thread's uncaught exception
    prints one: without --verbose each is one line naming the exception, with it the traceback."""
    import threading

    def failing() -> None:
        raise ConnectionError("Answer from Java side is empty\nmore detail")

    for verbose in (False, True):
        stream = io.StringIO()
        configure_logging(verbose=verbose, stream=stream)
        try:
            try:
                failing()
            except ConnectionError:
                logging.getLogger("py4j.clientserver").exception("Error while receiving.")
            t = threading.Thread(target=failing, name="worker-1")
            t.start()
            t.join()
        finally:
            for h in list(logging.getLogger().handlers):
                logging.getLogger().removeHandler(h)
            threading.excepthook = threading.__excepthook__
        out = stream.getvalue()
        if verbose:
            # the logged one here; the thread's goes to stderr, as Python prints it
            assert out.count("Traceback (most recent call last)") == 1, out
            continue
        assert "Traceback" not in out, out
        lines = out.splitlines()
        assert len(lines) == 2, out
        assert lines[0].endswith("py4j.clientserver: Error while receiving. (ConnectionError: Answer from Java side is empty)")
        assert "thread worker-1 stopped (ConnectionError: Answer from Java side is empty)" in lines[1]


def test_pyspark_accumulator_server_errors_are_logged_not_printed(capsys: Any) -> None:
    """The accumulator server (a socketserver) prints a traceback when the JVM's connection
    breaks; icesql's Spark sessions route it to a DEBUG log line."""
    import socketserver

    from pyspark import accumulators

    from icesql.engine.backends.spark.session import _accumulator_errors_to_the_log

    _accumulator_errors_to_the_log()
    server = accumulators.AccumulatorTCPServer.__new__(accumulators.AccumulatorTCPServer)
    assert accumulators.AccumulatorTCPServer.handle_error is not socketserver.BaseServer.handle_error
    try:
        raise EOFError
    except EOFError:
        server.handle_error(None, ("127.0.0.1", 1))
    assert "Traceback" not in capsys.readouterr().err


def test_icesql_status_counts_dead_letters() -> None:
    from icesql.repl.format import STATUS_COLUMNS, status_rows

    row = status_rows([SinkStatus("orders", "running", dead_letters=4)], now=1000.0)[0]
    assert dict(zip(STATUS_COLUMNS, row, strict=True))["dead letters"] == 4
