"""Text the shell and the CLI print: aligned tables, result tags, sink status lines.

Pure functions over plain values (a ``Result`` or ``SinkStatus`` is read through attributes
only), shared by ``icesql.repl.shell`` and ``icesql.cli``.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value).replace("\n", "\\n")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def format_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A psql-style aligned table (numbers right-aligned) with a row count footer::

     name   | kind
    --------+--------
     orders | source
    (1 row)
    """
    raw = [list(row) for row in rows]
    body = [[_cell(v) for v in row] for row in raw]
    widths = [_width(c) for c in columns]
    for row in body:
        for i, v in enumerate(row[: len(widths)]):
            widths[i] = max(widths[i], _width(v))
    numeric = [
        any(_is_number(r[i]) for r in raw if i < len(r))
        and all(_is_number(r[i]) or r[i] is None for r in raw if i < len(r))
        for i in range(len(columns))
    ]

    def line(values: Sequence[str], right: Sequence[bool]) -> str:
        cells = []
        for i, w in enumerate(widths):
            v = values[i] if i < len(values) else ""
            pad = " " * (w - _width(v))
            cells.append(f" {pad}{v} " if right[i] else f" {v}{pad} ")
        return "|".join(cells).rstrip()

    out = [line(list(columns), [False] * len(columns)), "+".join("-" * (w + 2) for w in widths)]
    out += [line(row, numeric) for row in body]
    n = len(body)
    out.append(f"({n} row{'s' if n != 1 else ''})")
    return "\n".join(out)


def _plain(value: object) -> object:
    """A value as JSON carries it: numbers, strings, booleans and null as they are; dates,
    timestamps, decimals and the rest as their text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "asDict"):  # a Spark Row (a struct column)
        return _plain(value.asDict())
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def format_csv(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """RFC 4180 CSV with a header line; null is an empty field."""
    import csv
    import io
    import json

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(
            ["" if v is None else json.dumps(_plain(v)) if isinstance(v, (list, tuple, dict)) else _plain(v) for v in row]
        )
    return out.getvalue()


def format_json_lines(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """One JSON object per row (JSON lines), keys in column order."""
    import json

    return "".join(
        json.dumps({c: _plain(v) for c, v in zip(columns, row, strict=True)}, ensure_ascii=False) + "\n" for row in rows
    )


def format_result(result: Any) -> str:
    """A statement's result: its table (when it has columns) or its tag, then warnings."""
    parts = []
    if result.columns:
        parts.append(format_table(result.columns, result.rows))
    else:
        parts.append(result.message)
    return "\n".join(parts)


def format_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def format_compaction(result: Any) -> str:
    """One line for an ``icesql.engine.maintenance.compact.CompactResult`` (CLI and shell)."""
    r = result
    full = getattr(r.mode, "value", "full") == "full"
    if r.skipped:
        if full:
            return (
                f"{r.table}: nothing to compact ({r.data_files_before} data file(s), at most one "
                "per partition, no delete files)"
            )
        return (
            f"{r.table}: nothing to compact ({r.data_files_before} data file(s), "
            f"{r.delete_files_before} delete file(s): below the thresholds)"
        )
    kept = f", {r.data_files_kept} kept as they were" if r.data_files_kept else ""
    left = f" + {r.delete_files_after} delete file(s)" if r.delete_files_after else ""
    rebased = f", rebased {r.rebased}x" if r.rebased else ""
    return (
        f"{r.table}: {r.data_files_before} data + {r.delete_files_before} delete file(s) "
        f"({format_bytes(r.bytes_before)}) -> {r.data_files_after} data file(s){left} "
        f"({format_bytes(r.bytes_after)}{kept}), {r.rows:,} rows ({r.deleted_rows:,} deleted rows dropped), "
        f"snapshot {r.snapshot_id}, {r.duration:.1f}s{rebased}"
    )


