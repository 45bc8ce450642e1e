"""One sink, many tables (issue 53): a routed sink's runner and its tables.

A sink whose TABLE is a template (``icesql.routing``) reads Debezium events that carry their schemas
(``sources.connect``) and writes each to the table its template names. It is one query, one consumer
set and one commit loop: ``RoutedRunner`` is a ``SinkRunner`` whose batch is split by table
(``RoutedWriter``), each table's slice written by the single-table batch writer
(``batch.BatchWriter`` over an in-process ``LocalFrame``, the same code on both executors) and
staged in that table's own staging (``TableSink``, a ``committer.Committing`` per table).

Exactly once, per table: every table commits its own snapshots, whose summaries carry the sink's id,
version and progress as a single-table sink's do. A batch replayed after a crash skips each table
already at that progress (staged or committed), so a crash between two tables' commits neither
loses nor repeats anything; recovery commits each table's staged batches. A table whose commit
conflicts with another writer retries alone (``commit.snapshot``). Spark's checkpoint stays one per
sink. Tables with nothing in a batch are not touched.

Each table: created on first sight (its namespace too) with the columns of its events' ``after``
schema, KEY = its records' key (the sink's KEY where a record has none) as identifier fields, the
sink's PARTITION BY where its columns exist (and, for an upsert, are in the key), MODE from the sink;
a new field in its events widens it alone (``iceberg.tables.ensure_table``'s evolution). An upsert
table deletes replaced rows by position through its own key index (``sink.key_index``), or by
equality with DELETE MODE = 'equality'; a table idle in a batch, with nothing staged, lets its
writer, index and maintainer go (``TableSink.release``), and the shards the index loads share one
bounded cache (``index.task``), so memory follows the tables a batch holds, not the tables the sink
has. Each table is maintained as a single-table sink's table is, by a ``Maintainer`` of its own
made as it commits (``routed_maintenance``); ``icesql maintain`` / ``compact`` of the sink run
over every table it has written (``Engine.maintain``).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from icesql.engine.base.hooks import kill_point, mark
from icesql.engine.base.wire import DROPPED, FALLBACK
from icesql.engine.commit.policy import CommitClock
from icesql.engine.commit.recovery import Progress, committed_progress, recover
from icesql.engine.commit.staging import StagedBatch, Staging
from icesql.engine.sink.committer import Committing
from icesql.engine.sink.routed_maintenance import RoutedMaintainer
from icesql.engine.sink.runner import SinkRunner
from icesql.errors import ExecutionError
from icesql.plan import DeleteMode, OnError, SinkMode, SinkPlan, SourceFormat

log = logging.getLogger("icesql.sink")
TABLES = "tables"  # <sink dir>/tables/<quoted table name>/staging
# How a routed sink splits its source's messages by table, by the source's FORMAT: the module whose
# ``splitter(relation)`` gives the ``connect.split_messages``-compatible function
SPLITTERS = {
    SourceFormat.DEBEZIUM_JSON: "icesql.engine.sources.connect_bulk",  # each message carries its schema
    SourceFormat.AVRO: "icesql.engine.sources.registry.routed",  # each record names its schema id
}


class TableSink(Committing):
    """One table of a routed sink: its plan (the sink's, with this table's name, KEY and
    partitioning), its Iceberg table, staging and progress, committed by the ``Committing`` every
    sink commits with."""

    def __init__(self, runner: RoutedRunner, name: str) -> None:
        self.runner = runner
        self.table_name = name
        self.name = runner.name
        self.sink_id = runner.sink_id
        self.staging = Staging(runner.sink_dir / TABLES / quote(name, safe="") / "staging")
        self.progress = Progress()
        self.recovered = False
        self.plan: SinkPlan = dataclasses.replace(runner.plan, table=name)
        self.table: Any = None
        self.writer: Any = None
        self.schema_key: Any = None  # the columns and key the table was last checked against
        self.key_index: Any = None  # sink.key_index.SinkKeyIndex, open while the table is busy
        self.remote = False  # a routed sink never runs on Spark Connect (``RoutedRunner.prepare``)
        self.dead_letters = None  # the sink's dead letters are committed by the sink
        self.dead_letter_count = 0
        self.clock = CommitClock(runner.plan.commit)
        prior = runner.prior_tables.get(name, {})  # what earlier runs committed to it (the store)
        self.totals = {k: int(prior.get(k) or 0) for k in ("rows_committed", "bytes_committed", "files_committed", "commits")}
        self.seeded = dict(self.totals)
        self.last_commit_at: float | None = prior.get("last_commit_at")
        self.last_snapshot_id: int | None = prior.get("last_snapshot_id")
        self.last_error: str | None = prior.get("last_error")
        self._compaction_hinted = False
        self._skipped_seen = 0
        self.skipped_records = 0
        self.fallback_files = 0

    # what Committing and the table's Maintainer read of the sink's runner
    @property
    def maintainer(self) -> Any:
        """The table's ``Maintainer``, made as it commits (``routed_maintenance``)."""
        return self.runner.maintainer.of(self)

    @property
    def version(self) -> Any:
        return self.runner.version

    @property
    def home(self) -> Path:
        return self.runner.home

    @property
    def once(self) -> bool:
        return self.runner.once

    @property
    def stop_event(self) -> threading.Event:
        return self.runner.stop_event

    @property
    def listeners(self) -> Any:
        return self.runner.listeners

    @property
    def lock(self) -> Any:
        return self.runner.lock

    @property
    def source(self) -> Any:
        return self.runner.source

    @property
    def relation(self) -> Any:
        return self.runner.relation

    @property
    def status(self) -> str:
        return self.runner.status

    @property
    def stopping(self) -> bool:
        return self.runner.stopping

    @property
    def progress_base(self) -> int:
        return self.runner.progress_base

    @property
    def committed_progress(self) -> int:
        return self.progress.committed

    @property
    def backend(self) -> Any:
        return self.runner.backend

    @property
    def target(self) -> Any:
        return self.runner.target

    @property
    def batch_started(self) -> float | None:
        return self.runner.batch_started

    @property
    def index(self) -> Any:
        """The key index (``index.store.Manifest``) of an upsert table deleting by position."""
        return self.key_index.manifest if self.key_index is not None else None

    @property
    def position_deletes(self) -> bool:
        return self.plan.mode is SinkMode.UPSERT and self.plan.delete_mode is DeleteMode.POSITION

    def drop_batch_writer(self) -> Any:
        """Forget the batch writer; the newest key index its batches wrote, if any."""
        latest = getattr(self.writer, "manifest", None)
        self.writer = None
        return latest

    def release(self) -> None:
        """An idle table with nothing staged lets its writer and key index go (reopened from the
        index's files when a change for it comes): memory follows the tables a batch has, not
        all the tables the sink writes. Its maintainer goes too, unless its maintenance has
        something running or deferred (which keeps the key index it follows)."""
        if self.staging.pending() or self.runner.maintainer.holds(self.table_name):
            return
        self.writer = None
        self.key_index = None
        self.runner.maintainer.release(self.table_name)

    def _update(self, **fields: Any) -> None:
        self.record(**fields)  # the sink's own row sums its tables (``RoutedRunner._update_totals``)

    def record(self, **fields: Any) -> None:
        """Keep some of this table's state in the store (its row under the sink), when the
        runner's state keeps tables; reporting never fails the sink."""
        if "last_error" in fields:
            self.last_error = fields["last_error"]
        update = getattr(self.runner.state, "update_table", None)
        if update is None:
            return
        try:
            update(self.name, self.table_name, **fields)
        except Exception:  # pragma: no cover - state reporting never kills a sink
            log.exception("sink %s: state update of table %s failed", self.name, self.table_name)

    # ------------------------------------------------------------------ the table

    def open(self, catalog: Any, schema_json: Any = None) -> None:
        """Load the table (creating it from ``schema_json`` when missing) and recover its staging."""
        from icesql.engine.iceberg.tables import ensure_table

        if schema_json is None:
            self.table = catalog.load_table((*self.plan.namespace, self.table_name))
        else:
            self.table = ensure_table(catalog, None, schema_json, self.plan)
        if not self.recovered:  # once: where the table stands, and what a crash left staged
            committed = committed_progress(
                self.table, self.sink_id, self.version, name=self.name, table_name=self.plan.table_identifier
            )
            self.progress = recover(self.staging, committed)
            self.recovered = True

    def conform(self, catalog: Any, piece: Any) -> None:
        """The table ready for ``piece``'s rows: created on first sight with its KEY and the
        sink's partitioning where it fits, widened when the rows bring new columns."""
        schema_json = piece.spark_schema_json()
        shape = (tuple(sorted((f["name"], f["type"]) for f in schema_json["fields"])), piece.key)
        if shape == self.schema_key and self.table is not None:
            return
        columns = {f["name"].lower() for f in schema_json["fields"]}
        upsert = self.runner.plan.mode is SinkMode.UPSERT
        key = tuple(piece.key)
        if upsert and not key:
            raise ExecutionError(
                f"sink {self.name}: table {self.plan.table_identifier} gets a record with no key, and "
                "the sink is MODE UPSERT",
                hint="give the records a key (Debezium: the table's primary key) or the sink a KEY",
            )
        partition = tuple(
            p
            for p in self.runner.plan.partition_by
            if p.source_column.lower() in columns
            and (not upsert or p.source_column.lower() in {k.lower() for k in key})
        )
        self.plan = dataclasses.replace(
            self.runner.plan, table=self.table_name, key=key if upsert else (), partition_by=partition
        )
        if self.staging.pending():
            self.commit("batch")  # the staged batches first, written against the index as it was
        self.open(catalog, schema_json)
        self.schema_key = shape
        self.writer = None
        self.key_index = None  # the index's key follows the table's (its shards hash the KEY's types)

    def batch_writer(self) -> Any:
        from icesql.engine.sink.batch import BatchWriter

        io = self.runner.target.io_properties(self.table)
        if self.writer is None:
            relation = self.runner.relation
            assert relation is not None
            self.writer = BatchWriter.for_sink(self.plan, self.table, io, relation.name)
            if self.position_deletes:
                from icesql.engine.sink.key_index import SinkKeyIndex

                if self.key_index is None:
                    self.key_index = SinkKeyIndex(self)
                    self.key_index.open()
                self.writer = self.key_index.writer(self.writer)
        else:
            self.writer.use_io(io)
        return self.writer

    def status_row(self) -> dict[str, Any]:
        pending = self.staging.pending()
        staged = sum(e.rows for e in pending)
        return {
            "table": self.plan.table_identifier,
            **self.totals,
            "last_commit_at": self.last_commit_at,
            "last_snapshot_id": self.last_snapshot_id,
            "last_progress": self.committed_progress if self.committed_progress >= 0 else None,
            "staged_rows": staged,
            # seconds this table's oldest uncommitted staged data has waited, as the sink's lag
            "lag": round(self.clock.since_commit(), 3) if pending else 0.0,
            "staged_since": min((e.created_at for e in pending), default=None),
            "last_error": self.last_error,
        }


