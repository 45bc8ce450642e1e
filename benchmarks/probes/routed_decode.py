"""Probe: what a routed sink's decode of Kafka Connect JSON events costs, and what it would cost
if each table's schema block were read once (issue 53's many-tables benchmark).

Reads ``--files`` files of the tables benchmark's routed stream (``benchmarks/tables.py``: every
table's events interleaved) into one Arrow batch of messages, as the routed sink receives them, and
times ``sources.connect.split_messages`` on it:

* ``engine``: as the engine runs it (every message's schema parsed again);
* ``schema once``: the same call with ``connect._event`` replaced, in this process only, by one
  that keys the parsed ``after`` fields on the message's raw schema text and ``json.loads`` only
  the payload (the engine is not changed: a measure of what that change would buy);
* ``json.loads only``: ``json.loads`` of every whole message, the floor of any per-message parse.

Both decodes are checked to give the same tables and rows. No Spark, one process.

Usage: ``.venv/bin/python -m benchmarks.probes.routed_decode [--data DIR] [--files 3]`` (as a module:
run as a script, this directory's ``select.py`` shadows the standard library's).

29 Nov 2026, 3 files (60,000 messages, 105 MB, 100 tables), load 10: engine 67.4 us/message,
schema once 35.2 us/message (same tables and rows), json.loads of the whole message alone 43.8 us.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from icesql.engine.base.changelog import BLK, FILE, LINE
from icesql.engine.sources import connect
from icesql.routing import parse_template

HEAD = '{"schema":'
SEP = ',"payload":'


def _batch(files: list[Path]) -> pa.Table:
    lines = [ln for f in files for ln in f.read_text().splitlines() if ln.strip()]
    n = len(lines)
    return pa.table({"key": pa.nulls(n, pa.string()), "value": pa.array(lines, pa.string()),
                     FILE: pa.array(["f"] * n, pa.string()), BLK: pa.array([0] * n, pa.int64()),
                     LINE: pa.array(range(n), pa.int64())})


def _schema_once() -> Any:
    cache: dict[str, list[connect.ConnectField]] = {}
    original = connect._event

    def event(value: str | None) -> tuple[list[connect.ConnectField], Any]:
        if value is None or not value.startswith(HEAD) or SEP not in value:
            return original(value)
        i = value.index(SEP)
        head = value[len(HEAD):i]
        fields = cache.get(head)
        if fields is None:
            fields, _ = original(value)
            cache[head] = fields
        payload = json.loads(value[i + len(SEP):-1])
        if not isinstance(payload, dict) or payload.get("op") not in ("c", "u", "d", "r"):
            return original(value)
        return fields, payload

    return event


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/tmp/icesql-bench/data/tables-100x20000")
    ap.add_argument("--files", type=int, default=3)
    a = ap.parse_args()
    files = sorted(Path(a.data, "routed").iterdir())[: a.files]
    batch = _batch(files)
    template = parse_template("{table}")
    t0 = time.perf_counter()
    split = connect.split_messages(batch, template, topics=False, fallback_key=("id",))
    engine_s = time.perf_counter() - t0
    original = connect._event
    connect._event = _schema_once()
    try:
        t0 = time.perf_counter()
        split2 = connect.split_messages(batch, template, topics=False, fallback_key=("id",))
        once_s = time.perf_counter() - t0
    finally:
        connect._event = original
    same = ({n: len(p.rows) for n, p in split.tables.items()} == {n: len(p.rows) for n, p in split2.tables.items()}
            and all(split.tables[n].rows == split2.tables[n].rows for n in split.tables))
    values = batch.column("value").to_pylist()
    t0 = time.perf_counter()
    for v in values:
        json.loads(v)
    loads_s = time.perf_counter() - t0
    n = batch.num_rows
    mb = sum(len(v) for v in values) / 2**20
    print(f"{n:,} messages ({mb:.0f} MB) of {len(split.tables)} tables, {len(split.bad)} bad; same result: {same}")
    for what, s in (("engine", engine_s), ("schema once", once_s), ("json.loads only", loads_s)):
        print(f"  {what:16s} {s:6.2f} s  {n / s:9,.0f} messages/s  {s / n * 1e6:6.1f} us/message")


if __name__ == "__main__":
    main()