def format_maintenance_step(result: Any) -> str:
    """One line for what one maintenance step did (``icesql.engine.maintenance`` results), or,
    for a compaction in a dry run, would do (its ``Task``)."""
    kind = getattr(result, "kind", None)
    kind = getattr(kind, "value", kind)
    dry = getattr(result, "dry_run", False)
    would = "would " if dry else ""
    if kind == "compact" and hasattr(result, "weight"):  # a Task: a dry run's compaction
        return (
            f"compact: would rewrite: {result.reason} ({format_bytes(result.read_bytes)} to read, "
            f"{result.weight.value})"
        )
    if kind == "expire":
        if not result.expired:
            return f"expire: no snapshot to expire ({result.snapshots_before} kept)"
        protected = f", {len(result.protected)} old one(s) kept for a sink's progress" if result.protected else ""
        return (
            f"expire: {would}expire {len(result.expired):,} snapshot(s) "
            f"({result.snapshots_before:,} -> {result.snapshots_after:,}){protected}, "
            f"{would}delete {result.files_deleted:,} file(s) ({format_bytes(result.bytes_deleted)}), "
            f"{result.duration:.1f}s"
        )
    if kind == "remove-metadata":
        failed = f", {result.files_failed} could not be deleted" if result.files_failed else ""
        left = f", {result.remaining:,} left for the next run" if result.remaining else ""
        return (
            f"remove-metadata: {would}delete {len(result.deleted):,} of {result.files_listed:,} metadata "
            f"file(s) older than the metadata log ({format_bytes(result.bytes_deleted)}){failed}{left}, "
            f"{result.duration:.1f}s"
        )
    if kind == "remove-orphans":
        where = result.location.rstrip("/").rsplit("/", 1)[-1]
        kept = []
        if result.kept_recent:
            kept.append(f"{result.kept_recent} newer than the safety age")
        if result.kept_protected:
            kept.append(f"{result.kept_protected} staged")
        also = f" (kept: {', '.join(kept)})" if kept else ""
        return (
            f"remove-orphans {where}/: {would}delete {len(result.deleted):,} of {result.files_listed:,} "
            f"file(s) ({format_bytes(result.bytes_deleted)}){also}, {result.duration:.1f}s"
        )
    if kind == "rewrite-manifests":
        if dry:
            return f"rewrite-manifests: would merge {result.manifests_rewritten} of {result.manifests_before} manifests"
        if result.skipped:
            return f"rewrite-manifests: nothing to merge ({result.manifests_before} manifests)"
        return (
            f"rewrite-manifests: {result.manifests_before} -> {result.manifests_after} manifests "
            f"({result.manifests_rewritten} merged, {result.entries:,} entries), "
            f"snapshot {result.snapshot_id}, {result.duration:.1f}s"
        )
    if hasattr(result, "data_files_before"):  # a CompactResult
        return "compact: " + format_compaction(result).split(": ", 1)[1]
    return str(result)  # pragma: no cover


def format_maintenance(run: Any) -> list[str]:
    """The lines of one sink's ``MaintenanceRun``: one per step, or one saying why none ran."""
    head = f"{run.sink}: {run.table}: " if run.sink else f"{run.table}: "
    if run.off:
        return [head + "maintenance is off (MAINTENANCE = 'off')"]
    if not run.results:
        return [head + "nothing due"]
    return [head + format_maintenance_step(r) for r in run.results]


def format_age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def format_state(status: Any, now: float) -> str:
    """The state, with the attempt and the time to the next one while a sink is retrying."""
    if status.state != "retrying":
        return str(status.state)
    nxt = getattr(status, "next_attempt_at", None)
    when = "" if nxt is None else f", next in {max(0.0, nxt - now):.0f}s"
    return f"retrying (attempt {getattr(status, 'retry_attempt', 0)}{when})"


def status_line(status: Any, now: float | None = None) -> str:
    """One sink in one line: ``orders running rows=1200 bytes=1.2 MiB commit 3s ago``."""
    now = time.time() if now is None else now
    last = status.last_commit_at
    text = (
        f"{status.name} {format_state(status, now)} rows={status.rows_committed} "
        f"bytes={format_bytes(status.bytes_committed)} "
        f"commit {format_age(None if last is None else now - last)}"
    )
    if status.last_error:
        error = str(status.last_error).splitlines()[0]
        text += f" error: {error[:80]}"
    return text


STATUS_COLUMNS = (
    "name",
    "state",
    "rows",
    "bytes",
    "last commit",
    "snapshot",
    "lag",
    "source lag",
    "dead letters",
    "last error",
)


def status_rows(statuses: Iterable[Any], now: float | None = None) -> list[tuple[object, ...]]:
    now = time.time() if now is None else now
    rows: list[tuple[object, ...]] = []
    for s in statuses:
        last = s.last_commit_at
        rows.append(
            (
                s.name,
                format_state(s, now),
                s.rows_committed,
                format_bytes(s.bytes_committed),
                format_age(None if last is None else now - last),
                s.last_snapshot_id,
                None if s.lag is None else f"{s.lag:.1f}s",
                None if getattr(s, "source_lag", None) is None else f"{s.source_lag} records",
                s.dead_letters,
                (str(s.last_error).splitlines() or [""])[0] if s.last_error else None,
            )
        )
    return rows
