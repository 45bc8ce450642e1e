"""The lag of a KAFKA sink: records between the offsets its table holds and each partition's log
end, as the runner's status row reports it (``SHOW SINK STATUS``, ``icesql status``) and as
Prometheus scrapes it (``icesql_source_lag_records{sink,topic,partition}``). No Spark: the
source's progress is asked directly, against a real broker."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from icesql.engine.sources.kafka.progress import KafkaProgress
from icesql.observe.health import SinkReport
from icesql.observe.metrics import SinkMetrics
from icesql.plan import KafkaSourceSpec, SourceFormat, SourceKind, SourcePlan
from tests.support import kafka as K

pytestmark = pytest.mark.kafka


def test_lag_per_partition_from_the_log_end(noida_broker: Any, topic_name: str) -> None:
    b = noida_broker.bootstrap
    K.create_topic(b, topic_name, 3)
    K.produce(b, topic_name, [(None, b"x", None, i % 3) for i in range(30)])
    plan = SourcePlan(
        name="s", source_kind=SourceKind.KAFKA, format=SourceFormat.TEXT, kafka=KafkaSourceSpec("k", topic_name)
    )
    progress = KafkaProgress(SimpleNamespace(name="sink"), plan)
    progress.conf = {"bootstrap.servers": b}
    progress.committed = {(topic_name, 0): 4, (topic_name, 1): 10}  # partition 2: nothing of it in the table yet
    try:
        row = progress.status()
    finally:
        progress.close()
    assert row["source_lag_partitions"] == {topic_name: {0: 6, 1: 0, 2: 10}}
    assert row["source_lag"] == 16

    report = SinkReport(name="sink", table="ns.t", state="running", source_lag=row["source_lag_partitions"])
    text = SinkMetrics(lambda: [report], grace=30.0).exposition()[0].decode()
    assert f'icesql_source_lag_records{{partition="0",sink="sink",topic="{topic_name}"}} 6.0' in text
    assert f'icesql_source_lag_records{{partition="2",sink="sink",topic="{topic_name}"}} 10.0' in text


def test_lag_is_unknown_while_the_broker_is_away() -> None:
    plan = SourcePlan(name="s", source_kind=SourceKind.KAFKA, format=SourceFormat.TEXT, kafka=KafkaSourceSpec("k", "t"))
    progress = KafkaProgress(SimpleNamespace(name="sink"), plan)
    progress.conf = {"bootstrap.servers": "127.0.0.1:1", "socket.timeout.ms": "1000"}
    import icesql.engine.sources.kafka.topic as source

    old = source.METADATA_TIMEOUT
    source.METADATA_TIMEOUT = 2.0
    try:
        assert progress.status() == {}  # status answers; the lag is left out rather than guessed
    finally:
        source.METADATA_TIMEOUT = old
        progress.close()
