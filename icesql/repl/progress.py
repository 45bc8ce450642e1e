"""Live progress of running sinks for ``icesql run`` / ``icesql serve``.

On a terminal: one status line per sink, redrawn in place every second, with log lines
(commits, warnings) printed above it. Elsewhere (a pipe, a CI log): plain log lines only, one
per commit as the executor logs them — no escape codes in files.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from icesql.repl.format import status_line

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class OneLineFormatter(logging.Formatter):
    """Without ``--verbose`` a log line is one line: a record's traceback (py4j and urllib3 log
    their connection errors with one) becomes the exception's own first line."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            line = super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved
        first, _, more = line.partition("\n")
        exc = saved[0][1] if saved[0] else None
        if exc is not None:
            cause = str(exc).strip().split("\n", 1)[0][:300]
            first += f" ({type(exc).__name__}{': ' + cause if cause else ''})"
        return first + (" ..." if more.strip() else "")


def _thread_exception(args: Any) -> None:
    """``threading.excepthook`` without ``--verbose``: one log line, not a traceback."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("icesql").error(
        "thread %s stopped", name, exc_info=(args.exc_type, args.exc_value, args.exc_traceback)
    )


class LiveProgress(logging.Handler):
    """A logging handler that keeps a block of sink status lines at the bottom of a terminal."""

    def __init__(
        self,
        statuses: Callable[[], Sequence[Any]],
        stream: TextIO,
        *,
        interval: float = 1.0,
        sinks: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.setFormatter(OneLineFormatter(LOG_FORMAT, "%H:%M:%S"))
        self._statuses = statuses
        self._stream = stream
        self._interval = interval
        self._sinks = set(sinks) if sinks else None
        self._drawn = 0
        self._draw_lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="icesql-progress", daemon=True)

    def start(self) -> LiveProgress:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.redraw()
        super().close()

    def _lines(self) -> list[str]:
        try:
            statuses = list(self._statuses())
        except Exception:
            return []
        now = time.time()
        return ["  " + status_line(s, now) for s in statuses if self._sinks is None or s.name in self._sinks]

    def _erase(self) -> None:
        if self._drawn:
            # Cursor up over the block, then clear to the end of the screen.
            self._stream.write(f"\x1b[{self._drawn}F\x1b[J")
            self._drawn = 0

    def redraw(self) -> None:
        lines = self._lines()
        with self._draw_lock:
            self._erase()
            for line in lines:
                self._stream.write(line + "\n")
            self._drawn = len(lines)
            self._stream.flush()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
        except Exception:
            self.handleError(record)
            return
        with self._draw_lock:
            drawn = self._drawn
            self._erase()
            self._stream.write(message + "\n")
            self._stream.flush()
        if drawn:
            self.redraw()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.redraw()


def configure_logging(*, verbose: bool, stream: TextIO, live: LiveProgress | None = None) -> None:
    """INFO (DEBUG with ``--verbose``) to ``stream``, through ``live`` when it is on a terminal."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    handler: logging.Handler
    if live is not None:
        handler = live
    else:
        handler = logging.StreamHandler(stream)
    datefmt = "%H:%M:%S" if live is not None else None
    handler.setFormatter((logging.Formatter if verbose else OneLineFormatter)(LOG_FORMAT, datefmt))
    root.addHandler(handler)
    threading.excepthook = threading.__excepthook__ if verbose else _thread_exception
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    # Spark's and py4j's own chatter stays out unless asked for.
    for noisy in ("py4j", "pyspark", "urllib3", "botocore", "boto3", "s3transfer"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.WARNING)
