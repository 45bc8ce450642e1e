"""The maintenance soak of issue 13 (``-m slow``): two sinks committing every second for
``ICESQL_MAINT_SOAK_SECONDS`` (default 1800) with automatic maintenance, a foreign writer beside.

What runs (one Spark session, one ``Engine``, both sinks started with ``Engine.start_sink``, not
``once``):

* the upsert sink ``u`` (KEY id) reads Debezium JSON files into ``ns.t``; a feeder thread writes
  one file of ``CHANGES_PER_FILE`` changes every ``FEED_EVERY`` s, over a key space of ``KEYS``
  keys that an initial file creates in full, so updates and deletes hit rows of every older file
  (position deletes all over the table, compaction rewriting what they apply to);
* the append sink ``a`` reads JSON lines into ``ns.events``: an initial file of
  ``INITIAL_APPEND_ROWS`` rows, then ``APPEND_ROWS_PER_FILE`` rows per file, same cadence;
* both with ``MAXIMUM PERIOD = '1s'`` (``CommitPolicy.maximum_period``): a commit about every
  second, by the batch that finds the period over or by the period timer;
* ``ForeignWriter`` (pyiceberg appends of keys of its own, every ``FOREIGN_EVERY`` s) into
  ``ns.t``: the sink's key index goes stale, the next commit also deletes by equality and the
  index follows the table (reads the foreign file's keys); the foreign writer's commits that lose
  a race leave orphan files.
* maintenance on both tables under ``POLICY`` (thresholds below, scaled down with the tables:
  the compaction target is 64 KiB instead of 512 MiB, so a table of a few MB spans tens of
  target-size files, as a large table spans tens of 512 MiB files). The metadata files are left
  to icesql's defaults, no table property set here: the sinks create both tables with a metadata
  log of ``METADATA_LOG_LENGTH`` (50) files whose commits delete the files that drop out of it,
  and the maintenance's metadata cleanup (every ``metadata_check_versions`` versions) deletes the
  ones no commit does (a foreign commit that lost a race). Iceberg's own defaults (a log of 100,
  nothing deleted) would leave a metadata file per commit, over the issue's 100 within minutes.

Why the initial files: the file-count bound is "twice what a fresh compaction leaves", and AUTO
compaction by design leaves a partition's small files that do not add up to a target-size file
merged by size class (``COMPACTION MINIMUM FILES`` of similar size at a time, README "Table
maintenance"), so a table below a few target files has several where a fresh compaction leaves
one. And an upsert table gains a data file per commit until its delete files call for a
compaction (``maximum_delete_files`` commits, plus those that land while it runs): the bound holds
only for a table a fresh compaction leaves in more files than that. The initial loads make the
upsert table span about 14 target files and the append table about 15 from the start; the bound
is then the bound of the issue, unchanged (with a 20,000-key upsert table, 7 target files, a
120-s run had 15 data files against 14 just before a compaction).

Measured every ``SAMPLE_EVERY`` s (``tests.support.table_health``, in a separate process so that
measuring holds no lock the sinks need), per table, with its bound:

* live data files <= 2 x the data files of a fresh ``FULL`` compaction of the same rows (read
  with DuckDB, written to a scratch table, compacted at the same target size);
* live delete files <= ``maximum_delete_files`` + ``DELETE_FILES_IN_FLIGHT`` (8): a compaction
  of the upsert table reads it all (a position delete applies to most of its files), more than
  ``large_rewrite_bytes``, so it runs beside the sink: it is planned after a commit, written in
  up to 4 s on this machine and committed in the gap the next batch's end leaves, while the sink
  goes on committing every second, each commit with a position-delete file (and after a foreign
  commit an equality-delete file) that stays after the rewrite. (4 at first, from "a due
  compaction runs in the next gap or the one after"; a 120-s run showed 14 = 8 + 6 while a
  rewrite beside the sink ran, which that reasoning missed: raised to 8 for that reason.)
* manifests <= ``maximum_manifests`` + ``MANIFESTS_IN_FLIGHT``: the manifest rewrite is one of
  the steps that take turns in the gaps a compaction leaves (with expiration and the two orphan
  slices), so it runs within 2 x 4 gaps, while each commit adds up to three manifests (data,
  position deletes, equality deletes) — the slack is measured against that;
* at most ``MAX_METADATA_FILES`` (100) ``.metadata.json`` files in the metadata directory
  (the issue's figure; every file there is reported too);
* no snapshot older than ``snapshot_retention`` + ``EXPIRE_SLACK`` except the
  ``keep_snapshots`` newest and a sink's last-progress snapshot (expiration runs every
  ``expire_every`` s, taking its turn between commits);
* no unreferenced file older than ``orphan_file_age`` + ``ORPHAN_SLACK``: orphan cleanup runs
  every ``orphan_check_every`` s, one slice of the table location (metadata, then data) per
  turn, so a file may outlive the safety age by up to two check intervals before a cleanup
  sees it. The count beyond the bare safety age is reported too.

At the end (sinks drained and stopped): DuckDB and DataFusion read exactly an independent replay
(the upsert table: the changes replayed plus the foreign rows; the append table: every row
fed); DuckDB's full read of each table takes at most 2 x the median time of the same rows freshly
compacted (median of interleaved reads on new connections); no sink failed (a failed commit ends
the sink) and no commit was late: staged data is committed by max(last commit + period, when it
was staged) + ``LATE_SLACK`` (1 s: one commit on this loaded machine, p99 0.3-0.5 s), sampled
every 0.1 s. The gaps between consecutive commits of each sink are bounded too, by the period +
``GAP_SLACK`` (2 s: a commit and a micro-batch of this 2-core machine: a batch that
takes longer leaves nothing staged for the timer to commit, so a gap is also how long a batch
takes); each gap over the bound is reported with what happened in it. (The upsert sink's gaps
were an ``xfail`` until 24 Nov 2026: a compaction in a gap with the key index following it took
up to 3 s, and the period timer woke up to a quarter period late. Since the timer wakes when the
period is over, one 30-minute run had no gap over the bound and the next three of 3.02-3.16 s;
since a compaction beside the sink does its reading and hashing before the gap and commits are
cheaper, two runs in a row had none, the longest 2.82 s and 2.63 s. docs/MAINTENANCE-SOAK.md.)

One module-scoped run; one test per requirement reads its findings, so the report says them all.
The report (one line per sample and a summary) is printed and written to
``ICESQL_MAINT_SOAK_REPORT`` when set. The short soak of the default suite is
``tests/engine/test_maintainer.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import multiprocessing
import os
import random
import statistics
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.engine import Engine
from icesql.engine.iceberg.tables import METADATA_LOG_LENGTH
from icesql.plan import (
    CommitPolicy,
    MaintenancePolicy,
    SinkMode,
    SinkPlan,
    SourceFormat,
    SourceKind,
    SourcePlan,
)
from tests.engine.test_key_index import c, d, replay, u
from tests.engine.test_maintainer import ForeignWriter
from tests.support.pipeline_helpers import Objects, State, load_table, local_catalog, spark_for_tests
from tests.support.readers import read_datafusion, read_duckdb
from tests.support.table_health import duckdb_read_seconds, fresh_compaction, table_health

SECONDS = float(os.environ.get("ICESQL_MAINT_SOAK_SECONDS", "1800"))
REPORT = os.environ.get("ICESQL_MAINT_SOAK_REPORT")

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(int(SECONDS) + 1800)]

PERIOD = 1.0  # MAXIMUM PERIOD of both sinks
FEED_EVERY = 1.0  # a new input file for each sink
SAMPLE_EVERY = 30.0
KEYS = 40_000  # the upsert sink's key space (all created by the initial file)
CHANGES_PER_FILE = 60
INITIAL_APPEND_ROWS = 40_000
APPEND_ROWS_PER_FILE = 100
FOREIGN_EVERY = 15.0
FOREIGN_FIRST_KEY = 1_000_000

TARGET = 64 * 1024
POLICY = MaintenancePolicy(
    compaction_minimum_files=4,
    maximum_delete_files=8,
    maximum_manifests=16,
    snapshot_retention=120.0,
    keep_snapshots=20,
    orphan_file_age=180.0,
    target_file_size=TARGET,
    expire_every=10.0,
    orphan_check_every=30.0,
    large_rewrite_bytes=4 * TARGET,  # a rewrite of more than four target files runs beside the sink
)

# bounds (see the module docstring)
FILES_FACTOR = 2
DELETE_FILES_IN_FLIGHT = 8
MANIFESTS_IN_FLIGHT = 24
MAX_METADATA_FILES = 100
EXPIRE_SLACK = POLICY.expire_every + 30.0
ORPHAN_SLACK = 2 * POLICY.orphan_check_every + 30.0
LATE_SLACK = 1.0
GAP_SLACK = 2.0
READ_RATIO = 2.0


@pytest.fixture(scope="module")
def spark() -> Any:
    return spark_for_tests()


def hexval(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


class Feeder(threading.Thread):
    """Writes one input file per sink every ``FEED_EVERY`` s and remembers what it wrote."""

    def __init__(self, cdc: Path, events: Path, seed: int = 13) -> None:
        super().__init__(daemon=True, name="soak-feeder")
        self.cdc, self.events = cdc, events
        self.rng = random.Random(seed)
        self.changes: list[dict[str, Any]] = []
        self.rows: list[tuple[Any, ...]] = []
        self.live: set[int] = set()
        self.lsn = 0
        self.files = 0
        self.next_id = 0
        self.stop = threading.Event()
        self.late = 0  # files written more than a period after they were due (a busy machine)

    def _write(self, directory: Path, records: list[dict[str, Any]]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        name = f"{self.files:06d}.json"
        tmp = directory / f".{name}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
        os.replace(tmp, directory / name)

    def _append_rows(self, n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            i = self.next_id
            self.next_id += 1
            row = {"id": i, "k": f"k{i % 7}", "v": hexval(self.rng)}
            out.append(row)
            self.rows.append((row["id"], row["k"], row["v"]))
        return out

    def initial(self) -> None:
        changes = []
        for k in range(KEYS):
            self.lsn += 1
            changes.append(c(k, hexval(self.rng), lsn=self.lsn))
            self.live.add(k)
        self._emit(changes, INITIAL_APPEND_ROWS)

    def step(self) -> None:
        changes = []
        for _ in range(CHANGES_PER_FILE):
            k = self.rng.randrange(KEYS)
            self.lsn += 1
            if k in self.live and self.rng.random() < 0.15:
                changes.append(d(k, lsn=self.lsn))
                self.live.discard(k)
            elif k in self.live:
                changes.append(u(k, f"{self.lsn}-{hexval(self.rng)}", lsn=self.lsn))
            else:
                changes.append(c(k, f"{self.lsn}-{hexval(self.rng)}", lsn=self.lsn))
                self.live.add(k)
        self._emit(changes, APPEND_ROWS_PER_FILE)

    def _emit(self, changes: list[dict[str, Any]], rows: int) -> None:
        """One file of ``changes`` for the upsert sink, one of ``rows`` new rows for the append sink."""
        self.changes += changes
        self._write(self.cdc, changes)
        self._write(self.events, self._append_rows(rows))
        self.files += 1

    def run(self) -> None:
        due = time.monotonic()
        while not self.stop.is_set():
            due += FEED_EVERY
            if self.stop.wait(max(0.0, due - time.monotonic())):
                return
            if time.monotonic() - due > FEED_EVERY:
                self.late += 1
            self.step()


class Lines(logging.Handler):
    """The ``commit sink=`` and ``maintenance sink=`` lines (with their times) and every warning."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.commits: dict[str, list[float]] = defaultdict(list)
        self.commit_seconds: dict[str, list[float]] = defaultdict(list)  # how long each commit took
        self.reasons: dict[str, Counter[str]] = defaultdict(Counter)
        self.steps: dict[str, Counter[str]] = defaultdict(Counter)
        self.step_seconds: dict[str, list[float]] = defaultdict(list)
        self.warnings: list[str] = []
        self.errors: list[str] = []
        self.rebuilds: dict[str, list[float]] = defaultdict(list)  # when the key index was rebuilt
        self.follow_seconds: dict[str, list[float]] = defaultdict(list)  # how long each follow took
        self.step_times: dict[str, list[float]] = defaultdict(list)  # when a maintenance step ended
        self.held: dict[str, list[float]] = defaultdict(list)  # seconds each compaction beside held the lock
        self.step_names: dict[str, list[str]] = defaultdict(list)  # which (``compact beside 0.31s (held 0.05s)``)

    @staticmethod
    def _field(msg: str, name: str) -> str:
        for part in msg.split():
            if part.startswith(name + "="):
                return part.split("=", 1)[1]
        return ""

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if msg.startswith("commit sink="):
            sink = self._field(msg, "sink")
            self.commits[sink].append(record.created)
            self.reasons[sink][self._field(msg, "reason")] += 1
            self.commit_seconds[sink].append(float(self._field(msg, "duration").rstrip("s") or 0.0))
        elif msg.startswith("maintenance sink="):
            sink = self._field(msg, "sink")
            step = self._field(msg, "step")
            if "nothing to rewrite" in msg:
                step += " (nothing)"
            self.steps[sink][step] += 1
            self.step_times[sink].append(record.created)
            held = self._field(msg, "held")  # a compaction beside: how long it held the sink's lock
            if held and float(held.rstrip("s")) > 0:
                self.held[sink].append(float(held.rstrip("s")))
            tail = msg.split()[-2 if held else -1]
            where = " beside" if f"step={self._field(msg, 'step')} beside " in msg else ""
            self.step_names[sink].append(f"{step}{where} {tail}" + (f" (held {held})" if held else ""))
            if tail.endswith("s"):
                try:
                    self.step_seconds[sink].append(float(tail[:-1]))
                except ValueError:
                    pass
        elif msg.startswith("sink ") and "key index built" in msg:
            self.rebuilds[msg.split()[1].rstrip(":")].append(record.created)
        elif msg.startswith("sink ") and "key index followed" in msg:
            self.follow_seconds[msg.split()[1].rstrip(":")].append(float(msg.rsplit(" ", 1)[-1].rstrip("s")))
        if record.levelno >= logging.ERROR:
            self.errors.append(f"{record.name}: {msg[:300]}")
        elif record.levelno >= logging.WARNING:
            self.warnings.append(f"{record.name}: {msg[:300]}")


