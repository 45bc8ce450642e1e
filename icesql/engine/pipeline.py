"""``SinkRunner``: one sink as a Spark Structured Streaming query writing an Iceberg table.

Life of a runner
----------------
``start()``:
    1. ``state.bump_version(name)`` gives this runner's epoch (a newer one fences older ones);
    2. the relation's DataFrame is built, the table is created when missing (``ensure_table``);
    3. **recovery**: ``last_committed(table, sink_id)`` gives the progress (Spark batch id) the
       table already holds; staged entries at or below it are discarded, the rest are committed
       at once (reason ``recovery``);
    4. ``df.writeStream.foreachBatch(...)`` starts with its checkpoint in
       ``<home>/sinks/<sink_id>/checkpoint`` (``availableNow`` with ``once=True``, else
       ``processingTime``). A bounded (batch) relation runs as one job with batch id 0.

``foreachBatch(batch_df, batch_id)``:
    1. a batch at or below the high-water mark (committed progress, or the newest staged entry)
       is skipped: Spark replays the last batch after a crash and its files are already staged
       or committed;
    2. executors write the files (``mapInArrow`` running ``DataFileWriter``; only the files'
       descriptions come back to the driver, never rows). MODE UPSERT first keeps the last change
       per KEY (``row_number`` over the key ordered by the changelog position, descending) and
       writes an equality delete for every key plus a data row unless the change is a delete; a
       change with a null KEY column fails the batch (``NullKeyError``, naming the sink, the
       column, the file and record) or, with ``KEY ... NOT ENFORCED``, is dropped, logged and
       counted with the skipped records (a null fits neither an Iceberg identifier field nor an
       equality delete);
       MODE APPEND drops deletes of a changelog and writes every other row;
    3. the driver stages the files durably (``staging.Staging``) before returning;
    4. the commit policy decides: with no MINIMUM SIZE and no MAXIMUM PERIOD every batch commits
       (reason ``batch``); else a commit happens when the staged bytes reach MINIMUM SIZE
       (``size``) or MAXIMUM PERIOD has passed since the last commit (``period`` — also checked
       by a timer thread so an idle sink still commits). ``flush()`` commits now (``flush``),
       ``stop()`` commits what is staged (``shutdown``).

Every commit is one ``icesql.engine.commit.commit`` call: append-only staged batches become one
snapshot; when delete files are involved each staged batch is its own snapshot (in order, in
one catalog commit) so a later batch's deletes remove an earlier batch's rows. One INFO line per
commit names the sink, table, reason, rows, bytes, files and duration.

Exactly once — a crash (or SIGKILL) at any point leaves one of these states:

* files being written, nothing staged → Spark replays the batch; the files are orphans;
* staged, not committed → recovery commits them, the replayed batch is skipped;
* committed, staging not yet cleared → recovery discards the staged entries, replay skipped;
* committed, Spark has not recorded the batch → the replay is at or below the committed
  progress, skipped.

On Spark Connect (``remote``) ``foreachBatch`` runs in the server's Python, where none of the
above lives. The query's ``foreachBatch`` is then ``_RemoteBatch`` (picklable: the batch writer
and a ``DropBox``), which writes the files and leaves a record per batch at the table's
location; a drain thread of this process takes the records in batch order (``_drain``: stage
durably, then delete the record), and the policy, commits and state work as above. A batch
at or below ``staged_high`` when the query started, or whose record is still waiting, is not
written again; records left at or below ``staged_high`` by a kill are deleted at the next start.
A hole (a record missing while later ones wait) means an older client of the same home took it
before the new query stopped the old run: its staged entries and commits close the hole
(``_close_gap``), or a newer version's commit fences this runner.

Test hooks: ``ICESQL_TEST_KILL_AT`` = ``point[:batch][,point[:batch]...]`` SIGKILLs the process
group (``ICESQL_TEST_KILL_PGID``, default: this process's) at ``write`` (on an executor, after the first batch of rows reached the writer),
``staged`` (after staging, before the policy runs) or ``committed`` (after a commit made by the
batch, before ``foreachBatch`` returns). ``ICESQL_TEST_BATCH_DELAY`` (seconds) slows every batch down.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from icesql import settings
from icesql.engine.sources import (
    BLK,
    FILE,
    LINE,
    OP,
    POSITION,
    Relation,
    marked_message,
    translate_bad_record,
)
from icesql.engine.staging import StagedBatch, Staging
from icesql.errors import ExecutionError, IcesqlError
from icesql.plan import SinkMode, SinkPlan

log = logging.getLogger("icesql.sink")

KILL_ENV = settings.TEST_KILL_AT.name
NULL_KEY_MARKER = "ICESQL-NULL-KEY:"
DROPPED = -1  # ``content`` of the writer task's output row that counts dropped null-key changes


class NullKeyError(ExecutionError):
    """A change whose KEY has a null column reached an upsert sink with an enforced KEY."""


class StateCallback(Protocol):
    def sink_id(self, name: str) -> str: ...

    def bump_version(self, name: str) -> int: ...

    def update(self, name: str, **fields: Any) -> None: ...


def kill_point(point: str, batch_id: int | None = None) -> None:
    """SIGKILL this process group when ``ICESQL_TEST_KILL_AT`` names ``point`` (tests only)."""
    spec = settings.TEST_KILL_AT.get()
    if not spec:
        return
    for item in spec.split(","):
        name, _, when = item.strip().partition(":")
        if name != point:
            continue
        if when and batch_id is not None and when != str(batch_id):
            continue
        if when and batch_id is None:
            continue
        # PySpark's workers run in process groups of their own: the test names the group to kill
        # (the driver's, holding the JVM) in ICESQL_TEST_KILL_PGID.
        pgid = settings.TEST_KILL_PGID.get_int() or os.getpgrp()
        try:
            os.killpg(pgid, signal.SIGKILL)
        finally:  # pragma: no cover - not reached
            os.kill(os.getpid(), signal.SIGKILL)


# --------------------------------------------------------------------------- executor side


class _FileWriterTask:
    """Runs inside ``mapInArrow``: rows in, one row per written file out (picklable)."""

    def __init__(
        self,
        spec: Any,
        data_columns: list[str],
        *,
        changelog: bool,
        upsert: bool,
        key: list[str],
        equality_ids: list[int],
        batch_id: int,
        sink: str = "",
        relation: str = "",
        key_enforced: bool = True,
    ) -> None:
        self.spec = spec
        self.data_columns = data_columns
        self.changelog = changelog
        self.upsert = upsert
        self.key = key
        self.equality_ids = equality_ids
        self.batch_id = batch_id
        self.sink = sink
        self.relation = relation
        self.key_enforced = key_enforced

    def _null_keys(self, b: Any) -> Any:
        """``b`` without its changes whose KEY has a null column, and how many there were.

        An enforced KEY fails the batch instead, naming the sink, the column and where the
        change came from (a null cannot be an Iceberg identifier field, so such a change can
        neither be stored nor deleted by key)."""
        import pyarrow.compute as pc

        names = b.schema.names
        mask = None
        for k in self.key:
            m = pc.is_null(b.column(names.index(k)))
            mask = m if mask is None else pc.or_(mask, m)
        n = (pc.sum(mask).as_py() or 0) if mask is not None else 0
        if not n:
            return b, 0
        if self.key_enforced:
            from icesql.engine.sources import _short_path

            # the first such change in file order (the batch arrives sorted by key)
            row = min(
                b.filter(mask).to_pylist(),
                key=lambda x: (str(x.get(FILE) or ""), x.get(BLK) or 0, x.get(LINE) or 0),
            )
            col = next(k for k in self.key if row.get(k) is None)
            where = f"a change read from '{self.relation}'"
            if row.get(FILE):
                path = _short_path(str(row[FILE]))
                rec = f"record {int(row.get(LINE) or 0) + 1}"
                if row.get(BLK):
                    rec += f" of the split at byte {row[BLK]}"
                where += f" (file '{path}', {rec})"
            raise ValueError(
                f"{NULL_KEY_MARKER}sink '{self.sink}': KEY column '{col}' is null in {where}; "
                f"KEY columns must be non-null|END"
            )
        return b.filter(pc.invert(mask)), n

    def __call__(self, batches: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        from icesql.engine.writer import DataFileWriter

        data_w = DataFileWriter(self.spec, "data")
        del_w = DataFileWriter(self.spec, "equality_deletes", self.equality_ids) if self.upsert else None
        first = True
        dropped = 0
        try:
            for b in batches:
                if b.num_rows == 0:
                    continue
                if self.upsert:
                    b, n = self._null_keys(b)
                    dropped += n
                    if b.num_rows == 0:
                        continue
                names = b.schema.names
                if del_w is not None:
                    del_w.write(b.select(self.key))
                if self.changelog and OP in names:
                    keep = pc.fill_null(pc.not_equal(b.column(names.index(OP)), "d"), True)
                    b = b.filter(keep)
                if b.num_rows:
                    data_w.write(b.select(self.data_columns))
                if first:
                    first = False
                    kill_point("write", self.batch_id)
            files = data_w.close()
            if del_w is not None:
                files += del_w.close()
        except BaseException:
            data_w.abort()
            if del_w is not None:
                del_w.abort()
            raise
        if files or dropped:
            yield pa.RecordBatch.from_pydict(
                {
                    "content": [int(f.content) for f in files] + ([DROPPED] if dropped else []),
                    "file": [f.dumps() for f in files] + ([""] if dropped else []),
                    "rows": [int(f.record_count) for f in files] + ([dropped] if dropped else []),
                    "bytes": [int(f.file_size_in_bytes) for f in files] + ([0] if dropped else []),
                },
                schema=pa.schema(
                    [
                        ("content", pa.int32()),
                        ("file", pa.string()),
                        ("rows", pa.int64()),
                        ("bytes", pa.int64()),
                    ]
                ),
            )


class _BatchWriter:
    """One Spark batch → files: the upsert/changelog transform, then ``_FileWriterTask`` on the
    executors. Returns the task's rows (one per file), never data. Picklable: on Spark Connect it
    runs inside the server's ``foreachBatch``."""

    def __init__(
        self,
        spec: Any,
        *,
        upsert: bool,
        key: list[str],
        equality_ids: list[int],
        sink: str,
        relation: str,
        key_enforced: bool,
    ) -> None:
        self.spec = spec
        self.upsert = upsert
        self.key = key
        self.equality_ids = equality_ids
        self.sink = sink
        self.relation = relation
        self.key_enforced = key_enforced

    def __call__(self, batch_df: Any, batch_id: int) -> list[dict[str, Any]]:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        cols = set(batch_df.columns)
        changelog = OP in cols
        df = batch_df
        if self.upsert:
            order = [F.col(c).desc_nulls_last() for c in POSITION if c in cols] or [F.lit(1)]
            w = Window.partitionBy(*[F.col(_q(k)) for k in self.key]).orderBy(*order)
            # every change with a null in the KEY reaches the writer, which fails the batch
            # (enforced KEY) or drops and counts them (NOT ENFORCED)
            null_key = F.lit(False)
            for k in self.key:
                null_key = null_key | F.col(_q(k)).isNull()
            df = (
                df.withColumn("__rn", F.row_number().over(w))
                .filter((F.col("__rn") == 1) | null_key)
                .drop("__rn")
            )
        elif changelog:
            df = df.filter(F.col(OP).isNull() | (F.col(OP) != F.lit("d")))
        data_columns = [c for c in batch_df.columns if c not in _internal()]
        task = _FileWriterTask(
            self.spec,
            data_columns,
            changelog=changelog,
            upsert=self.upsert,
            key=self.key,
            equality_ids=self.equality_ids,
            batch_id=batch_id,
            sink=self.sink,
            relation=self.relation,
            key_enforced=self.key_enforced,
        )
        keep = data_columns + ([OP] if changelog and OP in df.columns else [])
        if self.upsert:  # where a change came from, for the null-key error
            keep += [c for c in (FILE, BLK, LINE) if c in df.columns]
        df = df.select(*[F.col(_q(c)) for c in keep])
        out = df.mapInArrow(task, "content int, file string, rows bigint, bytes bigint")
        return [r.asDict() for r in out.collect()]  # one small row per written file


