"""A seeded random Debezium changelog, written as JSON-lines files, and its independent replay.

``Changelog(seed, ...)`` produces *rounds* of changes; each round is split into files (what a
CDC pipeline drops into the source directory between two runs of a sink). The changes are
what a Debezium Postgres connector emits for a table with the primary key ``(region, id)``:

* ``c`` inserts, ``u`` updates (``before`` and ``after``), ``d`` deletes (``before`` only),
  ``r`` snapshot reads (an upsert of the current row, as after a connector restart);
* repeated keys: a small key space, plus "hot" keys changed several times inside one file;
* re-inserts after a delete, deletes of keys that are not present, updates of keys that are not
  present (a stream started mid-way), nulls in non-key columns;
* ``source.lsn`` strictly increases with the change's position in the database log; inside a
  file the lines are partly shuffled, so the line order differs from the LSN order; the first
  two files of a round (one micro-batch with ``MAX FILES PER TRIGGER = 2``) sometimes interleave
  their LSNs; otherwise files cover consecutive, disjoint LSN ranges and get increasing
  modification times (the order Spark's file source reads them in, the later batch wins);
* some events are wrapped in ``{"payload": ...}`` (Kafka Connect's JSON converter with schemas),
  with extra ``source`` fields and a ``transaction`` block that the reader must ignore.

``expected_state(changes)`` replays the changes in LSN order into a dict ``key -> row`` — the
latest state of the source table, computed without icesql.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REGIONS = ("eu", "us", "apac")
SCHEMA = "region STRING, id BIGINT, name STRING, qty INT, ts TIMESTAMP"
COLUMNS = ("region", "id", "name", "qty", "ts")
EPOCH = dt.datetime(2024, 3, 1)

Key = tuple[str, int]
Row = dict[str, Any]


@dataclass(frozen=True)
class Change:
    op: str  # c, u, d, r
    before: Row | None
    after: Row | None
    lsn: int
    wrap: bool = False

    @property
    def key(self) -> Key:
        row = self.before if self.op == "d" else self.after
        assert row is not None
        return (row["region"], row["id"])

    def event(self) -> dict[str, Any]:
        ts_ms = 1_709_251_200_000 + self.lsn
        e = {
            "before": self.before,
            "after": self.after,
            "source": {
                "version": "2.5.0.Final",
                "connector": "postgresql",
                "name": "shop",
                "ts_ms": ts_ms - 3,
                "db": "shop",
                "schema": "public",
                "table": "orders",
                "lsn": self.lsn,
                "txId": 1000 + self.lsn // 7,
            },
            "op": self.op,
            "ts_ms": ts_ms,
            "transaction": None,
        }
        if self.wrap:
            return {
                "schema": {"type": "struct", "optional": False, "name": "shop.orders.Envelope"},
                "payload": e,
            }
        return e


@dataclass
class Round:
    index: int
    files: list[tuple[str, list[Change]]]  # (file name, changes in line order)

    @property
    def changes(self) -> list[Change]:
        return [c for _, cs in self.files for c in cs]


class Changelog:
    """Seeded generator of rounds of Debezium changes over the key ``(region, id)``."""

    def __init__(self, seed: int, *, keys_per_region: int = 120) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.keys_per_region = keys_per_region
        self.live: dict[Key, Row] = {}  # the source table as the generator sees it
        self.ever: set[Key] = set()
        self.lsn = 1000
        self.version = 0
        self.recent: list[Key] = []
        self.rounds: list[Round] = []
        self.file_no = 0
        self.stats = {
            "c": 0,
            "u": 0,
            "d": 0,
            "r": 0,
            "absent_deletes": 0,
            "reinserts": 0,
            "absent_updates": 0,
            "wrapped": 0,
            "shuffled_files": 0,
            "interleaved_files": 0,
        }

    # ----------------------------------------------------------------- rows

    def _row(self, key: Key) -> Row:
        self.version += 1
        r = self.rng
        name = (
            None
            if r.random() < 0.05
            else f"{key[0]}-{key[1]}-v{self.version}" + r.choice(["", "é", "🙂", " x"])
        )
        qty = None if r.random() < 0.05 else r.randint(-5, 10_000)
        ts = EPOCH + dt.timedelta(seconds=self.version * 37 + r.randint(0, 30))
        return {
            "region": key[0],
            "id": key[1],
            "name": name,
            "qty": qty,
            "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    def _pick_key(self) -> Key:
        r = self.rng
        if self.recent and r.random() < 0.3:  # a hot key: several changes close together
            return r.choice(self.recent[-6:])
        return (r.choice(REGIONS), r.randrange(self.keys_per_region))

    def _next_change(self) -> Change:
        r = self.rng
        key = self._pick_key()
        self.lsn += r.randint(1, 3)
        wrap = r.random() < 0.15
        cur = self.live.get(key)
        if cur is not None:
            x = r.random()
            if x < 0.55:
                new = self._row(key)
                ch = Change("u", cur, new, self.lsn, wrap)
                self.live[key] = new
            elif x < 0.85:
                ch = Change("d", cur, None, self.lsn, wrap)
                del self.live[key]
            else:  # snapshot read of the current row (connector restarted a snapshot)
                new = self._row(key) if r.random() < 0.5 else cur
                ch = Change("r", None, new, self.lsn, wrap)
                self.live[key] = new
        else:
            x = r.random()
            if x < 0.75:
                new = self._row(key)
                ch = Change("c" if r.random() < 0.9 else "r", None, new, self.lsn, wrap)
                if key in self.ever:
                    self.stats["reinserts"] += 1
                self.live[key] = new
            elif x < 0.9:  # delete of a key that is not there
                ch = Change("d", self._row(key), None, self.lsn, wrap)
                self.stats["absent_deletes"] += 1
            else:  # update of a key never seen by the sink (stream started mid-way)
                new = self._row(key)
                ch = Change("u", self._row(key), new, self.lsn, wrap)
                self.stats["absent_updates"] += 1
                self.live[key] = new
        self.ever.add(key)
        self.recent.append(key)
        del self.recent[:-12]
        self.stats[ch.op] += 1
        self.stats["wrapped"] += int(wrap)
        return ch

    # ----------------------------------------------------------------- rounds

    def next_round(self, n_changes: int, max_files: int = 3, n_files: int | None = None) -> Round:
        """The next ``n_changes`` changes in 1..``max_files`` files (exactly ``n_files`` when given:
        then each file holds at least ``MIN_FILE_CHANGES``, for tests that count on every
        micro-batch of the round having something to write - a file of one delete of an absent
        key writes nothing, so its batch stages nothing; seed 1102901914 drew one)."""
        r = self.rng
        changes = [self._next_change() for _ in range(n_changes)]
        exact = n_files is not None
        n_files = n_files or r.randint(1, max_files)
        cuts = sorted(r.sample(range(1, n_changes), n_files - 1)) if n_files > 1 else []
        while exact and n_files * MIN_FILE_CHANGES <= n_changes and _shortest(cuts, n_changes) < MIN_FILE_CHANGES:
            cuts = sorted(r.sample(range(1, n_changes), n_files - 1))
        bounds = [0, *cuts, n_changes]
        parts = [changes[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
        if len(parts) >= 2 and (r.random() < 0.5 or not self.stats["interleaved_files"]):
            # the first two files of a round interleave their LSNs: they are read in one
            # micro-batch (MAX FILES PER TRIGGER = 2), where the LSN, not the file, orders them
            both = parts[0] + parts[1]
            first = set(r.sample(range(len(both)), len(parts[0])))
            parts[0] = [c for i, c in enumerate(both) if i in first]
            parts[1] = [c for i, c in enumerate(both) if i not in first]
            self.stats["interleaved_files"] += 1
        files = []
        for part in parts:
            mode = r.random()
            if mode < 0.3 and len(part) > 1:  # whole file out of LSN order
                part = part[:]
                r.shuffle(part)
                self.stats["shuffled_files"] += 1
            elif mode < 0.7 and len(part) > 1:  # some neighbours swapped
                part = part[:]
                for _ in range(max(1, len(part) // 5)):
                    i = r.randrange(len(part) - 1)
                    part[i], part[i + 1] = part[i + 1], part[i]
                self.stats["shuffled_files"] += 1
            files.append((f"cdc-{self.file_no:05d}.json", part))
            self.file_no += 1
        # from the second file on, the files' LSN ranges are disjoint and increasing: files read
        # in different micro-batches must not overlap, the later batch wins
        for (_, a), (_, b) in zip(files[1:], files[2:], strict=False):
            assert max(c.lsn for c in a) < min(c.lsn for c in b)
        rnd = Round(len(self.rounds), files)
        self.rounds.append(rnd)
        return rnd

    @property
    def changes(self) -> list[Change]:
        return [c for rnd in self.rounds for c in rnd.changes]


def write_round(directory: Path, rnd: Round, mtime_base: float) -> None:
    """Write the round's files atomically (temp name, rename), modification times increasing with
    the file number so Spark's file source reads them in LSN order."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, changes in rnd.files:
        final = directory / name
        tmp = directory / f".{name}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            for c in changes:
                fh.write(json.dumps(c.event(), ensure_ascii=False) + "\n")
        number = int(name.split("-")[1].split(".")[0])
        t = mtime_base + number
        os.utime(tmp, (t, t))
        os.replace(tmp, final)