LATE_STACKS = 12  # late commits per sink whose threads' stacks the report shows
_STACK_FILES = ("icesql", "pyiceberg", "pyarrow", "py4j", "pyspark", "duckdb", "concurrent")


def thread_stacks() -> list[str]:
    """One line per thread of this process: its name and its innermost frames in the code that
    matters here (icesql, pyiceberg, pyarrow, py4j, pyspark), innermost first."""
    import sys
    import traceback

    names = {t.ident: t.name for t in threading.enumerate()}
    lines = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        frames = [f for f in traceback.extract_stack(frame) if any(k in f.filename for k in _STACK_FILES)]
        if not frames:
            continue
        where = " < ".join(
            f"{f.filename.rsplit('/', 2)[-2]}/{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}"
            for f in reversed(frames[-5:])
        )
        lines.append(f"{names.get(ident, ident)}: {where}")
    return sorted(lines)


class Lateness(threading.Thread):
    """How late each sink's commits are: every 0.1 s, the time since its staged data was due
    (max(the clock's last commit + period, when the oldest pending batch was staged))."""

    def __init__(self, runners: dict[str, Any]) -> None:
        super().__init__(daemon=True, name="soak-lateness")
        self.runners = runners
        self.stop = threading.Event()
        self.worst: dict[str, float] = dict.fromkeys(runners, 0.0)
        self.worst_at: dict[str, float] = dict.fromkeys(runners, 0.0)
        self.late: dict[str, list[tuple[float, float]]] = {n: [] for n in runners}  # (when, how late)
        # what every thread of this process was doing when a commit first turned late (the first
        # LATE_STACKS times per sink): what held the commit back
        self.stacks: dict[str, list[tuple[float, float, float, list[str]]]] = {n: [] for n in runners}

    def run(self) -> None:
        while not self.stop.wait(0.1):
            for name, r in self.runners.items():
                pending = r.staging.pending()
                if not pending:
                    continue
                offset = time.time() - time.monotonic()
                staged = min(e.created_at for e in pending) - offset
                late = time.monotonic() - max(r.clock.last_commit + PERIOD, staged)
                if late > self.worst[name]:
                    self.worst[name], self.worst_at[name] = late, time.time()
                if late > LATE_SLACK and (not self.late[name] or time.time() - self.late[name][-1][0] > 1):
                    self.late[name].append((time.time(), late))
                    if len(self.stacks[name]) < LATE_STACKS:
                        self.stacks[name].append((time.time(), late, os.getloadavg()[0], thread_stacks()))


