"""Soak harness (issue 16): sinks on ``weed mini`` through a misbehaving network, faults from a
seeded schedule, an operator who restarts what fails, and an independent replay at the end.

What runs
---------
* ``weed mini`` (S3 + Iceberg REST catalog) with a short OAuth2 token lifetime
  (``ICEBERG_OAUTH_TOKEN_EXPIRY``, so tokens expire many times during the run) and its STS
  issuing the storage credentials (the AWS connection has ``ASSUME ROLE ARN``; they live
  ``SoakConfig.sts_lifetime`` s, after which weed's S3 refuses them), behind a
  ``FaultProxy`` (``tests/support/faultproxy.py``): icesql's catalog ``URI`` and its AWS
  connection's ``ENDPOINT`` are the proxy's ports, so every catalog call, token request and S3
  request of the driver and of Spark's executors crosses it;
* icesql runs with ``ICESQL_CATALOG_TIMEOUT`` = ``SoakConfig.catalog_timeout`` (10 s), under the
  operator's idle limit (below): a call stuck on a connection a blackhole killed fails and is
  retried before the operator would take the wait for a hang;
* one icesql home (on a small tmpfs when ``mount -t tmpfs`` works, for the full-disk fault) with
  ``pipeline.sql``: an APPEND sink (JSON files -> ``soak.events``, ``day(ts)``) and an UPSERT sink
  (Debezium JSON with the composite key ``(region, id)`` -> ``soak.orders``, ``COMMIT INTERVAL``);
* a feeder that drops a JSON file and a Debezium file into the source directories every few
  seconds (``tests/support/cdc_changelog.py`` generates the changes and replays them);
* the **operator**: it runs ``icesql --home H run pipeline.sql`` or ``icesql --home H serve``
  (alternating) as a subprocess in its own process group, restarts it 2 s after it exits on its
  own (and ``run``/``serve`` with a clean stop once it logs that a sink failed for good: it goes
  on running the other sink, and a failed sink waits for its operator), kills and restarts it when it stalls (up, but no commit of both sinks since a fault
  ended, and either idle -- under 0.8 s of CPU in 20 s: a hung call -- or busy for
  ``recovery_timeout``), and at the end stops it with SIGTERM and drains the input with
  ``run pipeline.sql --once``.

Faults (``KINDS``), drawn in order from ``random.Random(seed)``
-------------------------------------------------------------
``kill``            SIGKILL of the icesql process group (JVM and workers) at a random moment
                    (0.5-20 s after the call, startup included), 1-3 times in a row (3-6 once
                    only kills are left: ``SoakConfig.kill_burst``; a kill may land during the
                    recovery from the one before)
``stop``            a clean stop (SIGTERM to icesql's process, or to its whole process group as
                    systemd does) and a start: it must commit what is staged and exit 0
``weed_restart``    SIGKILL of weed mini, down 1-8 s, restarted on the same ports and data
``net_latency``     latency 0.05-0.6 s ± jitter on the catalog, S3 or both, for 5-20 s
``net_reset``       RST of every open connection (catalog, S3 or both), 1-3 times
``net_refuse``      new connections refused for 2-12 s
``net_reset_new``   new connections accepted and reset at once for 2-8 s
``net_blackhole``   nothing forwarded for 3-15 s; the bytes are lost and those connections stay
                    dead (a client without a read timeout hangs)
``net_stall``       nothing forwarded for 3-15 s, then everything is delivered
``net_cut``         the next 1-3 responses cut after 0-20000 bytes
``conflict``        a foreign writer (pyiceberg, straight to weed) appends 3-5 times to the
                    sinks' tables while they commit; its rows are part of the expected state
``disk_full``       the tmpfs under the icesql home filled up for 5-15 s
``staging_corrupt`` the sink is SIGKILLed while a batch is staged, the staging JSON is
                    truncated, emptied or overwritten in part; if the sink then fails twice, the
                    operator puts the original file back (recorded)
``home_loss``       (a phase after the main run, see below) ``<home>/sinks/`` (checkpoints and
                    staging) deleted between runs, as a pod without a persistent volume would

The schedule starts with every enabled kind once (a seeded permutation), then draws kinds by
weight (``WEIGHTS``: kills dominate) until the time is up; ``SoakConfig.plan`` gives a fixed list
instead (the default-suite run). After each fault the harness waits until both sinks have
committed again after the fault ended (recovery), then 2-6 s, then the next fault.

``home_loss`` would hide every other result if it ran inside the main run (a lost checkpoint loses
or repeats batches today), so it runs after the main run has been verified: the sink is stopped
cleanly, new input arrives, ``<home>/sinks/`` is deleted, ``run --once`` runs, and the tables are
verified again; the difference is reported apart.

What is recorded
----------------
Per fault: kind, parameters, start/end, what happened (sink exits with their error line, stalls,
conflicts seen, Python tracebacks and Java stack traces in the output, operator actions), and
the time from the fault to the first commit of both sinks after it. Per run of icesql: the
command, exit code, why it ended. At the end: the tables read by DuckDB and by DataFusion,
compared with each other and with the replay of the generated input (rows lost, duplicated,
stale). ``write_report`` renders all of it as Markdown.

Run it: ``tests/soak/test_soak.py`` (short, default suite; long, ``-m slow``) or
``python -m tests.soak.harness --minutes 15 --seed 16 --report docs/SOAK.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cdc_changelog import SCHEMA as CDC_SCHEMA
from tests.support.cdc_changelog import Change, Changelog, expected_state, write_round
from tests.support.faultproxy import FaultProxy
from tests.support.weed import ROLE_ARN, WeedServer

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable

KINDS = (
    "kill",
    "stop",
    "weed_restart",
    "net_latency",
    "net_reset",
    "net_refuse",
    "net_reset_new",
    "net_blackhole",
    "net_stall",
    "net_cut",
    "conflict",
    "disk_full",
    "staging_corrupt",
)
WEIGHTS = {
    "kill": 8,
    "stop": 1,
    "weed_restart": 2,
    "net_latency": 1,
    "net_reset": 2,
    "net_refuse": 1,
    "net_reset_new": 1,
    "net_blackhole": 1,
    "net_stall": 1,
    "net_cut": 2,
    "conflict": 2,
    "disk_full": 1,
    "staging_corrupt": 1,
}
SINKS = ("events_sink", "orders_sink")
TABLES = {"events_sink": "soak.events", "orders_sink": "soak.orders"}
EVENTS_SCHEMA = "id BIGINT, ts TIMESTAMP, v STRING"
FOREIGN_REGION = "zz-foreign"  # keys the changelog never touches

COMMIT_RE = re.compile(r"commit sink=(\S+) table=(\S+) reason=(\S+) rows=(\d+)")
SINK_FAIL_RE = re.compile(r"\bERROR icesql\.sink: sink (\S+) (failed|fenced): (.*)")
ERROR_LINE_RE = re.compile(r"(^|\s)error: |^icesql: error")
JAVA_AT_RE = re.compile(r"^\s+at [\w$.<>]+\(.*\)\s*$")


# --------------------------------------------------------------------------- records


@dataclass
class ChildRun:
    """One run of the icesql CLI."""

    index: int
    command: str  # "run", "serve", "run --once", ...
    started: float
    ended: float | None = None
    rc: int | None = None
    ended_because: str = ""  # "killed by the harness", "failed", "stopped", "exited"
    error: str | None = None  # the error line the CLI printed last
    sink_failures: list[str] = field(default_factory=list)  # "sink X failed: ..." log lines
    tracebacks: list[str] = field(default_factory=list)  # excerpts of Python tracebacks
    java_traces: int = 0  # Java stack trace lines ("\tat org...") in the output
    java_excerpts: list[str] = field(default_factory=list)
    fault: int | None = None  # the fault in progress when it ended
    first_commit: float | None = None
    # ``run``/``serve`` (not ``--once``): when it logged that a sink failed for good (it goes on
    # running the others; the operator restarts it, as if it had exited)
    sink_failed_at: float | None = None


@dataclass
class FaultRecord:
    index: int
    kind: str
    params: dict[str, Any]
    started: float
    ended: float | None = None  # when the fault condition was over
    recovered: float | None = None  # both sinks committed after ``ended``
    sink_exits: list[str] = field(default_factory=list)  # error lines of the runs that failed
    stalls: int = 0
    actions: list[str] = field(default_factory=list)  # operator actions beyond a restart
    notes: list[str] = field(default_factory=list)
    conflicts_seen: int = 0
    tracebacks: int = 0
    java_traces: int = 0

    @property
    def recovery_seconds(self) -> float | None:
        """From the end of the fault (the last kill, the network back, weed up again) until
        both sinks committed."""
        return None if self.recovered is None or self.ended is None else self.recovered - self.ended

    @property
    def outage_seconds(self) -> float | None:
        """From the start of the fault until both sinks committed."""
        return None if self.recovered is None else self.recovered - self.started


@dataclass
class TableCheck:
    table: str
    expected_rows: int
    actual_rows: int
    lost: int
    duplicated: int
    stale: int  # upsert: a key present once with a different row
    unexpected: int  # a row or key the replay does not have
    duckdb_equals_datafusion: bool
    equals_replay: bool
    examples: list[str] = field(default_factory=list)


@dataclass
class SoakConfig:
    seed: int = 16
    minutes: float = 3.0  # main run length (faults start until then); ignored with ``plan``
    plan: tuple[str, ...] | None = None  # a fixed list of fault kinds, in order, instead
    kinds: tuple[str, ...] = KINDS
    home_loss_rounds: int = 1
    token_lifetime: int = 30  # seconds (weed's ICEBERG_OAUTH_TOKEN_EXPIRY)
    # seconds the storage credentials live: the AWS connection assumes a role through weed's STS
    # (``WeedServer.start(sts_seconds=...)``); 0: the admin keys themselves
    sts_lifetime: int = 60
    recovery_timeout: float = 300.0  # a run up this long without both sinks committing: a stall
    stall_idle: float = 20.0  # ... or one using under stall_cpu s of CPU in this many seconds
    stall_cpu: float = 0.8
    # icesql's ICESQL_CATALOG_TIMEOUT for the runs (its default is 30 s): a catalog call on a
    # connection a blackhole killed waits that long, idle, before it fails and the sink retries;
    # under ``stall_idle`` so that such a wait is not taken for a hung call (a stall), while a
    # call that ignores the timeout still is
    catalog_timeout: float = 10.0
    restart_delay: float = 2.0  # the operator restarts an exited sink after this
    feed_interval: tuple[float, float] = (1.5, 3.5)
    events_rows: int = 20
    cdc_changes: int = 25
    commit_interval: str = "4s"  # the upsert sink's COMMIT INTERVAL
    tmpfs_mb: int = 192
    workdir: Path | None = None
    keep_workdir: bool = False
    spark_conf: tuple[tuple[str, str], ...] = (
        ("spark.ui.enabled", "false"),
        ("spark.sql.shuffle.partitions", "2"),
        ("spark.default.parallelism", "2"),
        ("spark.driver.memory", "1g"),
        ("spark.sql.session.timeZone", "UTC"),
    )
    min_kills: int = 0  # after ``minutes``: only kills until there were this many
    kill_burst: tuple[int, int] = (3, 6)  # kills in a row per kill fault once only kills are left
    drain_attempts: int = 6
    once_timeout: float = 1800.0  # a --once run taking longer is a hang (as is an idle one)
    # the sinks' executor: True, in icesql's own process (ICESQL_LOCAL_RUN=1, icesql's default on
    # a local master: these FILES sinks then start no Spark); False, Spark's query on local[2];
    # None, as the environment says
    local_run: bool | None = None

    def executor(self) -> str:
        local = self.local_run if self.local_run is not None else os.environ.get("ICESQL_LOCAL_RUN", "1") != "0"
        return "in icesql's own process (no Spark)" if local else "Spark's query on `local[2]`"

    def describe(self) -> str:
        plan = (
            f"plan={','.join(self.plan)}"
            if self.plan
            else f"minutes={self.minutes:g} min_kills={self.min_kills} kinds={','.join(self.kinds)}"
        )
        return (
            f"seed={self.seed} {plan} home_loss_rounds={self.home_loss_rounds} "
            f"token_lifetime={self.token_lifetime}s sts_lifetime={self.sts_lifetime}s "
            f"kill_burst={self.kill_burst[0]}-{self.kill_burst[1]} recovery_timeout={self.recovery_timeout:g}s "
            f"catalog_timeout={self.catalog_timeout:g}s local_run={self.local_run}"
        )


@dataclass
class SoakResult:
    config: SoakConfig
    command: str
    started_at: str
    duration: float = 0.0
    faults: list[FaultRecord] = field(default_factory=list)
    runs: list[ChildRun] = field(default_factory=list)
    skipped_kinds: dict[str, str] = field(default_factory=dict)
    checks: list[TableCheck] = field(default_factory=list)  # after the main run
    home_loss_checks: list[list[TableCheck]] = field(default_factory=list)  # after each round
    input_files: int = 0
    input_rows: int = 0  # append rows + changes fed
    foreign_rows: int = 0
    commits: Counter[str] = field(default_factory=Counter)  # per sink
    rows_committed: Counter[str] = field(default_factory=Counter)  # per sink, from commit lines
    conflict_lines: int = 0
    token_requests: int = 0
    rejected_401: int = 0  # catalog answers 401 (an expired token) seen by the proxy
    role_requests: int = 0  # STS AssumeRole calls seen by the proxy
    refused_keys: int = 0  # S3 answers InvalidAccessKeyId (an expired role session's key)
    proxy_stats: dict[str, Any] = field(default_factory=dict)
    drain_ok: bool = False
    drain_runs: int = 0
    notes: list[str] = field(default_factory=list)
    workdir: str = ""
    code: str = ""  # the icesql code the sinks ran: commit, branch, local changes

    # ---------------------------------------------------------------- figures
    def kills(self) -> int:
        return sum(int(f.params.get("kills_done", 0)) for f in self.faults)

    def restarts(self) -> Counter[str]:
        c: Counter[str] = Counter()
        for r in self.runs[1:]:
            c[r.command] += 1
        return c

    def sink_failures(self) -> list[ChildRun]:
        return [r for r in self.runs if r.ended_because == "failed"]

    def stalls(self) -> int:
        return sum(f.stalls for f in self.faults)

    def tracebacks(self) -> int:
        return sum(len(r.tracebacks) for r in self.runs)

    def java_traces(self) -> int:
        return sum(1 for r in self.runs if r.java_traces)

    def lost(self) -> int:
        return sum(c.lost for c in self.checks)

    def duplicated(self) -> int:
        return sum(c.duplicated + c.unexpected for c in self.checks)

    def stale(self) -> int:
        return sum(c.stale for c in self.checks)

    def exactly_once(self) -> bool:
        return bool(self.checks) and all(c.equals_replay and c.duckdb_equals_datafusion for c in self.checks)

    def longest_recovery(self) -> FaultRecord | None:
        done = [f for f in self.faults if f.recovery_seconds is not None and f.kind != "home_loss"]
        return max(done, key=lambda f: f.recovery_seconds or 0.0, default=None)

    def longest_outage(self) -> FaultRecord | None:
        done = [f for f in self.faults if f.outage_seconds is not None and f.kind != "home_loss"]
        return max(done, key=lambda f: f.outage_seconds or 0.0, default=None)

    def unrecovered(self) -> list[FaultRecord]:
        return [f for f in self.faults if f.recovered is None]

    def transient_failures(self) -> list[ChildRun]:
        """Runs that failed while a fault the sink should ride out was in progress (every kind
        but a kill, whose exit is the harness's own, and a corrupted staging file)."""
        by_index = {f.index: f for f in self.faults}
        out = []
        for r in self.sink_failures():
            f = by_index.get(r.fault) if r.fault is not None else None
            if f is not None and f.kind not in ("kill", "stop", "staging_corrupt", "home_loss"):
                out.append(r)
        return out

    def failed_stops(self) -> list[FaultRecord]:
        """Clean stops (SIGTERM) that did not end with exit code 0."""
        return [f for f in self.faults if f.kind == "stop" and f.params.get("rc", 0) != 0]


# --------------------------------------------------------------------------- input


class Input:
    """The generated input and its independent replay."""

    def __init__(self, base: Path, seed: int, events_rows: int, cdc_changes: int) -> None:
        self.events_dir = base / "in" / "events"
        self.cdc_dir = base / "in" / "cdc"
        self.events_dir.mkdir(parents=True, exist_ok=True)
        self.cdc_dir.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(seed * 7919 + 1)
        self.changelog = Changelog(seed, keys_per_region=60)
        self.events_rows = events_rows
        self.cdc_changes = cdc_changes
        self.events: list[tuple[Any, ...]] = []  # (id, ts, v), in the table's column order
        self.foreign_events: list[tuple[Any, ...]] = []
        self.foreign_orders: dict[tuple[str, int], dict[str, Any]] = {}
        self.files = 0
        self.next_event_file = 0
        self.mtime_base = time.time() - 3600

    def feed(self) -> None:
        """One JSON file for the append sink and one Debezium file for the upsert sink."""
        k = self.next_event_file
        self.next_event_file += 1
        rows = []
        for j in range(self.events_rows):
            i = k * self.events_rows + j
            ts = dt.datetime(2024, 3, 1 + i % 3, i % 24, (i * 7) % 60)
            rows.append({"id": i, "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "v": f"f{k}-{j}"})
            self.events.append((i, ts, f"f{k}-{j}"))
        final = self.events_dir / f"events-{k:05d}.json"
        tmp = self.events_dir / f".events-{k:05d}.json.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.replace(tmp, final)
        # one file per round: files of different micro-batches never interleave their LSNs
        rnd = self.changelog.next_round(self.cdc_changes, n_files=1)
        write_round(self.cdc_dir, rnd, self.mtime_base)
        self.files += 2

    @property
    def changes(self) -> list[Change]:
        return self.changelog.changes

    def input_rows(self) -> int:
        return len(self.events) + len(self.changes)

    def expected_events(self) -> list[tuple[Any, ...]]:
        return sorted(self.events + self.foreign_events, key=repr)

    def expected_orders(self) -> dict[tuple[str, int], tuple[Any, ...]]:
        state = expected_state(self.changes)
        out: dict[tuple[str, int], tuple[Any, ...]] = {}
        for key, row in {**state, **self.foreign_orders}.items():
            ts = dt.datetime.strptime(row["ts"], "%Y-%m-%dT%H:%M:%SZ")
            out[key] = (row["region"], row["id"], row["name"], row["qty"], ts)
        return out


# --------------------------------------------------------------------------- icesql runs


class Child:
    """One icesql CLI process in its own process group, its output timestamped line by line."""

    def __init__(self, soak: Soak, run: ChildRun, argv: list[str]) -> None:
        self.soak = soak
        self.run = run
        self.killed_by_harness = False
        self.log = open(soak.logdir / f"run-{run.index:04d}.log", "w", encoding="utf-8")  # noqa: SIM115
        self.log.write(f"$ {shlex.join(argv)}\n")
        self.log.flush()
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env["PYSPARK_PYTHON"] = PY
        env["PYSPARK_DRIVER_PYTHON"] = PY
        env.pop("ICESQL_HOME", None)
        env["ICESQL_CATALOG_TIMEOUT"] = f"{soak.cfg.catalog_timeout:g}"
        if soak.cfg.local_run is not None:
            env["ICESQL_LOCAL_RUN"] = "1" if soak.cfg.local_run else "0"
        self.proc = subprocess.Popen(
            argv,
            cwd=soak.base,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read, name=f"soak-run-{run.index}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            now = time.monotonic()
            self.log.write(f"{now - self.soak.t0:9.2f} | {line}\n")
            self.log.flush()
            self.soak._on_line(self, now, line)
        self.log.flush()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group (driver, JVM), like a machine crash."""
        self.killed_by_harness = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def terminate(self, timeout: float = 90.0, *, group: bool = False) -> int:
        """SIGTERM (a clean stop: final commit, exit 0), then SIGKILL after ``timeout``.
        ``group``: to the whole process group (JVM included), as systemd does by default."""
        self.killed_by_harness = True  # an exit we asked for
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.proc.pid, signal.SIGTERM)
            else:
                os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.run.ended_because = "did not stop after SIGTERM; killed"
            self.kill()
            return self.proc.wait()

    def reap(self) -> None:
        """After the process ended: kill what is left of its group (a JVM), close the log."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.reader.join(timeout=10)
        self.log.close()


# --------------------------------------------------------------------------- the soak


class Soak:
    def __init__(self, config: SoakConfig, command: str = "") -> None:
        self.cfg = config
        self.rng = random.Random(config.seed)  # the fault schedule and its parameters
        self.timing = random.Random(config.seed + 1)  # feeder timing
        self.t0 = time.monotonic()
        self.lock = threading.RLock()
        own = config.workdir is None
        self.base = Path(config.workdir or tempfile.mkdtemp(prefix="icesql-soak-"))
        self._own_workdir = own
        self.base.mkdir(parents=True, exist_ok=True)
        self.logdir = self.base / "logs"
        self.logdir.mkdir(exist_ok=True)
        self.home = self.base / "home"
        self.home.mkdir(exist_ok=True)
        self.tmpfs = False
        self.result = SoakResult(
            config=config,
            command=command or default_command(config),
            started_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            workdir=str(self.base),
            code=code_version(),
        )
        self.input = Input(self.base, config.seed, config.events_rows, config.cdc_changes)
        self.weed: WeedServer | None = None
        self.proxy: FaultProxy | None = None
        self.child: Child | None = None
        self.current: FaultRecord | None = None
        self.commit_times: dict[str, list[float]] = {s: [] for s in SINKS}
        self.next_feed = 0.0
        self.feeding = True
        self.restart_at: float | None = None
        self.run_count = 0
        self.commands_cycle = 0
        self.failures_since: dict[int, int] = {}
        self.auto_restart = True  # the operator restarts runs that end; off while draining
        self.kills_only = False  # past ``minutes``: only kills (in bursts), until ``min_kills``
        self._tb: list[str] | None = None

    # ------------------------------------------------------------------ setup / teardown
    def setup(self) -> None:
        self._mount_tmpfs()
        self.weed = WeedServer.start(
            env={"ICEBERG_OAUTH_TOKEN_EXPIRY": str(self.cfg.token_lifetime)},
            sts_seconds=self.cfg.sts_lifetime or None,
        )
        self.proxy = FaultProxy(
            {"s3": ("127.0.0.1", self.weed.s3_port), "rest": ("127.0.0.1", self.weed.iceberg_port)},
            seed=self.cfg.seed,
            watch={
                "rest": [b"POST /v1/oauth/tokens", b"HTTP/1.1 401"],
                "s3": [b"Action=AssumeRole", b"<Code>InvalidAccessKeyId</Code>"],
            },
        ).start()
        (self.base / "pipeline.sql").write_text(self.pipeline_sql())
        for _ in range(2):
            self.input.feed()
        self.next_feed = time.monotonic() + self._feed_gap()

    def _mount_tmpfs(self) -> None:
        if "disk_full" not in self._enabled_kinds():
            return
        why = ""
        if os.geteuid() != 0:
            why = "needs root to mount a tmpfs"
        else:
            out = subprocess.run(
                [
                    "mount",
                    "-t",
                    "tmpfs",
                    "-o",
                    f"size={self.cfg.tmpfs_mb}m,mode=0700",
                    "tmpfs",
                    str(self.home),
                ],
                capture_output=True,
                text=True,
            )
            if out.returncode == 0:
                self.tmpfs = True
                return
            why = f"mount -t tmpfs failed: {(out.stderr or out.stdout).strip()[:200]}"
        self.result.skipped_kinds["disk_full"] = why

    def teardown(self) -> None:
        if self.child is not None:
            if self.child.alive:
                self.child.kill()
            self._ended(self.child)
        if self.proxy is not None:
            self.result.proxy_stats = self.proxy.snapshot()
            rest = self.result.proxy_stats.get("rest", {})
            self.result.token_requests = int(rest.get("seen:POST /v1/oauth/tokens", 0))
            self.result.rejected_401 = int(rest.get("seen:HTTP/1.1 401", 0))
            s3 = self.result.proxy_stats.get("s3", {})
            self.result.role_requests = int(s3.get("seen:Action=AssumeRole", 0))
            self.result.refused_keys = int(s3.get("seen:<Code>InvalidAccessKeyId</Code>", 0))
            self.proxy.stop()
        if self.weed is not None:
            self.weed.keep_workdir = self.cfg.keep_workdir
            self.weed.stop()
        if self.tmpfs:
            subprocess.run(["umount", "-l", str(self.home)], capture_output=True)
        if self._own_workdir and not self.cfg.keep_workdir:
            shutil.rmtree(self.base, ignore_errors=True)

    def pipeline_sql(self) -> str:
        assert self.weed is not None and self.proxy is not None
        w, p = self.weed, self.proxy
        role = f",\n    ASSUME ROLE ARN = '{ROLE_ARN}'" if self.cfg.sts_lifetime else ""
        return f"""-- soak pipeline: every address is the fault proxy's
CREATE SECRET IF NOT EXISTS soak_sk AS '{w.secret_key}';
CREATE CONNECTION IF NOT EXISTS soak_s3 TO AWS (
    ACCESS KEY ID = '{w.access_key}', SECRET ACCESS KEY = SECRET soak_sk,
    ENDPOINT = '{p.url("s3")}', REGION = '{w.region}'{role}
);
CREATE CONNECTION IF NOT EXISTS soak_lake TO ICEBERG CATALOG (
    TYPE = 'rest', URI = '{p.url("rest")}', WAREHOUSE = '{w.table_bucket}',
    USER = '{w.access_key}', PASSWORD = SECRET soak_sk
);
CREATE SOURCE IF NOT EXISTS events FROM FILES 'in/events/'
    (FORMAT = 'json', SCHEMA = '{EVENTS_SCHEMA}', MAX FILES PER TRIGGER = 4);
CREATE SOURCE IF NOT EXISTS orders FROM FILES 'in/cdc/'
    (FORMAT = 'debezium-json', SCHEMA = '{CDC_SCHEMA}', MAX FILES PER TRIGGER = 4);
CREATE SINK IF NOT EXISTS events_sink FROM events
    INTO ICEBERG CATALOG soak_lake (NAMESPACE = 'soak', TABLE = 'events')
    USING AWS CONNECTION soak_s3
    PARTITION BY (day(ts));
CREATE SINK IF NOT EXISTS orders_sink FROM orders
    INTO ICEBERG CATALOG soak_lake (NAMESPACE = 'soak', TABLE = 'orders')
    USING AWS CONNECTION soak_s3
    KEY (region, id) MODE UPSERT
    PARTITION BY (region)
    WITH (COMMIT INTERVAL = '{self.cfg.commit_interval}');
"""

    def _enabled_kinds(self) -> tuple[str, ...]:
        kinds = [parse_plan_item(i)[0] for i in self.cfg.plan] if self.cfg.plan else self.cfg.kinds
        return tuple(k for k in dict.fromkeys(kinds) if k in KINDS)

    # ------------------------------------------------------------------ icesql runs
    def _argv(self, command: str) -> list[str]:
        argv = [PY, "-m", "icesql", "--home", str(self.home), "--spark-master", "local[2]"]
        for k, v in self.cfg.spark_conf:
            argv += ["--conf", f"{k}={v}"]
        if command.startswith("run"):
            argv += ["run", "pipeline.sql"]
        else:
            argv += ["serve"]
        if command.endswith("--once"):
            argv.append("--once")
        return argv

    def start_child(self, command: str | None = None) -> Child:
        assert self.child is None or not self.child.alive
        if self.child is not None:
            self._ended(self.child)
        if command is None:
            # the first run creates the objects; later ones alternate between run and serve
            command = "run" if self.run_count == 0 or self.commands_cycle % 2 == 0 else "serve"
            self.commands_cycle += 1
        self.run_count += 1
        run = ChildRun(index=self.run_count, command=command, started=time.monotonic())
        with self.lock:
            self.result.runs.append(run)
        self.child = Child(self, run, self._argv(command))
        self.restart_at = None
        return self.child

    def _ended(self, child: Child) -> None:
        """Record how a run ended (once)."""
        run = child.run
        if run.ended is not None:
            return
        child.reap()
        run.ended = time.monotonic()
        run.rc = child.proc.returncode
        run.fault = self.current.index if self.current is not None else None
        if run.ended_because:
            pass
        elif child.killed_by_harness:
            run.ended_because = "killed by the harness" if run.rc == -signal.SIGKILL else "stopped"
        elif run.rc == 0:
            run.ended_because = "exited"
        else:
            run.ended_because = "failed"
        if run.ended_because == "failed" and self.current is not None:
            self.current.sink_exits.append(run.error or f"exit code {run.rc} without an error line")
            self.failures_since[self.current.index] = self.failures_since.get(self.current.index, 0) + 1

    def _on_line(self, child: Child, now: float, line: str) -> None:
        run = child.run
        with self.lock:
            m = COMMIT_RE.search(line)
            if m:
                sink = m.group(1)
                self.commit_times.setdefault(sink, []).append(now)
                self.result.commits[sink] += 1
                self.result.rows_committed[sink] += int(m.group(4))
                if run.first_commit is None:
                    run.first_commit = now
            if "commit conflict on" in line:
                self.result.conflict_lines += 1
                if self.current is not None:
                    self.current.conflicts_seen += 1
            m = SINK_FAIL_RE.search(line)
            if m:
                run.sink_failures.append(f"sink {m.group(1)} {m.group(2)}: {m.group(3)}")
                if not run.command.endswith("--once") and run.sink_failed_at is None:
                    run.sink_failed_at = now
                    run.error = run.error or line.strip()
            if ERROR_LINE_RE.search(line):
                run.error = line.strip()
            # Python tracebacks (without -v there should be none)
            if line.startswith("Traceback (most recent call last)"):
                self._tb = [line]
                if self.current is not None:
                    self.current.tracebacks += 1
            elif self._tb is not None:
                self._tb.append(line)
                if line and not line.startswith((" ", "\t")) and len(self._tb) > 2:
                    run.tracebacks.append("\n".join(self._tb[:3] + ["  ..."] + self._tb[-3:]))
                    self._tb = None
            if JAVA_AT_RE.match(line):
                if run.java_traces == 0 and self.current is not None:
                    self.current.java_traces += 1
                run.java_traces += 1
            if ("Exception" in line or "Error" in line) and (
                line.startswith(("java.", "org.apache", "Exception in thread", "py4j."))
                or "java.lang." in line
            ):
                if len(run.java_excerpts) < 5:
                    run.java_excerpts.append(line.strip()[:300])

    # ------------------------------------------------------------------ the operator loop
    def _feed_gap(self) -> float:
        return self.timing.uniform(*self.cfg.feed_interval)

    def tick(self) -> None:
        """Feed input when due; restart an icesql run that ended on its own."""
        now = time.monotonic()
        if self.feeding and now >= self.next_feed:
            self.input.feed()
            self.next_feed = now + self._feed_gap()
        child = self.child
        if child is not None and not child.alive and child.run.ended is None:
            self._ended(child)
        if not self.auto_restart:
            return
        if child is not None and child.alive and child.run.sink_failed_at is not None:
            # ``run``/``serve`` with a sink failed for good: the operator restarts the service (a
            # clean stop: the other sinks commit what they staged), as if it had exited failing
            child.run.ended_because = "failed"
            child.terminate()
            self._ended(child)
        if child is not None and child.run.ended is not None and self.restart_at is None:
            self.restart_at = now + self.cfg.restart_delay
        if self.restart_at is not None and now >= self.restart_at:
            self.start_child()

    def supervise(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.tick()
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))

    def recovered_since(self, t: float) -> float | None:
        """When both sinks had committed after ``t`` (None if one has not yet)."""
        with self.lock:
            firsts = []
            for s in SINKS:
                after = [x for x in self.commit_times.get(s, []) if x > t]
                if not after:
                    return None
                firsts.append(after[0])
        return max(firsts)

    def wait_recovery(self, rec: FaultRecord, *, remedy: Any = None) -> None:
        """Until both sinks committed after the fault ended.

        A running icesql that has not made both sinks commit since the fault ended is **stalled**
        when it sat idle (its process group used less than ``stall_cpu`` seconds of CPU in the
        last ``stall_idle`` seconds, after being up ``stall_idle`` seconds: a hung call, not a
        slow start on a busy machine) or when ``recovery_timeout`` passed since the later of the
        fault's end and its start. A stall is recorded, the run killed and restarted. Runs that
        exit are restarted by ``tick``; ``remedy()`` is what an operator does after two failed
        restarts. Without recovery after 2 x ``recovery_timeout`` the fault counts as
        unrecovered."""
        assert rec.ended is not None
        timeout = self.cfg.recovery_timeout
        give_up = rec.ended + 2 * timeout
        remedied = False
        cpu: list[tuple[float, float]] = []  # (time, CPU seconds) of the current run
        watched: Child | None = None
        while True:
            self.tick()
            got = self.recovered_since(rec.ended)
            if got is not None:
                rec.recovered = got
                return
            if remedy is not None and not remedied and self.failures_since.get(rec.index, 0) >= 2:
                remedied = True
                rec.actions.append(remedy())
            now = time.monotonic()
            child = self.child
            if child is not None and child.alive:
                if watched is not child:
                    watched, cpu = child, []
                cpu.append((now, group_cpu_seconds(child.proc.pid)))
                while cpu and cpu[0][0] < now - self.cfg.stall_idle:
                    cpu.pop(0)
                up = now - max(rec.ended, child.run.started)
                idle = (
                    up >= self.cfg.stall_idle
                    and now - cpu[0][0] >= self.cfg.stall_idle - 1
                    and cpu[-1][1] - cpu[0][1] < self.cfg.stall_cpu
                )
                if idle or up > timeout:
                    rec.stalls += 1
                    why = (
                        f"idle (under {self.cfg.stall_cpu:g} s of CPU in {self.cfg.stall_idle:g} s)"
                        if idle
                        else f"busy for {timeout:g} s"
                    )
                    rec.notes.append(
                        f"stall: icesql running, {why}, no commit of both sinks since the fault; "
                        f"last output: {self._last_lines(3)}"
                    )
                    child.run.ended_because = "killed by the harness (stalled)"
                    child.kill()
                    self._ended(child)
                    rec.actions.append("killed the stalled run and restarted it")
                    self.start_child()
            if now > give_up:
                rec.notes.append(f"no recovery within {give_up - rec.ended:.0f}s")
                return
            time.sleep(0.5)

    def _last_lines(self, n: int) -> str:
        if self.child is None:
            return "-"
        path = self.logdir / f"run-{self.child.run.index:04d}.log"
        try:
            text = path.read_text(errors="replace").splitlines()[1:]
            lines = [ln.split("| ", 1)[-1] for ln in text if ln.split("| ", 1)[-1].strip()][-n:]
        except OSError:
            return "-"
        return " / ".join(ln.strip()[:160] for ln in lines)

    def wait_started(self, timeout: float = 240.0) -> None:
        """Until both sinks have committed once (the first run creates the tables)."""
        deadline = time.monotonic() + timeout
        while self.recovered_since(self.t0) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the sinks did not commit within {timeout:g}s; logs in {self.logdir}")
            self.tick()
            time.sleep(0.1)

    # ------------------------------------------------------------------ schedule
    def schedule(self) -> Iterator[str]:
        if self.cfg.plan:
            yield from self.cfg.plan
            return
        kinds = [k for k in self._enabled_kinds() if k not in self.result.skipped_kinds]
        first = kinds[:]
        self.rng.shuffle(first)
        yield from first
        weights = [WEIGHTS[k] for k in kinds]
        while True:
            yield self.rng.choices(kinds, weights)[0]

    def run_main(self) -> None:
        self.start_child("run")
        self.wait_started()
        stop_at = None if self.cfg.plan else time.monotonic() + self.cfg.minutes * 60
        self.kills_only = False
        for item in self.schedule():
            kind, overrides = parse_plan_item(item)
            if stop_at is not None and time.monotonic() >= stop_at:
                # past the time: only kills, until there were ``min_kills`` of them
                if self.result.kills() >= self.cfg.min_kills:
                    break
                self.kills_only = True
            if self.kills_only and kind != "kill":
                continue
            if kind in self.result.skipped_kinds:
                continue
            self.supervise(self.rng.uniform(2, 6))
            rec = FaultRecord(
                index=len(self.result.faults), kind=kind, params=dict(overrides), started=time.monotonic()
            )
            self.result.faults.append(rec)
            self.current = rec
            try:
                remedy = getattr(self, f"fault_{kind}")(rec)
            except Exception as e:  # noqa: BLE001 - a harness problem is reported, the soak goes on
                rec.notes.append(f"harness error while injecting: {type(e).__name__}: {e}")
                remedy = None
            if rec.ended is None:
                rec.ended = time.monotonic()
            self.wait_recovery(rec, remedy=remedy)
        self.current = None

    # ------------------------------------------------------------------ faults
    def _draw(self, rec: FaultRecord, name: str, draw: Any) -> Any:
        """A fault parameter: the plan's override, else a draw from the seeded schedule."""
        if name not in rec.params:
            rec.params[name] = draw()
        return rec.params[name]

    def _target(self, rec: FaultRecord) -> str | list[str]:
        t = self._draw(rec, "target", lambda: self.rng.choice(["rest", "s3", "both"]))
        return ["rest", "s3"] if t == "both" else str(t)

    def _seconds(self, rec: FaultRecord, lo: float, hi: float) -> float:
        return float(self._draw(rec, "seconds", lambda: round(self.rng.uniform(lo, hi), 2)))

    def fault_kill(self, rec: FaultRecord) -> None:
        if "delays" in rec.params:
            rec.params["times"] = len(rec.params["delays"])
        lo, hi = self.cfg.kill_burst
        times = int(
            self._draw(
                rec,
                "times",
                lambda: self.rng.randint(lo, hi) if self.kills_only else self.rng.choice([1, 1, 2, 3]),
            )
        )
        delays = self._draw(
            rec, "delays", lambda: [round(self.rng.uniform(0.5, 20.0), 2) for _ in range(times)]
        )
        rec.params["kills_done"] = 0
        for d in delays:
            if self.child is None or not self.child.alive:
                self.start_child()
            self.supervise(float(d))
            if self.child is not None and self.child.alive:
                self.child.kill()
                self._ended(self.child)
                rec.params["kills_done"] += 1
                self.start_child()  # the operator (a supervisor with no delay)
        rec.ended = time.monotonic()

    def fault_stop(self, rec: FaultRecord) -> None:
        """The operator stops the sink cleanly (SIGTERM: a deploy, a node drain) and starts it
        again. ``group``: SIGTERM to the whole process group, JVM included, as systemd's default
        ``KillMode=control-group`` does; else to icesql's process only (``kill PID``, Kubernetes).
        The stop must commit what is staged (reason ``shutdown``) and exit 0."""
        group = bool(self._draw(rec, "group", lambda: self.rng.random() < 0.5))
        after = float(self._draw(rec, "after", lambda: round(self.rng.uniform(0.5, 10.0), 2)))
        self.supervise(after)
        child = self.child
        if child is None or not child.alive:
            rec.notes.append("no running sink to stop")
            return
        t = time.monotonic()
        rc = child.terminate(group=group)
        rec.params.update(rc=rc, stop_seconds=round(time.monotonic() - t, 2))
        shutdown = self._grep_run(child.run, "reason=shutdown")
        rec.params["shutdown_commits"] = len(shutdown)
        self._ended(child)
        if rc != 0:
            child.run.ended_because = f"clean stop failed (exit {rc})"
            rec.sink_exits.append(child.run.error or f"exit code {rc} after SIGTERM")
            rec.notes.append(f"SIGTERM ({'group' if group else 'process'}) gave exit {rc}: {child.run.error}")
        self.start_child()
        rec.ended = time.monotonic()

    def fault_weed_restart(self, rec: FaultRecord) -> None:
        assert self.weed is not None
        down = float(self._draw(rec, "down_seconds", lambda: round(self.rng.uniform(1.0, 8.0), 2)))
        self.weed.kill()
        self.supervise(down)
        t = time.monotonic()
        self.weed.restart()
        rec.params["restart_seconds"] = round(time.monotonic() - t, 2)
        rec.ended = time.monotonic()

    def _window(self, rec: FaultRecord, seconds: float) -> None:
        self.supervise(seconds)
        assert self.proxy is not None
        self.proxy.clear()
        rec.ended = time.monotonic()

    def fault_net_latency(self, rec: FaultRecord) -> None:
        assert self.proxy is not None
        target = self._target(rec)
        lat = float(self._draw(rec, "latency", lambda: round(self.rng.uniform(0.05, 0.6), 3)))
        jit = float(self._draw(rec, "jitter", lambda: round(self.rng.uniform(0.0, 0.3), 3)))
        dur = self._seconds(rec, 5, 20)
        self.proxy.latency(lat, jit, only=target)
        self._window(rec, dur)

    def fault_net_reset(self, rec: FaultRecord) -> None:
        assert self.proxy is not None
        target = self._target(rec)
        times = int(self._draw(rec, "times", lambda: self.rng.randint(1, 3)))
        gaps = [round(self.rng.uniform(0.5, 3.0), 2) for _ in range(times)]
        rec.params["reset"] = 0
        for g in gaps:
            self.supervise(g)
            rec.params["reset"] += self.proxy.reset_connections(only=target)
        rec.ended = time.monotonic()

    def fault_net_refuse(self, rec: FaultRecord) -> None:
        assert self.proxy is not None
        target = self._target(rec)
        dur = self._seconds(rec, 2, 12)
        self.proxy.drop_new(dur, only=target)
        self._window(rec, dur)

    def fault_net_reset_new(self, rec: FaultRecord) -> None:
        assert self.proxy is not None
        target = self._target(rec)
        dur = self._seconds(rec, 2, 8)
        self.proxy.drop_new(dur, how="reset", only=target)
        self._window(rec, dur)

    def fault_net_blackhole(self, rec: FaultRecord) -> None:
        assert self.proxy is not None
        target = self._target(rec)
        dur = self._seconds(rec, 3, 15)
        self.proxy.blackhole(dur, only=target)
        self._window(rec, dur)

    def fault_net_stall(self, rec: FaultRecord) -> None:
        assert self.proxy is not None
        target = self._target(rec)
        dur = self._seconds(rec, 3, 15)
        self.proxy.blackhole(dur, mode="stall", only=target)
        self._window(rec, dur)

    def fault_net_cut(self, rec: FaultRecord) -> None:
        assert self.proxy is not None
        target = self._target(rec)
        nbytes = int(self._draw(rec, "nbytes", lambda: self.rng.choice([0, 20, 200, 2000, 20000])))
        count = int(self._draw(rec, "count", lambda: self.rng.randint(1, 3)))
        targets = target if isinstance(target, list) else [target]
        before = {t: self.proxy.snapshot()[t].get("responses_cut", 0) for t in targets}
        self.proxy.cut_response_after(nbytes, count, only=target)
        # the fault is over once its cuts happened (or 20 s passed without traffic to cut)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            cuts = sum(self.proxy.snapshot()[t].get("responses_cut", 0) - before[t] for t in targets)
            if cuts >= count * len(targets):
                break
            self.supervise(0.2)
        self.proxy.clear()
        rec.params["cut"] = {t: self.proxy.snapshot()[t].get("responses_cut", 0) - before[t] for t in targets}
        rec.ended = time.monotonic()

    def fault_conflict(self, rec: FaultRecord) -> None:
        """A foreign writer appends to the sinks' tables, straight to weed, while they commit."""
        n = int(self._draw(rec, "appends", lambda: self.rng.randint(3, 5)))
        which = self._draw(rec, "tables", lambda: self.rng.choice(["events", "orders", "both"]))
        gaps = [round(self.rng.uniform(0.3, 1.5), 2) for _ in range(n)]
        rec.params.update(foreign_rows=0, foreign_retries=0)
        for g in gaps:
            self.supervise(g)
            for t in ("events", "orders") if which == "both" else (which,):
                rows, retries = self._foreign_append(t)
                rec.params["foreign_rows"] += rows
                rec.params["foreign_retries"] += retries
        rec.ended = time.monotonic()

    def _foreign_append(self, table_name: str) -> tuple[int, int]:
        import pyarrow as pa
        from pyiceberg.exceptions import CommitFailedException

        k = self.result.foreign_rows
        retries = 0
        for attempt in range(20):
            try:
                table = self.verify_catalog().load_table(f"soak.{table_name}")
                schema = table.schema().as_arrow()
                ts = dt.datetime(2024, 3, 2, 12, 0)
                if getattr(schema.field("ts").type, "tz", None):
                    ts = ts.replace(tzinfo=dt.timezone.utc)
                if table_name == "events":
                    data = {"id": [-1 - k], "ts": [ts], "v": [f"foreign-{k}"]}
                else:
                    data = {
                        "region": [FOREIGN_REGION],
                        "id": [k],
                        "name": [f"foreign-{k}"],
                        "qty": [k],
                        "ts": [ts],
                    }
                arrow = pa.Table.from_pydict({f.name: data[f.name] for f in schema}, schema=schema)
                table.append(arrow)
                break
            except CommitFailedException:
                retries += 1
                time.sleep(0.2 * (attempt + 1))
        else:
            return 0, retries
        naive = dt.datetime(2024, 3, 2, 12, 0)
        if table_name == "events":
            self.input.foreign_events.append((-1 - k, naive, f"foreign-{k}"))
        else:
            self.input.foreign_orders[(FOREIGN_REGION, k)] = {
                "region": FOREIGN_REGION,
                "id": k,
                "name": f"foreign-{k}",
                "qty": k,
                "ts": naive.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        self.result.foreign_rows += 1
        return 1, retries

    def fault_disk_full(self, rec: FaultRecord) -> None:
        dur = self._seconds(rec, 5, 15)
        ballast = self.home / ".soak-ballast"
        filled = 0
        fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for size in (1 << 20, 4096, 1):
                block = b"\0" * size
                with contextlib.suppress(OSError):
                    while True:
                        filled += os.write(fd, block)
        finally:
            os.close(fd)
        rec.params["ballast_mb"] = round(filled / (1 << 20), 1)
        self.supervise(dur)
        ballast.unlink(missing_ok=True)
        rec.ended = time.monotonic()

    def fault_staging_corrupt(self, rec: FaultRecord) -> Any:
        """Kill the sink while a batch is staged, damage the staging entry, restart."""
        found: list[Path] = []
        deadline = time.monotonic() + 90
        attempts = 0
        while time.monotonic() < deadline:
            staged = sorted(self.home.glob("sinks/*/staging/[0-9]*.json"))
            if staged and self.child is not None and self.child.alive:
                attempts += 1
                self.child.kill()
                self._ended(self.child)
                found = sorted(self.home.glob("sinks/*/staging/[0-9]*.json"))
                if found:
                    break
                self.start_child()
            self.supervise(0.1)
        rec.params["kill_attempts"] = attempts
        rec.params["kills_done"] = attempts
        if not found:
            rec.notes.append("no staged entry was caught within 90 s; nothing corrupted")
            if self.child is None or not self.child.alive:
                self.start_child()
            rec.ended = time.monotonic()
            return None
        victim = self.rng.choice(found)
        original = victim.read_bytes()
        how = self._draw(rec, "how", lambda: self.rng.choice(["truncate", "empty", "garbage"]))
        if how == "truncate":
            damaged = original[: self.rng.randint(1, max(1, len(original) - 1))]
        elif how == "empty":
            damaged = b""
        else:
            at = self.rng.randrange(0, max(1, len(original) - 16))
            damaged = original[:at] + bytes(self.rng.randrange(256) for _ in range(16)) + original[at + 16 :]
        victim.write_bytes(damaged)
        rec.params.update(file=str(victim.relative_to(self.home)), how=how, size=len(original))
        self.start_child()
        rec.ended = time.monotonic()

        def restore() -> str:
            if victim.exists() and victim.read_bytes() == damaged:
                victim.write_bytes(original)
                return f"operator restored the original {victim.name} after two failed restarts"
            return f"operator found {victim.name} gone or changed; nothing restored"

        return restore

    # ------------------------------------------------------------------ the end
    def stop_and_drain(self) -> None:
        """Stop feeding, clear faults, SIGTERM the running sink, then ``run --once`` until it
        exits 0 (every input file committed)."""
        self.feeding = False
        self.auto_restart = False
        assert self.proxy is not None and self.weed is not None
        self.proxy.clear()
        if self.weed.process is None or self.weed.process.poll() is not None:
            self.weed.restart()
        if self.child is not None and self.child.alive:
            rc = self.child.terminate()
            self._ended(self.child)
            if rc != 0:
                self.result.notes.append(
                    f"the final clean stop (SIGTERM to icesql's process) exited {rc}: {self.child.run.error}"
                )
        for _ in range(self.cfg.drain_attempts):
            rc = self.run_once("run --once")
            self.result.drain_runs += 1
            if rc == 0:
                self.result.drain_ok = True
                return
            self.result.notes.append(
                f"drain run {self.result.runs[-1].index} exited {rc}: {self.result.runs[-1].error}"
            )
            self.supervise(self.cfg.restart_delay)

    def run_once(self, command: str) -> int:
        """A ``--once`` run to its end. It hangs when its process group sits idle (as a stall, see
        ``wait_recovery``) or runs past ``once_timeout``; then it is killed."""
        child = self.start_child(command)
        deadline = time.monotonic() + self.cfg.once_timeout
        cpu: list[tuple[float, float]] = []
        while child.alive:
            now = time.monotonic()
            cpu.append((now, group_cpu_seconds(child.proc.pid)))
            while cpu and cpu[0][0] < now - self.cfg.stall_idle:
                cpu.pop(0)
            idle = (
                now - child.run.started >= self.cfg.stall_idle
                and now - cpu[0][0] >= self.cfg.stall_idle - 1
                and cpu[-1][1] - cpu[0][1] < self.cfg.stall_cpu
            )
            if idle or now > deadline:
                why = "idle" if idle else f"still running after {self.cfg.once_timeout:g}s"
                child.run.ended_because = f"hung ({why}); killed"
                self.result.notes.append(f"`{command}` (run {child.run.index}) hung ({why}); killed")
                child.kill()
                break
            time.sleep(0.5)
        self._ended(child)
        self.restart_at = None
        return child.run.rc if child.run.rc is not None else -1

    def verify_catalog(self) -> Any:
        assert self.weed is not None
        return self.weed.rest_catalog(name="soak-verify")

    def s3_props(self) -> dict[str, str]:
        assert self.weed is not None
        return self.weed.s3_properties()

    def verify(self) -> list[TableCheck]:
        from tests.support.readers import read_datafusion, read_duckdb

        cat = self.verify_catalog()
        out = []
        for name, expected_fn in (("events", self._check_events), ("orders", self._check_orders)):
            table = cat.load_table(f"soak.{name}")
            duck = read_duckdb(table.metadata_location, s3=self.s3_props())
            fusion = read_datafusion(table.metadata_location, s3=self.s3_props())
            out.append(expected_fn(duck, duck == fusion))
        return out

    def _check_events(self, rows: list[tuple[Any, ...]], same: bool) -> TableCheck:
        expected = self.input.expected_events()
        want = Counter(expected)
        got = Counter(rows)
        lost = sum((want - got).values())
        extra = got - want
        dup = sum(n - 1 for r, n in got.items() if r in want and n > 1)
        unexpected = sum(n for r, n in extra.items() if r not in want)
        examples = [f"lost {r}" for r in list(want - got)[:3]]
        examples += [f"{n}x {r}" for r, n in list(got.items()) if n > 1][:3]
        return TableCheck(
            table="soak.events",
            expected_rows=len(expected),
            actual_rows=len(rows),
            lost=lost,
            duplicated=dup,
            stale=0,
            unexpected=unexpected,
            duckdb_equals_datafusion=same,
            equals_replay=sorted(rows, key=repr) == expected,
            examples=examples,
        )

    def _check_orders(self, rows: list[tuple[Any, ...]], same: bool) -> TableCheck:
        expected = self.input.expected_orders()
        by_key: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
        for r in rows:
            by_key.setdefault((r[0], r[1]), []).append(r)
        lost = [k for k in expected if k not in by_key]
        dup = sum(len(v) - 1 for v in by_key.values())
        unexpected = [k for k in by_key if k not in expected]
        stale = [k for k, v in by_key.items() if k in expected and len(v) == 1 and v[0] != expected[k]]
        examples = [f"lost key {k}" for k in lost[:3]] + [f"unexpected key {k}" for k in unexpected[:3]]
        examples += [f"stale {k}: {by_key[k][0]} != {expected[k]}" for k in stale[:3]]
        examples += [f"{len(v)} rows for {k}" for k, v in by_key.items() if len(v) > 1][:3]
        return TableCheck(
            table="soak.orders",
            expected_rows=len(expected),
            actual_rows=len(rows),
            lost=len(lost),
            duplicated=dup,
            stale=len(stale),
            unexpected=len(unexpected),
            duckdb_equals_datafusion=same,
            equals_replay=sorted(rows, key=repr) == sorted(expected.values(), key=repr),
            examples=examples,
        )

    def home_loss_phase(self) -> None:
        """``<home>/sinks/`` deleted between runs; new input; ``run --once``; verify again."""
        for r in range(self.cfg.home_loss_rounds):
            rec = FaultRecord(
                index=len(self.result.faults), kind="home_loss", params={"round": r}, started=time.monotonic()
            )
            self.result.faults.append(rec)
            self.current = rec
            for _ in range(2):
                self.input.feed()
            sinks = self.home / "sinks"
            rec.params["deleted_entries"] = sum(1 for _ in sinks.rglob("*")) if sinks.exists() else 0
            shutil.rmtree(sinks, ignore_errors=True)
            rec.ended = time.monotonic()
            rc = self.run_once("run --once")
            rec.params["rc"] = rc
            if rc == 0:
                rec.recovered = self.result.runs[-1].ended
            else:
                rec.notes.append(f"run --once after the loss exited {rc}")
            warnings = self._grep_run(self.result.runs[-1], "checkpoint")
            if warnings:
                rec.notes.append(f"icesql said: {warnings[0][:300]}")
            self.result.home_loss_checks.append(self.verify())
            self.current = None

    def _grep_run(self, run: ChildRun, needle: str) -> list[str]:
        path = self.logdir / f"run-{run.index:04d}.log"
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return []
        return [ln.split("| ", 1)[-1].strip() for ln in text.splitlines() if needle in ln and "| " in ln]

    # ------------------------------------------------------------------ all of it
    def run(self) -> SoakResult:
        t_start = time.monotonic()
        try:
            self.setup()
            self.run_main()
            self.stop_and_drain()
            self.result.checks = self.verify()
            if self.cfg.home_loss_rounds and self.result.drain_ok:
                self.home_loss_phase()
        finally:
            self.result.input_files = self.input.files
            self.result.input_rows = self.input.input_rows()
            self.result.duration = time.monotonic() - t_start
            self.teardown()
        return self.result


def code_version() -> str:
    """``<commit> (<branch>)`` of the icesql code under test, ``+ local changes`` when the product
    directories differ from the commit."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else ""

    commit = git("rev-parse", "--short=12", "HEAD")
    if not commit:
        return "unknown (not a git checkout)"
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    dirty = git("status", "--porcelain", "--", "icesql", "catalog_store", "grammar")
    return f"{commit} ({branch}){' + local changes' if dirty else ''}"


def group_cpu_seconds(pgid: int) -> float:
    """CPU time (user + system, seconds) of the live processes of process group ``pgid``."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        # fields after the name: state ppid pgrp session ... utime (12th) stime (13th)
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / tick


def parse_plan_item(item: str) -> tuple[str, dict[str, Any]]:
    """``kind`` or ``kind:name=value:name=value`` (values as JSON when they parse, else text), e.g.
    ``net_cut:target=rest:nbytes=20:count=2`` or ``kill:delays=[8]``."""
    kind, *pairs = item.split(":")
    params: dict[str, Any] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        try:
            params[name] = json.loads(value)
        except ValueError:
            params[name] = value
    return kind, params


def default_command(cfg: SoakConfig) -> str:
    args = f"--seed {cfg.seed}"
    args += f" --plan {','.join(cfg.plan)}" if cfg.plan else f" --minutes {cfg.minutes:g}"
    return f"PYTHONPATH=. .venv/bin/python -m tests.soak.harness {args}"


# --------------------------------------------------------------------------- report


def _fmt_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f} s"


def _norm_error(text: str) -> str:
    """One spelling per error message: ports, ids, numbers and paths masked."""
    t = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    t = re.sub(r"port=\d+", "port=PORT", t)
    t = re.sub(r"\bo\d+\.", "oN.", t)
    t = re.sub(r"0x[0-9a-f]+", "0x…", t)
    t = re.sub(r"/[\w./-]*(icesql-soak|sinks)/[\w./-]*", "<path>", t)
    t = re.sub(r"\b[0-9a-f]{16,}\b", "<id>", t)
    t = re.sub(r"\b\d{4,}\b", "N", t)
    return t.strip()


def write_report(result: SoakResult, path: Path | None = None, *, title: str = "Soak run") -> str:
    cfg = result.config
    lines: list[str] = []
    add = lines.append
    add(f"# {title}")
    add("")
    add(f"- **Seed:** {cfg.seed}")
    add(f"- **Command:** `{result.command}`")
    add(f"- **Configuration:** {cfg.describe()}")
    add(f"- **icesql code:** {result.code or 'unknown'}")
    add(f"- **Started:** {result.started_at}; **wall time:** {result.duration / 60:.1f} min")
    add(
        f"- **Setup:** `weed mini` behind the fault proxy (catalog URI and S3 ENDPOINT are the proxy's), "
        f"OAuth2 tokens living {cfg.token_lifetime} s, "
        + (
            f"storage credentials of a role assumed through weed's STS living {cfg.sts_lifetime} s, "
            if cfg.sts_lifetime
            else "storage with static keys, "
        )
        + f"catalog calls timing out after {cfg.catalog_timeout:g} s "
        f"(`ICESQL_CATALOG_TIMEOUT`), icesql home on "
        f"{'a ' + str(cfg.tmpfs_mb) + ' MiB tmpfs' if 'disk_full' not in result.skipped_kinds else 'the normal disk'}, "
        f"one APPEND sink (`soak.events`) and one UPSERT sink (`soak.orders`, KEY (region, id), "
        f"COMMIT INTERVAL {cfg.commit_interval}), running {cfg.executor()}."
    )
    add("")
    add("## Figures")
    add("")
    restarts = result.restarts()
    longest = result.longest_recovery()
    add("| figure | value |")
    add("|---|---|")
    add(f"| faults injected | {len(result.faults)} |")
    add(f"| SIGKILLs of the sink | {result.kills()} |")
    add(f"| input files | {result.input_files} |")
    add(f"| input rows (append rows + changes) | {result.input_rows} |")
    add(f"| foreign rows (conflicting writer) | {result.foreign_rows} |")
    for c in result.checks:
        add(f"| rows in `{c.table}` (expected / read) | {c.expected_rows} / {c.actual_rows} |")
    add(f"| rows committed per sink (from commit lines, replays included) | {dict(result.rows_committed)} |")
    add(f"| commits per sink | {dict(result.commits)} |")
    add(f"| **rows lost** | **{result.lost()}** |")
    add(f"| **rows duplicated** (extra copies + unexpected rows) | **{result.duplicated()}** |")
    add(f"| stale upsert keys | {result.stale()} |")
    add(
        f"| DuckDB = DataFusion = replay | {'yes' if result.exactly_once() else 'NO'} "
        f"({', '.join(f'{c.table}: ' + ('ok' if c.equals_replay and c.duckdb_equals_datafusion else 'differs') for c in result.checks)}) |"
    )
    add(f"| icesql runs | {len(result.runs)} (restarts: {sum(restarts.values())}, {dict(restarts)}) |")
    add(f"| runs that failed on their own (exit ≠ 0) | {len(result.sink_failures())} |")
    add(
        f"| … of them during a transient fault (should have been ridden out) | {len(result.transient_failures())} |"
    )
    stops = [f for f in result.faults if f.kind == "stop" and "rc" in f.params]
    add(f"| clean stops (SIGTERM) that did not exit 0 | {len(result.failed_stops())} of {len(stops)} |")
    add(
        f"| stalls (icesql up, no commit of both sinks, idle {cfg.stall_idle:g} s or busy "
        f"{cfg.recovery_timeout:g} s) | {result.stalls()} |"
    )
    add(f"| faults never recovered from | {len(result.unrecovered())} |")
    add(
        f"| Python tracebacks in the output (no `-v`) | {result.tracebacks()} in {sum(1 for r in result.runs if r.tracebacks)} runs |"
    )
    add(f"| runs with Java stack traces in the output | {result.java_traces()} |")
    add(f"| commit conflicts icesql reported | {result.conflict_lines} |")
    add(
        f"| OAuth2 token requests / 401 answers (expired token) through the proxy | "
        f"{result.token_requests} / {result.rejected_401} |"
    )
    add(
        f"| STS AssumeRole requests / S3 answers refusing an expired session's key, through the proxy | "
        f"{result.role_requests} / {result.refused_keys} |"
    )
    add(
        f"| longest time from the end of a fault to recovery (both sinks committed) | "
        f"{_fmt_s(longest.recovery_seconds if longest else None)}"
        f"{f' (fault #{longest.index}, {longest.kind})' if longest else ''} |"
    )
    outage = result.longest_outage()
    add(
        f"| longest time from the start of a fault to recovery | {_fmt_s(outage.outage_seconds if outage else None)}"
        f"{f' (fault #{outage.index}, {outage.kind})' if outage else ''} |"
    )
    add(
        f"| final drain (`run --once`) | {'ok' if result.drain_ok else 'FAILED'} after {result.drain_runs} run(s) |"
    )
    add("")
    add("## Faults by kind")
    add("")
    add(
        "| kind | injected | sink exits | stalls | unrecovered | tracebacks "
        "| recovery after the fault ended: median / max |"
    )
    add("|---|---|---|---|---|---|---|")
    kinds = sorted({f.kind for f in result.faults}, key=lambda k: (KINDS + ("home_loss",)).index(k))
    for k in kinds:
        fs = [f for f in result.faults if f.kind == k]
        rec = sorted(f.recovery_seconds for f in fs if f.recovery_seconds is not None)
        med = rec[len(rec) // 2] if rec else None
        add(
            f"| {k} | {len(fs)} | {sum(len(f.sink_exits) for f in fs)} | {sum(f.stalls for f in fs)} | "
            f"{sum(1 for f in fs if f.recovered is None)} | {sum(f.tracebacks for f in fs)} | "
            f"{_fmt_s(med)} / {_fmt_s(rec[-1] if rec else None)} |"
        )
    for k, why in result.skipped_kinds.items():
        add(f"| {k} | skipped: {why} | | | | | |")
    add("")
    # ------------------------------------------------------------- findings
    add("## Findings")
    add("")
    msgs: Counter[str] = Counter()
    kinds_of: dict[str, Counter[str]] = {}
    by_index = {f.index: f for f in result.faults}
    for r in result.sink_failures():
        m = _norm_error(r.error or f"exit code {r.rc}, no error line")
        msgs[m] += 1
        kind = by_index[r.fault].kind if r.fault is not None and r.fault in by_index else "no fault"
        kinds_of.setdefault(m, Counter())[kind] += 1
    if msgs:
        add("### Sink exits (the error line icesql printed, normalised), by fault in progress")
        add("")
        add("| times | during | error line |")
        add("|---|---|---|")
        for m, n in msgs.most_common():
            during = ", ".join(f"{k} ×{c}" for k, c in kinds_of[m].most_common())
            add(f"| {n} | {during} | `{m[:400]}` |")
        add("")
    sink_msgs: Counter[str] = Counter(_norm_error(s) for r in result.runs for s in r.sink_failures)
    if sink_msgs:
        add("### `ERROR icesql.sink` lines (normalised)")
        add("")
        for m, n in sink_msgs.most_common(15):
            add(f"- {n} × `{m[:400]}`")
        add("")
    tbs: Counter[str] = Counter()
    for r in result.runs:
        for tb in r.tracebacks:
            tbs[_norm_error(tb.splitlines()[-1] if tb.splitlines() else tb)] += 1
    if tbs:
        add("### Python tracebacks printed without `-v` (last line, normalised)")
        add("")
        for m, n in tbs.most_common(10):
            add(f"- {n} × `{m[:300]}`")
        example = next((tb for r in result.runs for tb in r.tracebacks), "")
        if example:
            add("")
            add("Example (head and tail):")
            add("")
            add("```")
            add(example)
            add("```")
        add("")
    java: Counter[str] = Counter(_norm_error(x) for r in result.runs for x in r.java_excerpts)
    if java:
        add("### Java exceptions in the output")
        add("")
        for m, n in java.most_common(10):
            add(f"- {n} × `{m[:300]}`")
        add("")
    stalls = [f for f in result.faults if f.stalls or f.recovered is None]
    if stalls:
        add("### Stalls and faults without recovery")
        add("")
        for f in stalls:
            add(f"- fault #{f.index} {f.kind} {f.params}: " + "; ".join(f.notes + f.actions))
        add("")
    odd = [f for f in result.faults if f.actions and not f.stalls]
    if odd:
        add("### Operator actions beyond a restart")
        add("")
        for f in odd:
            add(f"- fault #{f.index} {f.kind} {f.params}: " + "; ".join(f.actions + f.notes))
        add("")
    bad = [c for c in result.checks if not (c.equals_replay and c.duckdb_equals_datafusion)]
    if bad:
        add("### Tables that differ from the replay after the main run")
        add("")
        for c in bad:
            add(
                f"- `{c.table}`: lost {c.lost}, duplicated {c.duplicated}, stale {c.stale}, unexpected "
                f"{c.unexpected}, DuckDB = DataFusion: {c.duckdb_equals_datafusion}; e.g. {c.examples[:4]}"
            )
        add("")
    if result.home_loss_checks:
        add("### Home loss (`<home>/sinks/` deleted between runs, after the main run was verified)")
        add("")
        add(
            "Each round: new input, `sinks/` deleted, `run --once`; the figures are cumulative (the whole table)."
        )
        add("")
        for i, checks in enumerate(result.home_loss_checks):
            f = next((x for x in result.faults if x.kind == "home_loss" and x.params.get("round") == i), None)
            for c in checks:
                add(
                    f"- after round {i}: `{c.table}`: lost {c.lost}, duplicated {c.duplicated}, stale {c.stale}, "
                    f"unexpected {c.unexpected} ({'equals the replay' if c.equals_replay else 'differs'}); "
                    f"e.g. {c.examples[:3]}"
                )
            if f is not None and f.notes:
                add(f"  - {'; '.join(f.notes)}")
        add("")
    if result.notes:
        add("### Notes")
        add("")
        for n in result.notes:
            add(f"- {n}")
        add("")
    # ------------------------------------------------------------- the faults, one by one
    add("## Every fault")
    add("")
    add("| # | kind | parameters | recovery after the fault | sink exits | notes |")
    add("|---|---|---|---|---|---|")
    for f in result.faults:
        params = json.dumps(f.params, default=str)
        exits = "; ".join(_norm_error(e)[:160] for e in f.sink_exits) or "-"
        notes = "; ".join(n[:200] for n in f.notes + f.actions) or "-"
        add(f"| {f.index} | {f.kind} | `{params}` | {_fmt_s(f.recovery_seconds)} | {exits} | {notes} |")
    add("")
    text = "\n".join(lines) + "\n"
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return text


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--minutes", type=float, default=15.0)
    ap.add_argument(
        "--plan", default=None, help="comma-separated fault kinds, in order, instead of --minutes"
    )
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--min-kills", type=int, default=0, help="after --minutes, only kills until this many")
    ap.add_argument("--home-loss-rounds", type=int, default=2)
    ap.add_argument("--token-lifetime", type=int, default=30)
    ap.add_argument("--sts-lifetime", type=int, default=60, help="seconds role credentials live (0: static keys)")
    ap.add_argument("--recovery-timeout", type=float, default=300.0)
    ap.add_argument("--report", type=Path, default=None)
    ap.add_argument("--title", default="Soak run")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, home)")
    args = ap.parse_args(argv)
    cfg = SoakConfig(
        seed=args.seed,
        minutes=args.minutes,
        plan=tuple(args.plan.split(",")) if args.plan else None,
        kinds=tuple(args.kinds.split(",")),
        home_loss_rounds=args.home_loss_rounds,
        min_kills=args.min_kills,
        token_lifetime=args.token_lifetime,
        sts_lifetime=args.sts_lifetime,
        recovery_timeout=args.recovery_timeout,
        workdir=args.workdir,
        keep_workdir=args.keep,
    )
    command = "PYTHONPATH=. .venv/bin/python -m tests.soak.harness " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    result = Soak(cfg, command=command).run()
    text = write_report(result, args.report, title=args.title)
    if args.report is None:
        print(text)
    else:
        print(f"report: {args.report}")
    return 0 if result.exactly_once() else 1


if __name__ == "__main__":
    sys.exit(main())
