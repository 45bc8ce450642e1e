"""Live sink progress for ``icesql run`` on a terminal: status lines redrawn under log lines."""

from __future__ import annotations

import io
import logging

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


def test_icesql_status_counts_dead_letters() -> None:
    from icesql.repl.format import STATUS_COLUMNS, status_rows

    row = status_rows([SinkStatus("orders", "running", dead_letters=4)], now=1000.0)[0]
    assert dict(zip(STATUS_COLUMNS, row, strict=True))["dead letters"] == 4