def plans(cdc: Path, events: Path) -> tuple[SinkPlan, SinkPlan, dict[str, SourcePlan]]:
    """The upsert sink ``u`` and the append sink ``a``, and the sources they read."""
    commit = CommitPolicy(maximum_period=PERIOD)
    sources = {
        "cdc": SourcePlan(
            "cdc",
            SourceKind.FILES,
            path=str(cdc),
            format=SourceFormat.DEBEZIUM_JSON,
            schema="id BIGINT, region STRING, v STRING",
        ),
        "events": SourcePlan(
            "events",
            SourceKind.FILES,
            path=str(events),
            format=SourceFormat.JSON,
            schema="id BIGINT, k STRING, v STRING",
        ),
    }
    common: dict[str, Any] = {
        "catalog_connection": "cat",
        "namespace": ("ns",),
        "commit": commit,
        "maintenance": POLICY,
    }
    upsert = SinkPlan(name="u", relation="cdc", table="t", key=("id",), mode=SinkMode.UPSERT, **common)
    append = SinkPlan(name="a", relation="events", table="events", **common)
    return upsert, append, sources


def fmt_sample(t: float, h: dict[str, Any]) -> str:
    fresh = h.get("fresh_data_files")
    bound = FILES_FACTOR * fresh if fresh is not None else None
    return (
        f"t={t:7.0f}s {h['table']:<9} data_files={h['data_files']:>3}/{bound} (fresh {fresh}) "
        f"delete_files={h['delete_files']:>2} (pos {h['position_delete_files']}, eq {h['equality_delete_files']}) "
        f"manifests={h['manifests']:>2} metadata_json={h['metadata_json']:>3} "
        f"(dir {h['metadata_dir_files']}, log {h['metadata_log']}) snapshots={h['snapshots']:>3} "
        f"overdue_snapshots={h['overdue_snapshots']} oldest_unkept={h['oldest_unkept_snapshot_age']}s "
        f"unreferenced={h['unreferenced']} (>{POLICY.orphan_file_age:g}s: {h['unreferenced_old']}, "
        f"oldest {h['oldest_unreferenced_age']}s) rows={h.get('live_rows')} ({h['seconds']}s)"
    )


