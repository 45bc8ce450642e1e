"""ON ERROR where records are read: the record guard (fail, skip or dead-letter a bad record), the
accumulators that bring dead letters and skip counts to the driver, and the dead-letter rows'
schema.
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from icesql.engine.base.arrays import repeated
from icesql.engine.base.changelog import BLK, CORRUPT, FILE, INTERNAL_COLUMNS, LINE
from icesql.engine.base.wire import BAD_RECORD_MARKER, clip_text, marked_message, short_path
from icesql.errors import ExecutionError
from icesql.plan import OnError, SourcePlan

MAX_RAW = 1 << 20  # a raw record longer than this is kept clipped (1 MiB)


# The dead-letter table's columns, in Spark's schema JSON (``tables.ensure_table`` maps them to
# Iceberg types: string, long, timestamptz; every column optional).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("sink", "string"),  # the sink's name
    ("sink_id", "string"),  # its stable id (``icesql.sink-id`` of the target's snapshots)
    ("batch_id", "long"),  # the sink's progress of the batch that read the record
    ("source", "string"),  # the icesql source that read it
    ("file", "string"),  # the input file
    ("byte_offset", "long"),  # byte offset of the file split that held the record (0: the first)
    ("record", "long"),  # 1-based ordinal in that split; its line when byte_offset is 0 (CSV header counted)
    ("reason", "string"),  # malformed-json, malformed-csv, type-mismatch, field-count, debezium-op, ...
    ("error", "string"),  # what is wrong with it, as ON ERROR = 'fail' would say
    ("raw", "string"),  # the record's text (a parsed Debezium event's JSON when it parsed)
    ("recorded_at", "timestamp"),  # when the sink read it (UTC)
)


POSITION = ("source", "file", "byte_offset", "record")


# the ``reason`` labels ``sources.guard.RecordGuard`` gives (metrics create their zero series)
REASONS = (
    "malformed-json",
    "malformed-csv",
    "field-count",
    "type-mismatch",
    "debezium-op",
    "debezium-image",
    "unparsable",
    "schema-registry",
)


def arrow_schema() -> Any:
    """``COLUMNS`` as the Arrow schema of the rows ``DeadLetters.write`` writes."""
    import pyarrow as pa

    types = {"string": pa.string(), "long": pa.int64(), "timestamp": pa.timestamp("us", tz="UTC")}
    return pa.schema([(n, types[t]) for n, t in COLUMNS])


def spark_schema_json() -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in COLUMNS],
    }


class LettersParam:
    """Spark's ``AccumulatorParam`` (duck-typed) of lists of dead-letter records (dicts);
    picklable by reference, so workers rebuild it from this module."""

    def zero(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return []

    def addInPlace(self, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:  # noqa: N802
        a.extend(b)
        return a


def letter_accumulator(backend: Any) -> Any:
    """A fresh accumulator for a relation's dead letters (classic Spark, or this process; Spark
    Connect has none)."""
    acc = backend.accumulator([], LettersParam())
    if acc is None and backend.name == "connect":
        raise ExecutionError(
            "ON ERROR = 'dead-letter' needs classic Spark (a local or cluster master): Spark "
            "Connect has no accumulators to bring bad records back to the driver",
            hint="use ON ERROR = 'skip' or 'fail' on Spark Connect",
        )
    return acc


def take_letters(accumulators: Iterable[Any]) -> list[dict[str, Any]]:
    """Every dead letter the accumulators gathered since the last call (once per position),
    leaving them empty (driver side, between batches)."""
    seen: set[tuple[Any, ...]] = set()
    out: list[dict[str, Any]] = []
    for acc in accumulators:
        letters = list(acc.value or [])
        acc.value = []
        for letter in letters:
            k = tuple(letter.get(c) for c in POSITION)
            if k not in seen:
                seen.add(k)
                out.append(letter)
    out.sort(
        key=lambda x: (
            str(x.get("source")),
            str(x.get("file")),
            int(x.get("byte_offset") or 0),
            int(x.get("record") or 0),
        )
    )
    return out


class BadRecordError(ExecutionError):
    """A record that cannot be parsed or converted (``ON ERROR = 'fail'``)."""


class SumAccumulator:
    def __init__(self, accs: list[Any]) -> None:
        self.accs = accs

    @property
    def value(self) -> int:
        return sum(int(a.value) for a in self.accs)


def on_error_policy(plan: SourcePlan, on_error: OnError | None) -> OnError:
    # dead-letter, else skip, when either the source or the sink says so (both default to
    # fail): keeping a bad record beats dropping it, dropping it beats stopping the sink
    for policy in (OnError.DEAD_LETTER, OnError.SKIP):
        if policy in (on_error, plan.on_error):
            return policy
    return OnError.FAIL


def letter_accumulators(backend: Any, policy: OnError) -> tuple[Any, ...]:
    """The dead-letter accumulators of a relation read with ``policy`` on ``backend``."""
    if policy is not OnError.DEAD_LETTER:
        return ()
    acc = letter_accumulator(backend)
    return (acc,) if acc is not None else ()


def skip_counter(backend: Any, policy: OnError) -> Any:
    """The counter of records skipped under ``policy`` (None where the backend keeps no counters:
    skipped records are then only logged)."""
    if policy is not OnError.SKIP:
        return None
    return backend.accumulator(0)


class RecordGuard:
    """Executor-side check of parsed records (picklable; runs inside ``mapInArrow``)."""

    def __init__(
        self,
        *,
        source: str,
        fmt: str,
        columns: list[str],
        header: bool,
        skip: bool,
        debezium: bool,
        counter: Any,
        letters: Any = None,
    ) -> None:
        self.source = source
        self.fmt = fmt
        self.columns = columns
        self.header = header
        self.skip = skip
        self.debezium = debezium
        self.counter = counter
        self.letters = letters  # dead letters go here instead of failing the task

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        ordinals: dict[tuple[str, int], int] = {}
        letters: list[dict[str, Any]] = []
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            names = batch.schema.names
            files = batch.column(names.index(FILE)).to_pylist()
            blks = batch.column(names.index(BLK)).to_pylist()
            lines = []
            for f, b in zip(files, blks, strict=True):
                k = (f, b)
                i = ordinals.get(k, 0)
                ordinals[k] = i + 1
                lines.append(i)
            corrupt = batch.column(names.index(CORRUPT))
            bad = pc.is_valid(corrupt)
            if self.debezium:
                bad = pc.or_(bad, self._bad_events(batch))
            keep_idx = names.index(CORRUPT)
            out = batch.remove_column(keep_idx)
            if self.debezium:
                out = out.append_column(LINE, pa.array(lines, pa.int64()))
            if pc.any(bad).as_py():
                rows = batch.to_pylist()
                out = self.drop_bad(  # the lambdas run inside this call, on this batch's lists
                    out,
                    bad,
                    letters,
                    lambda i: self.letter(rows[i], files[i], blks[i], lines[i]),  # noqa: B023
                    lambda i: self.describe(rows[i], files[i], blks[i], lines[i]),  # noqa: B023
                )
            if out.num_rows:
                yield out
        if letters:
            self.letters.add(letters)  # once the task is through: a failed task adds nothing

    def drop_bad(
        self,
        out: Any,
        bad: Any,
        letters: list[dict[str, Any]],
        letter_of: Callable[[int], dict[str, Any]],
        describe_of: Callable[[int], str],
    ) -> Any:
        """``out`` without the rows ``bad`` marks, each one dealt with as ON ERROR says: kept as
        a dead letter (``letters``), skipped (logged and counted), or the task fails naming it."""
        import pyarrow.compute as pc

        bad_list = bad.to_pylist()
        for i, is_bad in enumerate(bad_list):
            if not is_bad:
                continue
            if self.letters is not None:
                letters.append(letter_of(i))
                continue
            msg = describe_of(i)
            if not self.skip:
                raise ValueError(BAD_RECORD_MARKER + msg + "|END")
            logging.getLogger("icesql.sources").warning("skipping bad record: %s", msg)
        if self.skip and self.counter is not None:
            self.counter.add(sum(1 for b in bad_list if b))
        return out.filter(pc.invert(bad))

    def _bad_events(self, batch: Any) -> Any:
        """Per row: is this Debezium event unusable? (``op`` not c/u/d/r, a delete without
        ``before``, another op without ``after``; the enveloped ``payload`` when it is there).

        Vectorised with Arrow compute: converting the ``before``/``after``/``payload`` structs to
        Python dicts was most of a change batch's time (measured: ~2/3 of the Python workers'
        time of a 100k-change upsert batch)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        names = batch.schema.names
        n = batch.num_rows

        def top(name: str) -> Any:
            return batch.column(names.index(name)) if name in names else pa.nulls(n)

        payload = batch.column(names.index("payload")) if "payload" in names else None
        has_payload = pc.is_valid(payload) if payload is not None else repeated(False, n, pa.bool_())

        def ev(name: str) -> Any:
            outer = top(name)
            if payload is None or payload.type.get_field_index(name) < 0:
                return outer, pc.is_valid(outer)
            inner = pc.struct_field(payload, name)
            valid = pc.if_else(has_payload, pc.is_valid(inner), pc.is_valid(outer))
            if name != "op":
                return None, valid
            if outer.type != inner.type:
                outer = outer.cast(inner.type)
            return pc.if_else(has_payload, inner, outer), valid

        op, _ = ev("op")
        _, before_ok = ev("before")
        _, after_ok = ev("after")
        known = pc.fill_null(pc.is_in(op, value_set=pa.array(["c", "u", "d", "r"])), False)
        is_delete = pc.fill_null(pc.equal(op, "d"), False)
        missing = pc.if_else(is_delete, pc.invert(before_ok), pc.invert(after_ok))
        return pc.or_(pc.invert(known), missing)

    def describe(self, row: dict[str, Any], file: str, blk: int, line: int) -> str:
        where = f"source '{self.source}', file '{short_path(file)}'"
        if blk == 0:
            where += f", record {line + 1}"
        else:
            where += f", record {line + 1} of the split at byte {blk}"
        raw = row.get(CORRUPT)
        field, why, _ = self._diagnose(row, raw)
        snippet = "" if raw is None else f": {clip_text(raw)}"
        return f"{where}, field '{field}': {why}{snippet}" if field else f"{where}: {why}{snippet}"

    def letter(self, row: dict[str, Any], file: str, blk: int, line: int) -> dict[str, Any]:
        """A bad record as the dead-letter table keeps it (``deadletter.COLUMNS``)."""
        raw = row.get(CORRUPT)
        field, why, reason = self._diagnose(row, raw)
        if raw is None:  # it parsed (a Debezium event without a known op): its JSON
            parsed = {k: v for k, v in row.items() if k not in INTERNAL_COLUMNS and v is not None}
            raw = json.dumps(parsed, default=str, sort_keys=True)
        return {
            "source": self.source,
            "file": short_path(file),
            "byte_offset": int(blk or 0),
            # its line when the split starts the file (a CSV header counted), as editors number
            "record": line + 1 + (1 if self.header and not blk else 0),
            "reason": reason,
            "error": f"field '{field}': {why}" if field else why,
            "raw": raw,
        }

    def _diagnose(self, row: dict[str, Any], raw: str | None) -> tuple[str | None, str, str]:
        """(field, what is wrong, reason: a short label for metrics and the dead-letter table)."""
        if self.fmt == "csv":
            if raw is None:
                return None, "cannot parse the record", "unparsable"
            try:
                values = next(csv.reader([raw]))
            except Exception:
                return None, "malformed CSV record", "malformed-csv"
            if '"' in raw:
                try:  # Spark's reader takes stray quotes as text, and the fields then shift
                    next(csv.reader([raw], strict=True))
                except csv.Error as e:
                    return None, f"malformed CSV record: broken quoting ({e})", "malformed-csv"
            if len(values) != len(self.columns):
                return None, f"expected {len(self.columns)} fields, found {len(values)}", "field-count"
            for name, value in zip(self.columns, values, strict=True):
                if value != "" and row.get(name) is None:
                    return name, f"cannot convert {value!r} to the declared type", "type-mismatch"
            return None, "cannot parse the record", "unparsable"
        parsed: Any = None
        if raw is not None:
            try:
                parsed = json.loads(raw)
            except Exception:
                return None, "malformed JSON", "malformed-json"
            if not isinstance(parsed, dict):
                return None, "a JSON record must be an object", "malformed-json"
        if self.debezium:
            env_raw = parsed.get("payload", parsed) if isinstance(parsed, dict) else None
            env_row = row.get("payload") or row
            if env_raw is None:
                env_raw = env_row
            op = env_raw.get("op")
            if op not in ("c", "u", "d", "r"):
                return "op", f"unknown Debezium operation {op!r} (expected c, u, d or r)", "debezium-op"
            image = "before" if op == "d" else "after"
            if env_raw.get(image) is None:
                return image, f"op '{op}' needs a '{image}' row image", "debezium-image"
            path = mismatch(env_raw, env_row, "")
            if path:
                return path, "value does not match the declared type", "type-mismatch"
            return None, "cannot parse the record", "unparsable"
        if isinstance(parsed, dict):
            path = mismatch(parsed, row, "")
            if path:
                return path, "value does not match the declared type", "type-mismatch"
        return None, "cannot parse the record", "unparsable"


def mismatch(raw: Any, parsed: Any, prefix: str) -> str | None:
    """The first field present in ``raw`` whose parsed value is missing (dotted path)."""
    if not isinstance(raw, dict):
        return None
    parsed = parsed if isinstance(parsed, dict) else {}
    for k, v in raw.items():
        if v is None:
            continue
        path = f"{prefix}{k}"
        if k not in parsed:
            # match case-insensitively, as Spark does
            match = next((pk for pk in parsed if pk.lower() == k.lower()), None)
            if match is None:
                continue
            pv = parsed[match]
        else:
            pv = parsed[k]
        if pv is None:
            return path
        if isinstance(v, dict):
            deeper = mismatch(v, pv, path + ".")
            if deeper:
                return deeper
    return None


def translate_bad_record(exc: BaseException) -> BadRecordError | None:
    """Turn a Spark failure caused by ``RecordGuard`` into a ``BadRecordError``."""
    body = marked_message(exc, BAD_RECORD_MARKER)
    if body is None:
        return None
    return BadRecordError(
        f"bad record in {body}",
        hint="fix the input, or skip bad records with WITH (ON ERROR = 'skip')",
    )