class RoutedWriter:
    """The inner batch writer of a routed sink (``sources.pieces.PiecesBatchWriter`` hands it the
    batch's messages): split by table, each table's slice written by its own writer; returns the
    written files' rows, each naming its table."""

    upsert = False  # the pieces writer hands over the decoded messages either way (a changelog)

    def __init__(self, runner: RoutedRunner) -> None:
        self.runner = runner

    def use_io(self, io_properties: Any) -> None:
        pass  # each table's writer takes its FileIO properties anew per batch

    def __call__(self, changes: Any, spark_batch_id: int) -> list[dict[str, Any]]:
        from icesql.engine.backends.base import as_frame
        from icesql.engine.backends.local.frames import LocalFrame

        r = self.runner
        batch_id = r.progress_base + int(spark_batch_id)
        messages = as_frame(changes).arrow()
        split = r.split(
            messages, r.template, topics=r.topics, fallback_key=r.plan.key if r.plan.mode is SinkMode.UPSERT else ()
        )
        r.bad_messages(messages, split.bad, batch_id)
        out: list[dict[str, Any]] = []
        for name, piece in sorted(split.tables.items()):
            t = r.table_sink(name)
            if batch_id <= t.progress.staged_high:
                log.info("sink %s: batch %d already staged or committed in table %s", r.name, batch_id, name)
                continue
            try:
                t.conform(r.catalog, piece)
            except ExecutionError as e:
                if r.plan.on_error is OnError.FAIL:
                    raise
                r.bad_messages(messages, [(row, e.message) for row in piece.message_rows()], batch_id)
                t.record(last_error=e.message)
                continue
            frame = LocalFrame.of_table(piece.arrow(), r.backend_parallelism)
            rows = t.batch_writer()(frame, spark_batch_id)
            out += [{**row, "table": name} for row in rows]
            r.touched.add(name)
        return out