class _RemoteBatch:
    """``foreachBatch`` of a sink on Spark Connect, run by the server's Python: write the batch's
    files, then leave their description in the drop box for the client (``dropbox``)."""

    def __init__(self, writer: _BatchWriter, dropbox: Any, *, version: int, skip_through: int) -> None:
        self.writer = writer
        self.dropbox = dropbox
        self.version = version
        self.skip_through = skip_through

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        batch_id = int(batch_id)
        # Spark replays the last batch of a run that stopped: the client already staged or
        # committed it (at most ``skip_through``), or its record is still waiting to be picked up
        if batch_id <= self.skip_through or self.dropbox.get(batch_id) is not None:
            return
        delay = settings.TEST_BATCH_DELAY.get_float()
        if delay:
            time.sleep(delay)
        rows = self.writer(batch_df, batch_id)
        self.dropbox.put(batch_id, self.version, rows)


# --------------------------------------------------------------------------- driver side


class SinkRunner:
    """Runs one sink. Thread-safe: commits are serialised by one lock."""

    def __init__(
        self,
        plan: SinkPlan,
        *,
        spark: Any,
        home: Path,
        state: StateCallback,
        catalog: Callable[[], Any],
        relation: Callable[[], Relation],
        io_properties: Callable[[Any], Mapping[str, str]] | None = None,
        trigger_interval: float = 1.0,
        period_tick: float | None = None,
    ) -> None:
        self.plan = plan
        self.name = plan.name
        self.spark = spark
        self.home = Path(home)
        self.state = state
        self._catalog_factory = catalog
        self._relation_factory = relation
        self._io_properties = io_properties
        self.trigger_interval = trigger_interval
        self.period_tick = period_tick
        self.sink_id = state.sink_id(plan.name)
        self.sink_dir = self.home / "sinks" / self.sink_id
        self.staging = Staging(self.sink_dir / "staging")
        self.checkpoint = self.sink_dir / "checkpoint"
        from icesql.engine.spark import is_connect

        # Spark Connect: foreachBatch runs in the server's Python, which hands the files it wrote
        # to this process through a drop box at the table's location (``dropbox``)
        self.remote = spark is not None and is_connect(spark)
        self.dropbox: Any = None
        self._drain_thread: threading.Thread | None = None
        self._gap_reported = -1
        self._compaction_hinted = False
        self.version: int | None = None
        self.table: Any = None
        self.relation: Relation | None = None
        self.query: Any = None
        self.committed_progress = -1
        self.staged_high = -1
        self.status = "created"
        self.error: IcesqlError | None = None
        self.last_commit_at: float | None = None
        self.last_snapshot_id: int | None = None
        self.totals = {"rows_committed": 0, "bytes_committed": 0, "files_committed": 0, "commits": 0}
        self.skipped_records = 0
        self._last_commit_mono = time.monotonic()
        self._lock = threading.RLock()
        self._stop_event = threading.Event()
        self._timer: threading.Thread | None = None
        self._batch_thread: threading.Thread | None = None
        self._stopping = False
        self.once = False
        self._done = threading.Event()
        self._skipped_seen = 0
        seed = getattr(state, "get", None)
        if callable(seed):
            try:
                prior = seed(plan.name) or {}
                for k in self.totals:
                    if isinstance(prior.get(k), int):
                        self.totals[k] = prior[k]
                if isinstance(prior.get("skipped_records"), int):
                    self.skipped_records = prior["skipped_records"]
            except Exception:  # pragma: no cover - a state store without totals
                pass

    # ----------------------------------------------------------------- state

    def _update(self, **fields: Any) -> None:
        try:
            self.state.update(self.name, **fields)
        except Exception:  # pragma: no cover - state reporting never kills a sink
            log.exception("sink %s: state update failed", self.name)

    def _set_status(self, status: str, **fields: Any) -> None:
        self.status = status
        self._update(status=status, **fields)

    def _fail(self, exc: BaseException) -> IcesqlError:
        from icesql.engine.commit import FencedError

        err = (
            exc
            if isinstance(exc, IcesqlError)
            else (
                translate_bad_record(exc) or _translate_null_key(exc, self.plan.key) or _execution_error(exc)
            )
        )
        self.error = err
        status = "fenced" if isinstance(err, FencedError) else "failed"
        log.error("sink %s %s: %s", self.name, status, err.message)
        self._set_status(status, last_error=err.message)
        self._stop_event.set()
        self._done.set()
        return err

    # ----------------------------------------------------------------- start

    def prepare(self) -> None:
        """Version, table and recovery: everything before the query starts."""
        from icesql.engine.commit import last_committed
        from icesql.engine.schema import spark_schema_json
        from icesql.engine.tables import ensure_table

        self._set_status("starting")
        try:
            self.version = int(self.state.bump_version(self.name))
            self.relation = self._relation_factory()
            schema_json = spark_schema_json(self.relation.data_schema())
            catalog = self._catalog_factory()
            self.table = ensure_table(catalog, None, schema_json, self.plan)
            last = last_committed(self.table, self.sink_id)
            if last is not None:
                version, progress = last
                if version > self.version:
                    raise self._fenced(version)
                self.committed_progress = progress
            if (
                self.relation.streaming
                and self.committed_progress >= 0
                and _is_local(self.checkpoint_location)
                and not (self.checkpoint / "offsets").exists()
            ):
                log.warning(
                    "sink %s: the table holds progress %d but the checkpoint %s is missing; batches "
                    "up to %d will be skipped as already committed",
                    self.name,
                    self.committed_progress,
                    self.checkpoint,
                    self.committed_progress,
                )
            self.staging.remove_temporaries()
            self.staging.discard_through(self.committed_progress)
            pending = self.staging.pending()
            self.staged_high = max(
                [self.committed_progress, self.staging.cursor(), *(e.batch_id for e in pending)]
            )
            if self.remote and self.relation.streaming:
                from icesql.engine.dropbox import DropBox

                io_props = self._io_properties(self.table) if self._io_properties else {}
                self.dropbox = DropBox(self.table.location(), self.sink_id, io_props)
                for stale in self.dropbox.batch_ids() or ():
                    if stale <= self.staged_high:  # taken already (killed before deleting it)
                        self.dropbox.delete(stale)
                # what the server half of an earlier run wrote while this process was away
                self._drain(policy=False)
                pending = self.staging.pending()
            if pending:
                log.info("sink %s: recovering %d staged batch(es)", self.name, len(pending))
                self._commit("recovery")
        except BaseException as e:
            raise self._fail(e) from e

    def _fenced(self, version: int) -> Exception:
        from icesql.engine.commit import FencedError

        return FencedError(
            f"sink {self.name} version {self.version} is fenced out: version {version} "
            f"already committed to {self.plan.table_identifier}",
            hint="another runner of this sink took over",
        )

    def start(self, *, once: bool = False) -> None:
        """Prepare and start the query (returns at once; see ``await_termination``)."""
        self.prepare()
        assert self.relation is not None
        self.once = once
        try:
            if not self.relation.streaming:
                self._batch_thread = threading.Thread(
                    target=self._run_bounded, name=f"icesql-sink-{self.name}", daemon=True
                )
                self._set_status("running")
                self._batch_thread.start()
                return
            if _is_local(self.checkpoint_location):
                self.checkpoint.mkdir(parents=True, exist_ok=True)
            if self.remote:
                assert self.version is not None
                batch: Any = _RemoteBatch(
                    self._batch_writer(), self.dropbox, version=self.version, skip_through=self.staged_high
                )
            else:
                batch = self._foreach_batch
            writer = self.relation.df.writeStream.foreachBatch(batch)
            writer = writer.option("checkpointLocation", self.checkpoint_location)
            writer = writer.queryName(f"icesql_{self.name}_{self.sink_id[:8]}_v{self.version}")
            if once:
                writer = writer.trigger(availableNow=True)
            else:
                writer = writer.trigger(processingTime=f"{int(self.trigger_interval * 1000)} milliseconds")
            self.query = writer.start()
        except BaseException as e:
            raise self._fail(e) from e
        self._set_status("running")
        if self.remote:
            self._drain_thread = threading.Thread(
                target=self._drain_loop, name=f"icesql-drain-{self.name}", daemon=True
            )
            self._drain_thread.start()
        if self.plan.commit.maximum_period is not None and not once:
            self._timer = threading.Thread(
                target=self._period_loop, name=f"icesql-timer-{self.name}", daemon=True
            )
            self._timer.start()
        threading.Thread(target=self._watch, name=f"icesql-watch-{self.name}", daemon=True).start()

    def _run_bounded(self) -> None:
        try:
            if 0 > self.staged_high:
                self._process(self.relation.df, 0)  # type: ignore[union-attr]
            self._commit("shutdown")
            self._set_status("stopped")
        except BaseException as e:
            if self.error is None:
                self._fail(e)
        finally:
            self._done.set()

    def _watch(self) -> None:
        q = self.query
        try:
            q.awaitTermination()
        except BaseException as e:
            if self.error is None and not self._stopping:
                self._fail(e)
        finally:
            if self.once and self.error is None and not self._stopping:
                try:
                    self._drain()  # every batch of the run has left its record by now
                    self._commit("shutdown")
                    self._set_status("stopped")
                except BaseException as e:  # noqa: BLE001
                    self._fail(e)
            self._stop_event.set()
            self._done.set()

    # ----------------------------------------------------------------- batches

    def _foreach_batch(self, batch_df: Any, batch_id: int) -> None:
        try:
            self._process(batch_df, int(batch_id))
        except BaseException as e:
            if self._stopping and self.error is None:
                log.info("sink %s: batch %s interrupted by stop", self.name, batch_id)
                raise
            raise self._fail(e) from e

    def _process(self, batch_df: Any, batch_id: int) -> None:
        if batch_id <= self.staged_high:
            log.info("sink %s: batch %d already staged or committed, skipping", self.name, batch_id)
            return
        delay = settings.TEST_BATCH_DELAY.get_float()
        if delay:
            time.sleep(delay)
        if self.error is not None:
            raise self.error
        entry = self._write(batch_df, batch_id)
        with self._lock:
            if entry is not None:
                self.staging.add(entry)
                self.staged_high = batch_id
                kill_point("staged", batch_id)
            committed = self._apply_policy()
        if committed:
            kill_point("committed", batch_id)

    def _batch_writer(self) -> _BatchWriter:
        """The picklable half of a batch: transform, write the files, describe them."""
        from icesql.engine.tables import key_field_ids
        from icesql.engine.writer import WriteSpec

        assert self.relation is not None and self.table is not None
        plan = self.plan
        upsert = plan.mode is SinkMode.UPSERT
        io_props = dict(self._io_properties(self.table)) if self._io_properties else None
        spec = WriteSpec.from_table(self.table, max_file_size=plan.maximum_file_size, io_properties=io_props)
        return _BatchWriter(
            spec,
            upsert=upsert,
            key=list(plan.key),
            equality_ids=key_field_ids(self.table.schema(), plan.key) if upsert else [],
            sink=self.name,
            relation=self.relation.name,
            key_enforced=plan.key_enforced,
        )

    def _write(self, batch_df: Any, batch_id: int) -> StagedBatch | None:
        return self._stage_rows(self._batch_writer()(batch_df, batch_id), batch_id)

    def _stage_rows(self, rows: list[dict[str, Any]], batch_id: int) -> StagedBatch | None:
        """Account for one written batch (skipped and dropped records) and describe its files."""
        plan = self.plan
        rel = self.relation
        assert rel is not None
        skipped_total = rel.skipped_count()
        skipped = max(0, skipped_total - self._skipped_seen)
        self._skipped_seen = skipped_total
        if skipped:
            log.warning("sink %s: skipped %d bad record(s) in batch %d", self.name, skipped, batch_id)
        dropped = sum(r["rows"] for r in rows if r["content"] == DROPPED)
        if dropped:
            log.warning(
                "sink %s: dropped %d change(s) with a null KEY column (%s) in batch %d: KEY NOT ENFORCED",
                self.name,
                dropped,
                ", ".join(plan.key),
                batch_id,
            )
            skipped += dropped
        if skipped:
            self.skipped_records += skipped
            self._update(skipped_records=self.skipped_records)
        rows = [r for r in rows if r["content"] != DROPPED]
        if not rows:
            return None
        data = tuple(r["file"] for r in rows if r["content"] == 0)
        deletes = tuple(r["file"] for r in rows if r["content"] != 0)
        return StagedBatch(
            batch_id=batch_id,
            data_files=data,
            delete_files=deletes,
            rows=sum(r["rows"] for r in rows if r["content"] == 0),
            deletes=sum(r["rows"] for r in rows if r["content"] != 0),
            bytes=sum(r["bytes"] for r in rows),
            skipped=skipped,
        )

    # ----------------------------------------------------------------- Spark Connect

    @property
    def checkpoint_location(self) -> str:
        """Where Spark keeps the query's checkpoint: ``<home>/sinks/<id>/checkpoint``, or
        ``$ICESQL_CHECKPOINT_ROOT/<id>`` (a directory the Spark driver can reach, e.g. when a
        Spark Connect server runs on another machine)."""
        root = settings.CHECKPOINT_ROOT.get() or ""
        if root:
            return f"{root.rstrip('/')}/{self.sink_id}"
        return str(self.checkpoint)

    def _drain(self, *, policy: bool = True) -> int:
        """Move the records the server half left in the drop box into staging, in batch order,
        each staged durably before its record is deleted; returns how many were taken."""
        n = 0
        if self.dropbox is None:
            return n
        listed = self.dropbox.batch_ids()  # one listing per pass, outside the commit lock
        if listed is not None and not any(i > self.staged_high for i in listed):
            return n  # the idle case: nothing new
        with self._lock:
            while True:
                batch_id = self.staged_high + 1
                record = self.dropbox.get(batch_id, listed)
                if record is None:
                    if listed and listed[-1] > batch_id and self._close_gap(batch_id):
                        continue
                    return n
                entry = self._stage_rows(list(record.files), batch_id)
                if entry is not None:
                    self.staging.add(entry)
                else:  # nothing to commit, but the next record to look for moves on
                    self.staging.set_cursor(batch_id)
                self.staged_high = batch_id
                kill_point("staged", batch_id)
                self.dropbox.delete(batch_id)
                n += 1
                if policy and self._apply_policy():
                    kill_point("committed", batch_id)

    def _close_gap(self, batch_id: int) -> bool:
        """The record of ``batch_id`` is missing while later ones wait: another runner of this sink
        on the same home (an older process, until the new query stopped its run) took it. Catch up
        with what that runner left — its staged entries (the staging directory is shared) and its
        commits — and go on after them. True when there is something to go on after."""
        from icesql.engine.commit import last_committed

        high = max([self.staged_high, self.staging.cursor(), *(e.batch_id for e in self.staging.pending())])
        if self.table is not None and self.version is not None:
            self.table.refresh()
            last = last_committed(self.table, self.sink_id)
            if last is not None:
                version, progress = last
                if version > self.version:
                    raise self._fenced(version)
                if progress > self.committed_progress:
                    self.committed_progress = progress
                    self.staging.discard_through(progress)
                high = max(high, progress)
        if high >= batch_id:
            log.warning(
                "sink %s: batches %d..%d were taken by another runner of this sink; going on after them",
                self.name,
                batch_id,
                high,
            )
            self.staged_high = high
            return True
        if self._gap_reported != batch_id:
            self._gap_reported = batch_id
            log.warning(
                "sink %s: waiting for the record of batch %d (later ones are there)", self.name, batch_id
            )
        return False

    def _drain_loop(self) -> None:
        tick = max(0.05, min(0.5, self.trigger_interval / 2))
        while not self._stop_event.wait(tick):
            try:
                self._drain()
            except BaseException as e:
                if self.error is None and not self._stopping:
                    self._fail(e)
                    self._stop_query()
                return

    # ----------------------------------------------------------------- policy and commits

    def _apply_policy(self) -> bool:
        """Commit if the policy says so; True when a commit happened."""
        policy = self.plan.commit
        if policy.minimum_size is None and policy.maximum_period is None:
            return self._commit("batch") is not None
        if policy.minimum_size is not None:
            _, staged_bytes, _ = self.staging.totals()
            if staged_bytes >= policy.minimum_size:
                return self._commit("size") is not None
        if policy.maximum_period is not None:
            if time.monotonic() - self._last_commit_mono >= policy.maximum_period:
                return self._commit("period") is not None
        return False

    def _period_loop(self) -> None:
        while True:
            period = self.plan.commit.maximum_period
            if period is None:
                return  # ALTER SINK removed the period
            tick = self.period_tick or max(0.05, min(1.0, period / 4))
            if self._stop_event.wait(tick):
                return
            if time.monotonic() - self._last_commit_mono < period:
                continue
            try:
                with self._lock:
                    if self._stop_event.is_set():
                        return
                    if time.monotonic() - self._last_commit_mono >= period:
                        if not self._commit("period"):
                            self._last_commit_mono = time.monotonic()  # nothing staged: wait a period
            except BaseException as e:
                self._fail(e)
                self._stop_query()
                return

    def update_plan(self, plan: SinkPlan) -> None:
        """Take a changed definition (ALTER SINK): the commit policy applies at once; other
        changes (partitioning, file size, ...) when the sink next starts."""
        with self._lock:
            old = self.plan
            self.plan = plan
        if (
            plan.commit.maximum_period is not None
            and old.commit.maximum_period is None
            and self.query is not None
            and not getattr(self, "once", False)
            and self.active
        ):
            self._timer = threading.Thread(
                target=self._period_loop, name=f"icesql-timer-{self.name}", daemon=True
            )
            self._timer.start()
        log.info("sink %s: commit policy now %s", self.name, plan.commit.describe())
        if self.query is not None and self.active:
            with self._lock:
                self._apply_policy()

    def flush(self) -> Any:
        """Commit everything staged now (reason ``flush``); returns the commit result or None."""
        try:
            with self._lock:
                self._drain(policy=False)
                return self._commit("flush")
        except BaseException as e:
            err = self._fail(e)
            self._stop_query()
            raise err from e

    def _commit(self, reason: str) -> Any:
        """Commit the staged entries above the committed progress. Caller holds the lock."""
        from icesql.engine.commit import CommitGroup, CommitRequest, commit
        from icesql.engine.writer import WrittenFile

        with self._lock:
            entries = [e for e in self.staging.pending() if e.batch_id > self.committed_progress]
            if not entries:
                return None
            assert self.version is not None
            has_deletes = any(e.delete_files for e in entries)
            if has_deletes:
                groups = [
                    CommitGroup(
                        tuple(WrittenFile.loads(s) for s in e.data_files),
                        tuple(WrittenFile.loads(s) for s in e.delete_files),
                        e.batch_id,
                    )
                    for e in entries
                ]
            else:
                groups = [
                    CommitGroup(tuple(WrittenFile.loads(s) for e in entries for s in e.data_files), (), None)
                ]
            progress = entries[-1].batch_id
            request = CommitRequest(
                data_files=(),
                delete_files=(),
                sink_id=self.sink_id,
                sink_version=self.version,
                progress=progress,
                reason=reason,
                groups=groups,
            )
            started = time.monotonic()
            result = commit(self.table, request)
            self.committed_progress = progress
            self.staging.discard_through(progress)
            now = time.time()
            self._last_commit_mono = time.monotonic()
            rows = sum(e.rows for e in entries)
            nbytes = sum(e.bytes for e in entries)
            files = sum(e.files for e in entries)
            if not result.skipped:
                self.totals["rows_committed"] += rows
                self.totals["bytes_committed"] += nbytes
                self.totals["files_committed"] += files
                self.totals["commits"] += 1
                self.last_commit_at = now
                self.last_snapshot_id = result.snapshot_id
            log.info(
                "commit sink=%s table=%s reason=%s rows=%d deletes=%d bytes=%d files=%d batches=%d "
                "progress=%d snapshot=%s duration=%.3fs%s",
                self.name,
                self.plan.table_identifier,
                reason,
                rows,
                sum(e.deletes for e in entries),
                nbytes,
                files,
                len(entries),
                progress,
                result.snapshot_id,
                time.monotonic() - started,
                " (already committed)" if result.skipped else "",
            )
            self._update(
                **self.totals,
                last_commit_at=self.last_commit_at,
                last_snapshot_id=self.last_snapshot_id,
                last_progress=progress,
                last_error=None,
            )
            if has_deletes and not result.skipped:
                self._hint_compaction()
            return result

    def _hint_compaction(self) -> None:
        """Once per runner: say when the table's delete files reach ``ICESQL_COMPACT_HINT``
        (default 10), past which readers slow down markedly (``icesql compact``)."""
        if self._compaction_hinted:
            return
        try:
            limit = settings.COMPACT_HINT.get_int() or 0
            snap = self.table.current_snapshot()
            n = int((snap.summary or {}).get("total-delete-files") or 0) if snap is not None else 0
        except (ValueError, AttributeError):  # pragma: no cover - an odd summary: no hint
            return
        if limit > 0 and n >= limit:
            self._compaction_hinted = True
            log.warning(
                "sink %s: table %s holds %d delete files, which slow its readers down; "
                "run 'icesql compact %s' (safe while the sink runs)",
                self.name,
                self.plan.table_identifier,
                n,
                self.name,
            )

    # ----------------------------------------------------------------- stop

    def _stop_query(self) -> None:
        q = self.query
        if q is None:
            return
        try:
            if q.isActive:
                q.stop()
        except Exception:  # pragma: no cover - stopping a dead query
            log.debug("sink %s: stop failed", self.name, exc_info=True)

    def stop(self) -> None:
        """Stop the query and commit what is staged (reason ``shutdown``)."""
        if self.status in ("stopped",) and self.query is None:
            return
        self._stopping = True
        self._stop_event.set()
        self._stop_query()
        if self._batch_thread is not None:
            self._batch_thread.join()
        if self._timer is not None:
            self._timer.join(timeout=30)
        if self._drain_thread is not None:
            self._drain_thread.join(timeout=30)
        if self.error is None:
            try:
                self._drain(policy=False)
                self._commit("shutdown")
                self._set_status("stopped")
            except BaseException as e:
                raise self._fail(e) from e
        self._done.set()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until the query ends (``once``: until the available input is committed)."""
        return self._done.wait(timeout)

    @property
    def active(self) -> bool:
        return not self._done.is_set()

    def status_row(self) -> dict[str, Any]:
        rows, nbytes, files = self.staging.totals()
        lag = 0.0
        if rows or files:
            lag = time.monotonic() - self._last_commit_mono
        return {
            "name": self.name,
            "sink_id": self.sink_id,
            "version": self.version,
            "table": self.plan.table_identifier,
            "status": self.status,
            **self.totals,
            "last_commit_at": self.last_commit_at,
            "last_snapshot_id": self.last_snapshot_id,
            "last_progress": self.committed_progress if self.committed_progress >= 0 else None,
            "last_error": self.error.message if self.error else None,
            "staged_rows": rows,
            "staged_bytes": nbytes,
            "staged_files": files,
            "state": self.status,
            "lag": round(lag, 3),  # seconds the oldest uncommitted staged data has waited
            "skipped_records": self.skipped_records,
        }


def _internal() -> frozenset[str]:
    from icesql.engine.sources import INTERNAL_COLUMNS

    return INTERNAL_COLUMNS


def _is_local(location: str) -> bool:
    return "://" not in location or location.startswith("file:")


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _translate_null_key(exc: BaseException, key: tuple[str, ...] | list[str]) -> NullKeyError | None:
    """Turn a Spark failure raised by ``_FileWriterTask`` for a null KEY into a ``NullKeyError``."""
    body = marked_message(exc, NULL_KEY_MARKER)
    if body is None:
        return None
    return NullKeyError(
        body,
        hint=f"fix the source, or declare KEY ({', '.join(key)}) NOT ENFORCED to drop changes "
        "with a null key (counted as skipped records in SHOW SINK STATUS)",
    )


def _execution_error(exc: BaseException) -> ExecutionError:
    text = str(exc).strip() or type(exc).__name__
    # Spark wraps Python errors in long JVM traces: keep the informative head.
    lines = [ln for ln in text.splitlines() if ln.strip()]
    head = lines[0] if lines else text
    for ln in lines:
        if "Error:" in ln or "Exception:" in ln:
            head = ln.strip()
            break
    return ExecutionError(head[:1000])
