"""The CLI's metrics flags, and that nothing of the observer loads unless asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from icesql.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", ["run", "serve"])
def test_metrics_flags(command: str) -> None:
    parser = build_parser()
    extra = ["f.sql"] if command == "run" else []
    args = parser.parse_args([command, *extra])
    assert (args.metrics_port, args.metrics_host) == (None, "127.0.0.1")
    args = parser.parse_args([command, *extra, "--metrics-port", "0", "--metrics-host", "0.0.0.0"])
    assert (args.metrics_port, args.metrics_host) == (0, "0.0.0.0")


def test_a_bad_port_is_a_usage_error(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "icesql", "serve", "--metrics-port", "70000", "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert p.returncode == 2 and "a port is 0-65535, found 70000" in p.stderr


def test_the_session_and_the_cli_do_not_load_the_observer() -> None:
    probe = (
        "import sys, icesql, icesql.cli, icesql.session\n"
        "from icesql.cli import build_parser\n"
        "build_parser().parse_args(['serve', '--metrics-port', '9464'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('prometheus_client', 'icesql.observe'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "[]"