class RoutedRunner(SinkRunner):
    """A routed sink's runner: one query, one commit loop, a ``TableSink`` per table."""

    def __init__(self, plan: SinkPlan, **kwargs: Any) -> None:
        from icesql.routing import parse_template

        super().__init__(plan, **kwargs)
        self.template = parse_template(plan.table)
        self.tables: dict[str, TableSink] = {}
        self.touched: set[str] = set()  # tables written in the batch being staged
        self.catalog: Any = None
        self.letters_pending: list[dict[str, Any]] = []
        self.maintainer = RoutedMaintainer(self)  # each table's maintenance, as it commits
        self.tables_lock = threading.RLock()
        # what earlier runs committed to each table, and the sink's totals they started from: a
        # restarted sink's totals carry on (its tables' rows are kept by the store)
        stored = getattr(self.state, "tables", None)
        self.prior_tables: dict[str, dict[str, Any]] = {t["table"]: t for t in (stored(self.name) if stored else [])}
        self.seed_totals = dict(self.totals)
        self.split: Any = None  # the source's messages split by table (``splitter``), once prepared

    @property
    def topics(self) -> bool:
        plan = self._relation_plan()
        return getattr(plan, "kafka", None) is not None

    @property
    def backend_parallelism(self) -> int:
        return max(1, int(getattr(self.backend, "parallelism", 1) or 1))

    def table_sink(self, name: str) -> TableSink:
        with self.tables_lock:
            t = self.tables.get(name)
            if t is None:
                t = self.tables[name] = TableSink(self, name)
            return t

    # ------------------------------------------------------------------ start

    def prepare(self) -> None:
        self._set_status("starting")
        try:
            if self.remote:
                raise ExecutionError(
                    f"sink {self.name}: a routed sink (TABLE '{self.plan.table}') does not run on Spark "
                    "Connect yet",
                    hint="run it on a local or classic Spark master, or in icesql's own process",
                )
            self.version = int(self.state.bump_version(self.name))
            self.target = self._resolve_target()
            from icesql.engine.sources.kinds import progress_for

            source = progress_for(self, self._relation_plan())
            self.relation = self._relation_factory(self.backend, source.binding())
            if self.relation.arrow is None or not getattr(self.relation.arrow, "changelog", False):
                raise ExecutionError(
                    f"sink {self.name}: source {self.relation.name} cannot be routed here (its events "
                    "are read by Spark's parsers)",
                    hint="a routed sink reads Debezium JSON on icesql's Arrow path: leave reader options out",
                )
            self.split = splitter(self.relation, self._relation_plan())
            self.source = source.bound(self.relation)
            self.catalog = self.target.load_catalog()
            self._open_dead_letters(self.catalog)
            self._recover_tables()
            if self.relation.streaming and self.source.resumes_from_table:
                self._resume_source()
            mark("sink prepared (tables, recovery)")
        except BaseException as e:
            raise self.fail(e) from e

    def _recover_tables(self) -> None:
        """Each table this sink staged into: its committed progress, and its staged batches
        committed (reason ``recovery``)."""
        for name in table_names(self.sink_dir):
            t = self.table_sink(name)
            try:
                t.open(self.catalog)
            except Exception as e:  # noqa: BLE001 - a table never created (nothing staged)
                log.debug("sink %s: table %s not loaded at start: %s", self.name, name, e)
                del self.tables[name]
                continue
            if t.staging.pending():
                log.info("sink %s: recovering table %s", self.name, name)
                t.commit("recovery")
        self.progress = Progress()

    def _resume_source(self) -> None:
        from icesql.engine.commit.snapshot import last_committed_snapshot

        newest = max(
            (t for t in self.tables.values() if t.table is not None),
            key=lambda t: t.committed_progress,
            default=None,
        )
        last = last_committed_snapshot(newest.table, self.sink_id) if newest is not None else None
        base = self.source.resume(dict(last.properties) if last is not None else None)
        if base is not None:
            self.progress_base = base

    def _make_batch_writer(self) -> Any:
        assert self.relation is not None and self.relation.arrow is not None
        letters = self.relation.letters[0] if self.relation.letters else None
        return self.relation.arrow.batch_writer(RoutedWriter(self), skipped=self.relation.skipped, letters=letters)

    def batch_writer(self) -> Any:
        if self._writer is None:
            self._writer = self._make_batch_writer()
        return self._writer

    # ------------------------------------------------------------------ bad messages

    def bad_messages(self, messages: Any, bad: list[tuple[int, str]], batch_id: int) -> None:
        """Messages no table can take: the batch fails (ON ERROR = 'fail', the default), or they
        are skipped and counted, or kept as dead letters."""
        if not bad:
            return
        from icesql.engine.base.changelog import FILE, LINE

        row, reason = bad[0]
        where = f"{messages.column(FILE)[row].as_py()} at {messages.column(LINE)[row].as_py()}"
        if self.plan.on_error is OnError.FAIL:
            raise ExecutionError(
                f"sink {self.name}: message {where} of source {self.relation.name if self.relation else '?'}: "
                f"{reason}",
                hint="fix the producer, or add WITH (ON ERROR = 'dead-letter') to keep such messages aside",
            )
        log.warning("sink %s: %d message(s) of batch %d skipped, first %s: %s", self.name, len(bad), batch_id, where, reason)
        self.skipped_records += len(bad)
        if self.plan.on_error is OnError.DEAD_LETTER:
            from icesql.engine.base.changelog import BLK

            cols = messages.to_pylist()
            self.letters_pending += [
                {
                    "source": self.relation.name if self.relation else None,
                    "file": cols[i].get(FILE),
                    "byte_offset": cols[i].get(BLK),
                    "record": cols[i].get(LINE),
                    "reason": "unroutable",
                    "error": why,
                    "raw": _raw(cols[i].get("value")),
                }
                for i, why in bad
            ]

    # ------------------------------------------------------------------ batches

    def _process(self, batch_df: Any, spark_batch_id: int) -> None:
        batch_id = self.progress_base + spark_batch_id
        mark(f"batch {batch_id} started")
        kill_point("batch", batch_id)
        if self.error is not None:
            raise self.error
        started = time.time()
        self.touched = set()
        with self.lock:
            self.maintainer.before_batch()  # a rewrite a run --once deferred to this batch
            self.batch_started = started
        try:
            rows = self.batch_writer()(batch_df, spark_batch_id)
            mark(f"batch {batch_id} written")
            self._stage_tables(rows, batch_id)
            with self.lock:
                self.batch_started = None
                self.progress.staged_high = max(self.progress.staged_high, batch_id)
                committed = self.apply_policy(self._until_next_trigger(started))
                if not committed and self.touched and self.maintainer.wants_gap():
                    committed = self.commit("maintenance") is not None
        finally:
            self.batch_started = None
        if committed:
            kill_point("committed", batch_id)

    def _stage_tables(self, rows: list[dict[str, Any]], batch_id: int) -> None:
        """Each written table's files staged in its own staging; the source's position (what the
        batch consumed) recorded with every table's entry, so each table's summary carries it."""
        consumed = self.source.staged(rows, batch_id - self.progress_base) if self.source is not None else {}
        letters = self._letters(batch_id)
        for name in sorted(self.touched):
            mine = [r for r in rows if r.get("table") == name and r["content"] >= 0]
            dropped = sum(r["rows"] for r in rows if r.get("table") == name and r["content"] == DROPPED)
            entry = StagedBatch.of_files(batch_id, mine, **consumed, skipped=dropped)
            t = self.tables[name]
            with self.lock:
                t.staging.add(entry)
                t.progress.staged_high = batch_id
            mark(f"batch {batch_id} staged in table {name}")
            kill_point("table-staged", batch_id)
        if letters is not None:
            self.staging.add(letters)
        if self.touched or letters is not None:
            kill_point("staged", batch_id)
        fallbacks = sum(r["rows"] for r in rows if r["content"] == FALLBACK)
        self.fallback_files += fallbacks

    def _letters(self, batch_id: int) -> StagedBatch | None:
        """The batch's dead letters, staged in the sink's own staging (committed with the tables)."""
        if not self.letters_pending or self.dead_letters is None:
            return None
        pending, self.letters_pending = self.letters_pending, []
        files = self.dead_letters.write(pending, batch_id)
        return StagedBatch(
            batch_id=batch_id,
            dead_letter_files=tuple(files),
            dead_letters=len(pending),
            dead_letter_reasons={"unroutable": len(pending)},
        )

    # ------------------------------------------------------------------ commits

    def apply_policy(self, until_next_batch: float = 0.0) -> bool:
        reason = self.clock.reason(lambda: self._staged_bytes(), until_next_batch)
        return reason is not None and self.commit(reason) is not None

    def _staged_bytes(self) -> int:
        return sum(t.staging.totals()[1] for t in self.tables.values())

    def commit(self, reason: str) -> Any:
        """Every table with staged batches commits its own snapshot, one after the other (a
        table's conflict with another writer retries that table alone); the dead letters first."""
        with self.lock:
            self._commit_letters(reason)
            results = []
            done = 0
            for name in sorted(self.tables):
                t = self.tables[name]
                if not [e for e in t.staging.pending() if e.batch_id > t.committed_progress]:
                    continue
                if done:
                    kill_point("between-tables", t.staging.pending()[-1].batch_id)
                try:
                    result = t.commit(reason)
                except BaseException as e:
                    t.record(last_error=str(e).splitlines()[0] if str(e) else type(e).__name__)
                    raise
                done += 1
                if result is not None:
                    results.append(result)
            for t in self.tables.values():
                if t.table_name not in self.touched:
                    t.release()
            if not results:
                return None
            self.clock.committed()
            self._update_totals()
            return results[-1]

    def _commit_letters(self, reason: str) -> None:
        entries = self.staging.pending()
        if not entries or self.dead_letters is None:
            return
        _, records = self.dead_letters.commit_staged(entries, version=int(self.version or 0), reason=reason)
        self.dead_letter_count += records
        self.staging.discard_through(max(e.batch_id for e in entries))

    def _update_totals(self) -> None:
        for k in self.totals:
            self.totals[k] = self.seed_totals[k] + sum(t.totals[k] - t.seeded[k] for t in self.tables.values())
        last = [t for t in self.tables.values() if t.last_commit_at is not None]
        if last:
            newest = max(last, key=lambda t: t.last_commit_at or 0.0)
            self.last_commit_at, self.last_snapshot_id = newest.last_commit_at, newest.last_snapshot_id
        self._update(
            **self.totals,
            last_commit_at=self.last_commit_at,
            last_snapshot_id=self.last_snapshot_id,
            dead_letters=self.dead_letter_count,
            skipped_records=self.skipped_records,
            last_error=None,
        )

    # ------------------------------------------------------------------ status

    def file_format(self) -> str | None:
        return self.plan.format or "parquet"

    def status_row(self) -> dict[str, Any]:
        row = super().status_row()
        ns = ".".join(self.plan.namespace)
        idle = {  # tables earlier runs wrote that this run has not opened: their stored rows
            n: {**t, "table": f"{ns}.{n}", "staged_rows": 0, "lag": 0.0}
            for n, t in self.prior_tables.items()
            if n not in self.tables
        }
        tables = [self.tables[n].status_row() if n in self.tables else idle[n] for n in sorted({*self.tables, *idle})]
        row["table"] = f"{'.'.join(self.plan.namespace)}.{self.plan.table}"
        row["staged_rows"] = sum(t["staged_rows"] for t in tables)
        row["tables"] = tables
        return row


def splitter(relation: Any, plan: Any) -> Any:
    """The function splitting ``relation``'s messages by table (``SPLITTERS``, by FORMAT)."""
    import importlib

    fmt = getattr(plan, "format", None)
    module = SPLITTERS.get(fmt) if fmt is not None else None
    if module is None:  # pragma: no cover - the analyzer routes only these sources
        raise ExecutionError(f"source {relation.name}: a routed sink does not read FORMAT {fmt} yet")
    return importlib.import_module(module).splitter(relation)


def _raw(value: Any) -> Any:
    """A message's value as the dead-letter table keeps it: text as it is, bytes (a registry's
    framed Avro) as ``base64:...``, as a registry source's bad records are kept."""
    if isinstance(value, (bytes, bytearray)):
        import base64

        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    return value


def table_names(sink_dir: Path) -> list[str]:
    """The tables a routed sink has staged into (its ``tables`` directory)."""
    root = sink_dir / TABLES
    return sorted(unquote(p.name) for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


__all__ = ["SPLITTERS", "RoutedRunner", "RoutedWriter", "TableSink", "splitter", "table_names"]