def violations(h: dict[str, Any], now: float) -> list[str]:
    """The bounds one sample breaks (see the module docstring)."""
    out = []
    fresh = h.get("fresh_data_files")
    if fresh is not None and h["data_files"] > FILES_FACTOR * fresh:
        out.append(f"{h['data_files']} data files > {FILES_FACTOR} x {fresh} of a fresh compaction")
    if h["delete_files"] > POLICY.maximum_delete_files + DELETE_FILES_IN_FLIGHT:
        out.append(
            f"{h['delete_files']} delete files > {POLICY.maximum_delete_files} + {DELETE_FILES_IN_FLIGHT}"
        )
    if h["manifests"] > POLICY.maximum_manifests + MANIFESTS_IN_FLIGHT:
        out.append(f"{h['manifests']} manifests > {POLICY.maximum_manifests} + {MANIFESTS_IN_FLIGHT}")
    if h["metadata_json"] > MAX_METADATA_FILES:
        out.append(f"{h['metadata_json']} metadata files > {MAX_METADATA_FILES}")
    if h["overdue_snapshots"]:
        out.append(
            f"{h['overdue_snapshots']} snapshot(s) older than {POLICY.snapshot_retention:g}s + "
            f"{EXPIRE_SLACK:g}s beyond the newest {POLICY.keep_snapshots}"
        )
    old = [p for p in h["unreferenced_old_paths"]]
    if h["oldest_unreferenced_age"] > POLICY.orphan_file_age + ORPHAN_SLACK:
        out.append(
            f"an unreferenced file {h['oldest_unreferenced_age']}s old > {POLICY.orphan_file_age:g}s + "
            f"{ORPHAN_SLACK:g}s ({len(old)} older than the safety age, e.g. {old[:2]})"
        )
    return [f"t={now:.0f}s {h['table']}: {v}" for v in out]


