"""Headless Chromium (Debian's ``chromium`` package) for looking at icesql's status page.

Each call starts a fresh browser with its own profile directory, no network chatter of its own
(background networking, component updates, sync and QUIC off: the machine has no network) and
console messages logged to stderr (``--enable-logging=stderr``), where they read
``INFO:CONSOLE(...) "message", source: ...`` whatever their level.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
)


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass(frozen=True)
class Visit:
    stdout: str
    stderr: str

    @property
    def console(self) -> list[str]:
        """Every message the page wrote to its console (errors, uncaught exceptions, failed loads)."""
        return re.findall(r":CONSOLE[^\]]*\] (.*)", self.stderr)


def visit(url: str, *args: str, budget_ms: int = 5000, timeout: float = 90.0) -> Visit:
    """Load ``url``, let its scripts and timers run for ``budget_ms`` of virtual time, then do
    what ``args`` ask (``--dump-dom``, ``--screenshot=PATH``, ``--window-size=W,H``)."""
    binary = chromium_binary()
    if binary is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="icesql-chromium-")
    try:
        out = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", *args, url],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if out.returncode != 0:
        raise RuntimeError(f"chromium exited with {out.returncode}:\n{out.stderr[-3000:]}")
    return Visit(out.stdout, out.stderr)