def expected_state(changes: Iterable[Change]) -> dict[Key, Row]:
    """Replay the changelog in position (LSN) order: the latest state per key."""
    state: dict[Key, Row] = {}
    for c in sorted(changes, key=lambda c: c.lsn):
        if c.op == "d":
            state.pop(c.key, None)
        else:
            assert c.after is not None
            state[c.key] = c.after
    return state


def as_tuples(state: dict[Key, Row]) -> list[tuple[Any, ...]]:
    """Expected rows as the readers in ``tests/support/readers.py`` return them (sorted tuples)."""
    out = []
    for row in state.values():
        ts = dt.datetime.strptime(row["ts"], "%Y-%m-%dT%H:%M:%SZ")
        out.append((row["region"], row["id"], row["name"], row["qty"], ts))
    return sorted(out, key=repr)


def as_dicts(state: dict[Key, Row]) -> list[dict[str, Any]]:
    """Expected rows as dicts (for ``readers.canonical_digest``)."""
    return [dict(zip(COLUMNS, t, strict=True)) for t in as_tuples(state)]


MIN_FILE_CHANGES = 20


def _shortest(cuts: list[int], n: int) -> int:
    bounds = [0, *cuts, n]
    return min(b - a for a, b in zip(bounds, bounds[1:], strict=False))