@dataclass
class Soak:
    """What one soak run found, by requirement (each list: the bounds broken)."""

    report: str
    tables: list[str] = field(default_factory=list)  # the samples' bounds
    rows: list[str] = field(default_factory=list)
    read_time: list[str] = field(default_factory=list)
    sinks: list[str] = field(default_factory=list)  # failed, or staged data committed late
    gaps: dict[str, list[str]] = field(default_factory=dict)  # per sink: commit gaps over the bound


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (the nearest rank below; 0 for none)."""
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))] if ordered else 0.0


def _sampling_at(when: float | tuple[float, float], sampling: list[tuple[float, float]]) -> bool:
    """Whether a sample (a separate process reading both tables) ran at ``when`` (a time or an
    interval of ``time.time()``)."""
    a, b = when if isinstance(when, tuple) else (when, when)
    return any(s <= b and a <= e for s, e in sampling)


def gap_lines(
    name: str, times: list[float], lines: Lines, t0: float, sampling: list[tuple[float, float]]
) -> list[str]:
    """The gaps between consecutive commits of ``name`` longer than the bound, longest first,
    each with what happened in it (a key-index rebuild, a maintenance step, a sample)."""
    out = []
    for a, b in zip(times, times[1:], strict=False):
        if b - a <= PERIOD + GAP_SLACK:
            continue
        what = []
        if any(a <= t <= b for t in lines.rebuilds[name]):
            what.append("key-index rebuild")
        steps = [n for t, n in zip(lines.step_times[name], lines.step_names[name], strict=False) if a <= t <= b]
        if steps:
            what.append(f"maintenance step: {', '.join(steps)}")
        if _sampling_at((a, b), sampling):
            what.append("sampling")
        out.append((b - a, f"{b - a:.2f}s from t={a - t0:.1f}s ({', '.join(what) or 'nothing logged'})"))
    return [line for _, line in sorted(out, reverse=True)]


def run_soak(spark: Any, tmp_path: Path) -> Soak:
    home, cdc_dir, events_dir, scratch = (
        tmp_path / "home",
        tmp_path / "cdc",
        tmp_path / "events",
        tmp_path / "fresh",
    )
    scratch.mkdir()
    warehouse = home / "warehouse"
    upsert, append, sources = plans(cdc_dir, events_dir)
    feeder = Feeder(cdc_dir, events_dir)
    feeder.initial()
    lines = Lines()
    icesql_log = logging.getLogger("icesql")
    sink_log = logging.getLogger("icesql.sink")
    old_level = sink_log.level
    sink_log.setLevel(logging.INFO)
    icesql_log.addHandler(lines)
    started_at = dt.datetime.now(dt.timezone.utc)
    load_before = os.getloadavg()
    eng = Engine(
        home,
        objects=Objects({"cat": local_catalog(warehouse=warehouse)}, dict(sources)),
        secrets=lambda n: "x",
        state=State(),
        spark=spark,
        trigger_interval=0.2,
    )
    foreign = ForeignWriter(home, FOREIGN_EVERY, identifier="ns.t", first_key=FOREIGN_FIRST_KEY)
    samples: list[tuple[float, dict[str, Any]]] = []
    sampling: list[tuple[float, float]] = []  # when each sample ran (time.time())
    result = Soak(report="")
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    lateness: Lateness | None = None
    try:
        eng.start_sink(upsert)
        eng.start_sink(append)
        runners = {"u": eng.runner("u"), "a": eng.runner("a")}
        lateness = Lateness(runners)
        lateness.start()
        t0 = time.monotonic()
        t0_wall = time.time()
        feeder.start()
        foreign.start()

        def sample(final: bool = False) -> None:
            now = time.monotonic() - t0
            began = time.time()
            for ident in ("ns.t", "ns.events"):
                h = pool.submit(
                    table_health,
                    str(warehouse),
                    ident,
                    retention=POLICY.snapshot_retention,
                    keep=POLICY.keep_snapshots,
                    expire_slack=EXPIRE_SLACK,
                    orphan_age=POLICY.orphan_file_age,
                    target=TARGET,
                    scratch=str(scratch),
                ).result()
                samples.append((now, h))
                print(fmt_sample(now, h) + (" (final)" if final else ""), flush=True)
                result.tables.extend(violations(h, now))
            sampling.append((began, time.time()))

        next_sample = SAMPLE_EVERY
        while time.monotonic() - t0 < SECONDS:
            time.sleep(max(0.0, min(next_sample, SECONDS) - (time.monotonic() - t0)))
            if any(not r.active or r.error is not None for r in runners.values()):
                break
            if time.monotonic() - t0 >= next_sample - 0.5:
                sample()
                next_sample += SAMPLE_EVERY
        run_seconds = time.monotonic() - t0
        dead = {
            n: (r.status, r.error.message if r.error else None) for n, r in runners.items() if not r.active
        }
        assert not dead, f"a sink ended during the soak: {dead}"
        sample(final=True)  # the last one with maintenance running
        feeder.stop.set()
        feeder.join()
        foreign.stop.set()
        foreign.join()
        # drain: the append sink has every row, the upsert sink nothing staged and no new commit
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if runners["a"].totals["rows_committed"] >= len(feeder.rows):
                break
            time.sleep(0.5)
        last = (-1, time.monotonic())
        while time.monotonic() < deadline:
            n = runners["u"].totals["commits"]
            if n != last[0]:
                last = (n, time.monotonic())
            elif time.monotonic() - last[1] > 5 and not runners["u"].staging.pending():
                break
            time.sleep(0.5)
        lateness.stop.set()
        eng.stop()
        runner_totals = {n: dict(r.totals) for n, r in runners.items()}
        statuses = {n: (r.status, r.error.message if r.error else None) for n, r in runners.items()}

        # rows: exactly an independent replay, by two readers
        expected = {
            "ns.t": sorted(replay(feeder.changes) + foreign.rows, key=repr),
            "ns.events": sorted(feeder.rows, key=repr),
        }
        rows_ok = {}
        for ident, rows in expected.items():
            meta = load_table(home, ident).metadata_location
            got_duck, got_df = read_duckdb(meta), read_datafusion(meta)
            rows_ok[ident] = (got_duck == rows, got_df == rows, len(rows))
            if got_duck != rows or got_df != rows:
                missing = sorted(set(rows) - set(got_duck), key=repr)[:5]
                extra = sorted(set(got_duck) - set(rows), key=repr)[:5]
                result.rows.append(
                    f"{ident}: rows differ from the replay (duckdb {got_duck == rows}, datafusion "
                    f"{got_df == rows}; {len(got_duck)} vs {len(rows)}; missing {missing}, extra {extra})"
                )

        # DuckDB's full read against the same rows freshly compacted
        ratios = {}
        for ident in expected:
            table = load_table(home, ident)
            fresh = fresh_compaction(
                table, target=TARGET, scratch=str(scratch), name=f"final_{ident.replace('.', '_')}"
            )
            live_t: list[float] = []
            fresh_t: list[float] = []
            for _ in range(3):
                live_t += duckdb_read_seconds(table.metadata_location, 3)
                fresh_t += duckdb_read_seconds(fresh["metadata_location"], 3)
            live_s, fresh_s = statistics.median(live_t), statistics.median(fresh_t)
            ratios[ident] = (live_s / fresh_s, live_s, fresh_s, fresh["data_files"])
            if live_s / fresh_s > READ_RATIO:
                result.read_time.append(
                    f"{ident}: DuckDB reads it in {live_s:.3f}s, the same rows freshly compacted in "
                    f"{fresh_s:.3f}s: {live_s / fresh_s:.2f} > {READ_RATIO}"
                )

        # commits: none failed (a failed commit ends the sink), none late
        for name, (status, error) in statuses.items():
            if error is not None or status != "stopped":
                result.sinks.append(f"sink {name} ended {status}: {error}")
        for name, events in lateness.late.items():
            if events:
                result.sinks.append(
                    f"sink {name}: {len(events)} time(s) staged data waited more than {LATE_SLACK:g}s past "
                    f"its commit's due time (worst {lateness.worst[name]:.2f}s at "
                    f"t={lateness.worst_at[name] - t0_wall:.0f}s)"
                )
        for name, times in lines.commits.items():
            result.gaps[name] = gap_lines(name, times, lines, t0_wall, sampling)

        # the report
        load_after = os.getloadavg()
        report = [
            f"maintenance soak: {run_seconds:.0f}s of sinks committing (ICESQL_MAINT_SOAK_SECONDS={SECONDS:g}), "
            f"started {started_at:%Y-%m-%d %H:%M:%S} UTC, load average {load_before[0]:.2f} "
            f"{load_before[1]:.2f} {load_before[2]:.2f} before, {load_after[0]:.2f} {load_after[1]:.2f} "
            f"{load_after[2]:.2f} after",
            f"policy: {POLICY.describe()}; compaction target {TARGET} B, COMPACTION MINIMUM FILES "
            f"{POLICY.compaction_minimum_files}, expire every {POLICY.expire_every:g}s, orphan check every "
            f"{POLICY.orphan_check_every:g}s, rewrites above {POLICY.large_rewrite_bytes} B beside the sink; "
            f"MAXIMUM PERIOD {PERIOD:g}s; metadata log {METADATA_LOG_LENGTH} (icesql's default), deleted after commit",
            f"input: {feeder.files} files per sink ({feeder.late} fed late), {len(feeder.changes)} changes over "
            f"{KEYS} keys, {len(feeder.rows)} appended rows, {len(foreign.rows)} foreign rows "
            f"({foreign.conflicts} foreign commits lost a race and were retried)",
            "",
            "samples:",
            *(fmt_sample(t, h) for t, h in samples),
            "",
            "summary:",
        ]
        for name, times in sorted(lines.commits.items()):
            g = [b - a for a, b in zip(times, times[1:], strict=False)]
            p99 = quantile(g, 0.99)
            long = result.gaps[name]
            report.append(
                f"sink {name}: {len(times)} commits {dict(lines.reasons[name])}, commit gap max "
                f"{max(g, default=0.0):.2f}s, p99 {p99:.2f}s, {len(long)} gap(s) > {PERIOD + GAP_SLACK:g}s "
                f"({sum('rebuild' in x for x in long)} with a key-index rebuild, "
                f"{sum('maintenance step' in x for x in long)} with a maintenance step, "
                f"{sum('sampling' in x for x in long)} while sampling); {len(lines.rebuilds[name])} key-index "
                f"rebuilds, {len(lines.follow_seconds[name])} follows (max "
                f"{max(lines.follow_seconds[name], default=0.0):.2f}s); staged data at most {max(0.0, lateness.worst[name]):.2f}s past its commit's due "
                f"time; totals {runner_totals[name]}"
            )
            if long:
                report.append(f"sink {name}: longest gaps: " + "; ".join(long[:5]))
            took = lines.commit_seconds[name]
            report.append(
                f"sink {name}: commits took p50 {quantile(took, 0.5):.3f}s, p99 {quantile(took, 0.99):.3f}s, "
                f"max {max(took, default=0.0):.3f}s"
            )
            secs = lines.step_seconds[name]
            report.append(
                f"sink {name}: maintenance steps {dict(sorted(lines.steps[name].items()))}, "
                f"step time max {max(secs, default=0.0):.2f}s, mean {statistics.fmean(secs) if secs else 0.0:.2f}s; "
                f"compactions beside held the sink's lock max {max(lines.held[name], default=0.0):.2f}s, "
                f"p50 {quantile(lines.held[name], 0.5):.2f}s ({len(lines.held[name])} held it)"
            )
        per_table: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for _, h in samples:
            per_table[h["table"]].append(h)
        for ident, hs in per_table.items():
            ratio, live_s, fresh_s, fresh_files = ratios[ident]
            worst = max(hs, key=lambda h: h["data_files"] / max(1, h.get("fresh_data_files") or 1))
            report.append(
                f"{ident}: data files at most {worst['data_files']} vs {worst.get('fresh_data_files')} of a "
                f"fresh compaction (bound {FILES_FACTOR}x), max data files {max(h['data_files'] for h in hs)}, "
                f"max delete files {max(h['delete_files'] for h in hs)} (bound {POLICY.maximum_delete_files}"
                f"+{DELETE_FILES_IN_FLIGHT}), max manifests {max(h['manifests'] for h in hs)} (bound "
                f"{POLICY.maximum_manifests}+{MANIFESTS_IN_FLIGHT}), max metadata.json "
                f"{max(h['metadata_json'] for h in hs)} (bound {MAX_METADATA_FILES}; every file of the metadata "
                f"directory: max {max(h['metadata_dir_files'] for h in hs)}), snapshots max "
                f"{max(h['snapshots'] for h in hs)} (overdue max {max(h['overdue_snapshots'] for h in hs)}), "
                f"unreferenced files max {max(h['unreferenced'] for h in hs)}, older than the safety age max "
                f"{max(h['unreferenced_old'] for h in hs)}, oldest {max(h['oldest_unreferenced_age'] for h in hs)}s "
                f"(bound {POLICY.orphan_file_age + ORPHAN_SLACK:g}s)"
            )
            report.append(
                f"{ident}: DuckDB full read {live_s * 1000:.1f} ms vs {fresh_s * 1000:.1f} ms freshly compacted "
                f"({fresh_files} files): ratio {ratio:.2f} (bound {READ_RATIO:g}); rows equal the replay: "
                f"duckdb {rows_ok[ident][0]}, datafusion {rows_ok[ident][1]} ({rows_ok[ident][2]} rows)"
            )
        report.append(f"warnings: {len(lines.warnings)}, errors: {len(lines.errors)}")
        counted = Counter(w[:120] for w in lines.warnings)
        report += [f"  {n} x {w}" for w, n in counted.most_common(8)]
        report += [f"  error: {e}" for e in lines.errors[:5]]
        broken = [
            *result.tables,
            *result.rows,
            *result.read_time,
            *result.sinks,
            *(f"sink {n}: commit gap {x}" for n, xs in sorted(result.gaps.items()) for x in xs[:5]),
        ]
        report += ["", "bounds broken: " + ("none" if not broken else str(len(broken)))]
        report += [f"  {b}" for b in broken[:40]]
        for name, caught in sorted(lateness.stacks.items()):
            for when, late, load, stacks in caught:
                report += [
                    "",
                    f"sink {name}: late {late:.2f}s at t={when - t0_wall:.1f}s (load {load:.1f}"
                    f"{', sampling' if _sampling_at(when, sampling) else ''}); the threads:",
                    *(f"    {x}" for x in stacks),
                ]
        result.report = "\n".join(report)
        print("\n" + result.report, flush=True)
        if REPORT:
            Path(REPORT).write_text(result.report + "\n")
        return result
    finally:
        feeder.stop.set()
        foreign.stop.set()
        if lateness is not None:
            lateness.stop.set()
        try:
            eng.stop()
        except Exception:
            pass
        pool.shutdown(cancel_futures=True)
        icesql_log.removeHandler(lines)
        sink_log.setLevel(old_level)


@pytest.fixture(scope="module")
def soak(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Soak:
    return run_soak(spark, tmp_path_factory.mktemp("maintenance-soak"))


def test_the_tables_stay_within_the_bounds(soak: Soak) -> None:
    """Live data files, delete files, manifests, metadata files, snapshots, unreferenced files:
    every sample within its bound (the module docstring)."""
    assert not soak.tables, "\n".join(soak.tables[:40])


def test_rows_equal_an_independent_replay(soak: Soak) -> None:
    """DuckDB and DataFusion read the changes replayed plus the foreign rows (upsert), every row
    fed (append): nothing lost to the maintenance or to the foreign writer's commits."""
    assert not soak.rows, "\n".join(soak.rows)


def test_duckdb_reads_the_tables_within_twice_a_fresh_compaction(soak: Soak) -> None:
    assert not soak.read_time, "\n".join(soak.read_time)


def test_no_sink_failed_and_no_commit_was_late(soak: Soak) -> None:
    """No sink failed (a failed commit ends it) and staged data was committed at most
    ``LATE_SLACK`` after it was due."""
    assert not soak.sinks, "\n".join(soak.sinks)


@pytest.mark.parametrize("sink", ["a", "u"])
def test_commit_gaps_stay_within_the_period(soak: Soak, sink: str) -> None:
    """The longest gap between two consecutive commits of the sink is at most its period plus
    ``GAP_SLACK``."""
    assert not soak.gaps.get(sink), "\n".join(soak.gaps.get(sink, [])[:10])
