"""Drive the real ``icesql`` shell through a pseudo-terminal (pexpect), matching on the text
a user would see: escape sequences are stripped before matching."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pexpect

ROOT = Path(__file__).resolve().parents[2]
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>]|\x1b\][^\x07]*\x07|[\x08\x0f\x0e]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text).replace("\r", "")


class Terminal:
    """A running ``python -m icesql`` on a pty, with a screen-text log to match against."""

    def __init__(
        self, home: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        full_env = dict(os.environ)
        full_env.update(
            {
                "TERM": "xterm",
                "COLUMNS": "120",
                "LINES": "40",
                "PYTHONPATH": str(ROOT),
            }
        )
        full_env.update(env or {})
        self.started = time.perf_counter()
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "icesql", "--home", str(home), *args],
            env=full_env,
            cwd=str(cwd or home),
            dimensions=(40, 120),
            encoding="utf-8",
            codec_errors="replace",
            timeout=30,
            # poll(), not select(): select() refuses a descriptor past 1024, which a long test run
            # in one process reaches (the suite's servers, sockets and Spark)
            use_poll=True,
        )
        self.raw = ""
        self.mark = 0  # expect() searches the screen text from here on

    @property
    def text(self) -> str:
        return strip_ansi(self.raw)

    def _pump(self, timeout: float) -> bool:
        try:
            chunk = self.child.read_nonblocking(65536, timeout=timeout)
        except pexpect.TIMEOUT:
            return True
        except pexpect.EOF:
            return False
        self.raw += chunk
        # Answer cursor-position requests as a terminal would (top row): prompt-toolkit shows
        # its bottom toolbar only once it knows how much room there is below the cursor.
        for _ in range(chunk.count("\x1b[6n")):
            self.child.send("\x1b[1;1R")
        return True

    def expect(self, pattern: str, timeout: float = 30.0, regex: bool = False) -> str:
        """Wait until ``pattern`` shows after the mark; move the mark past it; return the text."""
        deadline = time.monotonic() + timeout
        alive = True
        while True:
            screen = self.text
            found = re.search(pattern, screen[self.mark :]) if regex else None
            if regex and found:
                self.mark += found.end()
                return screen[self.mark - found.end() + found.start() : self.mark]
            if not regex and pattern in screen[self.mark :]:
                self.mark = screen.index(pattern, self.mark) + len(pattern)
                return pattern
            if not alive or time.monotonic() > deadline:
                raise AssertionError(
                    f"{pattern!r} not shown within {timeout}s; screen since mark:\n{screen[self.mark :][-3000:]}"
                )
            alive = self._pump(0.1)

    def prompt(self, timeout: float = 30.0) -> None:
        self.expect("icesql>", timeout)

    def reply(self, tag: str, timeout: float = 30.0) -> str:
        """Wait for a statement's reply (``CREATE SOURCE``) on a line of its own. ``expect`` of the
        bare words also matches the echo of the typed statement, which can show before the
        statement has run: the next line typed then waits as typeahead, and the test's marks
        fall out of step with the screen (the next ``prompt`` may match one drawn before the
        reply)."""
        # the reply may follow a blank drawn over the prompt's line (" \b"): spaces around it
        return self.expect(rf"(?m)^[ \t]*{re.escape(tag)}[ \t]*$", timeout, regex=True)

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def line(self, text: str) -> None:
        """Type ``text`` and press Enter."""
        self.child.send(text)
        time.sleep(0.05)
        self.child.send("\r")

    def settle(self, seconds: float = 0.5) -> str:
        """Read what arrives for ``seconds``; the screen text since the mark."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self._pump(0.05):
            pass
        return self.text[self.mark :]

    def exit(self, timeout: float = 60.0) -> int:
        self.child.send("\x04")
        deadline = time.monotonic() + timeout
        while self._pump(0.1):
            if time.monotonic() > deadline:
                self.child.terminate(force=True)
                raise AssertionError(f"shell did not exit; screen:\n{self.text[-3000:]}")
        self.child.close()
        return int(self.child.exitstatus if self.child.exitstatus is not None else -1)

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
