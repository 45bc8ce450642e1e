"""A Kafka source's progress (``source_kinds.SourceProgress``): offsets in Spark's checkpoint, in
every staged batch and in every snapshot's summary, and a lost checkpoint resumed from the table.

Spark writes a micro-batch's end offsets to its offset log (``<checkpoint>/offsets/<batch id>``)
before it runs the batch; the runner stages them with the batch's files, and each commit records
the newest in its snapshot's summary (``offsets.SUMMARY_KEY``). When the sink starts on a new
checkpoint (the first start, or one that was lost - with the whole icesql home, the sink created
again under the same name), ``resume`` writes a seed file into the checkpoint with the offsets the
table holds and the progress the table reached; the source starts from those offsets (``source``),
and the checkpoint's batch 0 continues the table's progress. Records of a batch that was staged
but not committed are committed on start (``recovery``), with their offsets, before the seed is
read from the table: nothing committed is read again, nothing uncommitted is skipped.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from icesql.engine.sources.kafka.offsets import (
    SUMMARY_KEY,
    Offsets,
    by_topic,
    dump,
    from_summary,
    merged,
    parse,
    summary_value,
)
from icesql.engine.sources.kafka.subscription import Subscription
from icesql.engine.sources.kinds import SourceProgress

log = logging.getLogger("icesql.sink")

SEED = "kafka-seed.json"
LAG_EVERY = 5.0  # seconds a log end asked for the lag stays good


def local_path(location: str) -> str:
    """A local checkpoint location as a path (``file:/x`` and ``file:///x`` are ``/x``)."""
    from icesql.engine.backends.checkpoint import local_path as path_of

    path = path_of(location)
    return str(path) if path is not None else location


def batch_offsets(checkpoint: str, spark_batch_id: int, topic: str | None) -> Offsets | None:
    """The end offsets Spark's offset log holds for a batch (None: not there); ``topic``: the
    source's one topic (None: many)."""
    from icesql.engine.backends.checkpoint import source_offset

    offset = source_offset(Path(checkpoint), spark_batch_id)
    return parse(offset, topic) if offset is not None else None


class KafkaProgress(SourceProgress):
    checkpoint_suffix = "-kafka"
    resumes_from_table = True

    def __init__(self, runner: Any, plan: Any = None) -> None:
        super().__init__(runner, plan)
        spec = plan.kafka if plan is not None else None
        self.sub = Subscription.of(spec) if spec is not None else Subscription(topic="")
        self.topic = self.sub.single  # the one topic; None: many (the offsets' forms, ``offsets``)
        self.committed: Offsets = {}  # the offsets the table holds
        self._reads: set[str] | None = None  # many topics: those the last batch's offsets hold
        self._topic_view: Any = None  # kafka.source.TopicView for the lag (made on first use)
        self._ends: Offsets | None = None
        self._ends_at = 0.0
        self.conf: dict[str, str] = {}

    @classmethod
    def nothing_new(cls, probe: Any) -> str | None:
        """No partition of the source's topics has a record past the end offsets of the last
        committed batch (the log ends asked as the source's planner asks them; a topic created
        since, with records, is something new)."""
        from icesql.engine.sources.kafka.topic import TopicView, conf_from_options, kafka_options

        sub = Subscription.of(probe.source.kafka)
        done = parse(probe.offset, sub.single)
        b = probe.engine.kafka_binding(probe.source)
        view = TopicView(conf_from_options(kafka_options(b.conf, b.secret_keys)), sub)
        try:
            ends = view.ends(view.partitions())
        finally:
            view.close()
        if any(end > done.get(k, 0) for k, end in ends.items()):
            return None
        what = f"topic {sub.single}" if sub.single is not None else sub.describe()
        return f"no record in {what} past the committed offsets"

    @classmethod
    def runs_locally(cls, source: Any, sink: Any, session: Any) -> str | None:
        """A sink on the Arrow path whose rows' schema is built without Spark
        (``relation.local_row_schema``): an append, a changelog's append, or an upsert (reduced
        per KEY in Arrow, its key index hashed as Spark hashes it: ``index.hashing``)."""
        from icesql import settings
        from icesql.engine.backends.hashing import key_hashable
        from icesql.engine.sources.kafka.relation import local_row_schema

        if not settings.ARROW_PATH.enabled():
            return "ICESQL_ARROW_PATH is off"
        if source.kafka.on_data_loss != "fail":
            return "ON DATA LOSS counts lost records in Spark"
        rows = local_row_schema(source, session.timestamp_type)
        if rows is None:
            return "its records are decoded by Spark (a format or SCHEMA Spark parses)"
        if sink.routed:  # each table's rows are decoded and written in this process (``sink.routed``)
            return None
        return key_hashable(rows, sink.key)

    @property
    def seed_path(self) -> str:
        return os.path.join(local_path(self.runner.checkpoint_root(self.checkpoint_suffix)), SEED)

    def binding(self) -> Any:
        from icesql import settings
        from icesql.engine.sources.kafka.relation import KafkaBinding

        if not self.runner.local_checkpoint:
            from icesql.errors import ExecutionError

            raise ExecutionError(
                f"sink {self.runner.name}: a Kafka source keeps its offsets in a local checkpoint, and "
                f"ICESQL_CHECKPOINT_ROOT is not a local directory ({settings.CHECKPOINT_ROOT.get()})",
                hint="unset ICESQL_CHECKPOINT_ROOT, or set it to a directory both icesql and the Spark "
                "driver can reach (a shared mount)",
            )
        backend = self.runner.backend
        return KafkaBinding(
            seed=self.seed_path,
            parallelism=backend.parallelism,
            arrow=settings.ARROW_PATH.enabled(),
            session_tz=backend.time_zone,
            timestamp_type=backend.timestamp_type,
        )

    def bound(self, relation: Any) -> SourceProgress:
        from icesql.engine.sources.kafka.topic import conf_from_options, kafka_options

        b = relation.binding
        self.conf = conf_from_options(kafka_options(b.conf, b.secret_keys)) if b is not None else {}
        return self

    def resume(self, summary: dict[str, str] | None) -> int | None:
        r = self.runner
        self.committed = from_summary(summary, self.sub.reads) or {}
        if summary is None:  # a sink new to the table: created again after its home was lost?
            self.committed = self._adopted() or {}
        path = Path(self.seed_path)
        if path.exists():
            return int(json.loads(path.read_text())["progress_base"])
        offsets_dir = path.parent / "offsets"
        if offsets_dir.is_dir() and any(offsets_dir.iterdir()):
            return 0  # a checkpoint of a release without seeds: Spark's offsets stand
        base = r.committed_progress + 1 if r.committed_progress >= 0 else 0
        seed = {
            "offsets": dump(self.committed, self.topic) if self.committed else None,
            "progress_base": base,
            "topic": self.topic if self.topic is not None else self.sub.describe(),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(seed, sort_keys=True))
        os.replace(tmp, path)
        if self.committed:
            log.info(
                "sink %s: new checkpoint; %s: read on from the offsets the table holds (%s)",
                r.name,
                self.sub.describe(),
                ", ".join(f"{t}/{p}:{o}" for (t, p), o in sorted(self.committed.items())),
            )
        return base

    def _adopted(self) -> Offsets | None:
        """The offsets of the table's newest snapshot that records the source's topics', written
        by a sink of another id: the same sink created again in a new icesql home (its id is new,
        its table and topics are not). Without them it would read the topics again from their start."""
        table = self.runner.table
        snap = table.current_snapshot() if table is not None else None
        while snap is not None:
            found = (
                from_summary(dict(snap.summary.additional_properties), self.sub.reads) if snap.summary else None
            )
            if found:
                log.warning(
                    "sink %s: table %s holds %s up to the offsets of snapshot %s (another sink id, "
                    "e.g. the sink created again in a new icesql home); reading on from there",
                    self.runner.name,
                    self.runner.plan.table_identifier,
                    self.sub.describe(),
                    snap.snapshot_id,
                )
                return found
            snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id else None
        return None

    def staged(self, rows: Sequence[dict[str, Any]], spark_batch_id: int) -> dict[str, Any]:
        offsets = batch_offsets(local_path(self.runner.checkpoint_location), spark_batch_id, self.topic)
        if offsets is None:
            return {}
        if self.topic is None:
            self._topics_read({t for t, _ in offsets})
        return {"source_offsets": dump(offsets, self.topic)}

    def _topics_read(self, now: set[str]) -> None:
        """A source of many topics: say which topics a batch's offsets gained (new ones, read from
        their start) and lost (deleted: the planner leaves a topic out only once the brokers say
        it is gone) since the last batch, or since what the table held."""
        before = self._reads if self._reads is not None else {t for t, _ in self.committed}
        self._reads = now
        if not before:  # a new sink's first batch
            return
        new = sorted(now - before)
        if new:
            log.info("sink %s: new topics %s, read from their start", self.runner.name, ", ".join(new))
        for t in sorted(before - now):
            log.warning(
                "sink %s: topic '%s' was deleted; the sink no longer reads it (its records read until then stay "
                "in the table)",
                self.runner.name,
                t,
            )

    def summary(self, entries: Sequence[Any]) -> dict[str, str]:
        batches = [parse(e.source_offsets, self.topic) for e in entries if getattr(e, "source_offsets", None)]
        if not batches and not self.committed:
            return {}
        self.committed = merged([self.committed, *batches])
        if batches:  # every batch holds every partition the planner knew: a deleted topic's went
            known = {k for b in batches for k in b}
            self.committed = {k: o for k, o in self.committed.items() if k in known}
        return {SUMMARY_KEY: summary_value(self.committed, self.topic)}

    def after_commit(self) -> None:
        """CONSUMER GROUP: the offsets the table now holds, reported to the group for outside
        monitoring tools (icesql never reads them back; a failure is logged, never fatal)."""
        group = self.plan.kafka.group_id if self.plan is not None and self.plan.kafka is not None else None
        if not group or not self.committed:
            return
        from confluent_kafka import TopicPartition

        from icesql.engine.sources.kafka.topic import new_consumer

        try:
            c = new_consumer(self.conf, group_id=group)
            try:
                tps = [TopicPartition(t, p, o) for (t, p), o in sorted(self.committed.items())]
                c.commit(offsets=tps, asynchronous=False)
            finally:
                c.close()
        except Exception as e:  # noqa: BLE001 - monitoring must never stop the sink
            log.warning("sink %s: cannot report offsets to consumer group %s: %s", self.runner.name, group, e)

    def status(self) -> dict[str, Any]:
        """The lag per partition: records (offsets) between what the table holds and the log end,
        the log end asked at most every ``LAG_EVERY`` seconds (a status call never waits on the
        broker longer than a metadata request)."""
        now = time.monotonic()
        if self._ends is None or now - self._ends_at > LAG_EVERY:
            self._ends_at = now
            try:
                self._ends = self._view().ends(self._view().partitions())
            except Exception as e:  # noqa: BLE001 - status must answer while the broker is away
                log.debug("sink %s: lag of %s unknown: %s", self.runner.name, self.sub.describe(), e)
                return {}
        lag = {k: max(0, e - self.committed.get(k, 0)) for k, e in self._ends.items()}
        return {"source_lag": sum(lag.values()), "source_lag_partitions": by_topic(lag)}

    def _view(self) -> Any:
        if self._topic_view is None:
            from icesql.engine.sources.kafka.topic import TopicView

            self._topic_view = TopicView(self.conf, self.sub)
        return self._topic_view

    def close(self) -> None:
        if self._topic_view is not None:
            self._topic_view.close()


__all__ = ["SEED", "KafkaProgress", "batch_offsets"]
