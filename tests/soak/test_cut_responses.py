"""REST answers cut short (issue 16, found by the short soak): a sink failed for good on
``1 validation error for TableResponse`` and, with its other sink still running, sat there until
the operator gave up on it. Real parts: weed mini's REST catalog behind the fault proxy, icesql's
catalog loading, its failure rules and its commit.

An answer cut inside its headers reaches pyiceberg as status 200 with an empty body: that is a
broken connection (transient, retried), not a server that is no Iceberg catalog. A commit whose
answer is cut may have taken effect: the retry finds it in the table and counts it once.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from icesql.engine.base.secrets import SecretValues
from icesql.engine.commit.snapshot import CommitGroup, CommitRequest, commit
from icesql.engine.connections.catalogs import load_catalog
from icesql.engine.connections.failures import describe_failure, guarded, is_transient
from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec
from icesql.errors import ExecutionError
from tests.e2e.test_weed_sinks import s3_props, verify_catalog
from tests.soak.test_catalog_timeout import lake
from tests.support.faultproxy import FaultProxy
from tests.support.weed import WeedServer

pytestmark = pytest.mark.weed

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])


def new_table(weed: WeedServer, proxy: FaultProxy) -> Any:
    """A new table, loaded through the proxy."""
    ns = f"cut_{uuid.uuid4().hex[:8]}"
    direct = verify_catalog(weed)
    direct.create_namespace(ns)
    direct.create_table(f"{ns}.t", schema=SCHEMA)
    return weed.rest_catalog(proxy.url("rest"), name="through-proxy").load_table(f"{ns}.t")


def data_files(weed: WeedServer, table: Any, ids: list[int]) -> list[Any]:
    writer = DataFileWriter(WriteSpec.from_table(table, io_properties=s3_props(weed)))
    writer.write(pa.record_batch({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]}))
    return writer.close()


def commits_of(weed: WeedServer, table: Any, sink_id: str) -> list[str]:
    """The progress of every snapshot the sink committed, oldest first."""
    fresh = verify_catalog(weed).load_table(table.name())
    return [
        s.summary["icesql.progress"]
        for s in sorted(fresh.snapshots(), key=lambda s: s.sequence_number)
        if s.summary is not None and s.summary.get("icesql.sink-id") == sink_id
    ]


@pytest.mark.parametrize("nbytes", [0, 5, 20, 150])
def test_a_cut_answer_is_a_transient_failure_that_names_the_catalog(
    weed: WeedServer, proxy: FaultProxy, tmp_path: Path, nbytes: int
) -> None:
    """Wherever the answer is cut (before the status line, inside it, inside the headers, inside
    the body), the error names the connection, its address and the cause, and is transient."""
    conn = lake(weed, proxy)
    catalog = load_catalog(conn, aws=None, secrets=lambda _: weed.secret_key, home=tmp_path)
    table = new_table(weed, proxy)
    proxy.cut_response_after(nbytes, count=1, only="rest")
    sec = SecretValues(lambda _: weed.secret_key)
    with pytest.raises(ExecutionError) as info:
        guarded(
            lambda: catalog.load_table(table.name()), "catalog connection 'lake'", conn.uri, sec, "load table"
        )
    proxy.clear()
    err = info.value
    assert is_transient(err), err.message
    assert err.message.startswith(f"catalog connection 'lake': cannot load table at {conn.uri}: "), (
        err.message
    )
    assert err.message.endswith(("connection closed before the answer was complete", "connection reset")), (
        err.message
    )
    assert weed.secret_key not in err.render()
    assert catalog.load_table(table.name()).name() == table.name()  # the next call works


def test_a_commit_whose_answer_is_cut_is_retried_and_counted_once(
    weed: WeedServer, proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    table = new_table(weed, proxy)
    armed = []

    def cut_the_commit_answer(t: Any, groups: list[CommitGroup]) -> list[CommitGroup]:
        # called after the table's reload, before the commit request: the next answer is the commit's
        if not armed:
            armed.append(True)
            proxy.cut_response_after(20, count=1, only="rest")
        return groups

    files = data_files(weed, table, [1, 2])
    with caplog.at_level(logging.INFO, logger="icesql.commit"):
        result = commit(
            table,
            CommitRequest(files, [], "sink-a", 1, 7),
            guard=cut_the_commit_answer,
            transient_retries=2,
            transient_backoff=0.1,
        )
    proxy.clear()
    assert proxy.snapshot()["rest"]["responses_cut"] == 1
    # the catalog took the commit whose answer was lost: the retry found it, and says it is ours
    assert not result.skipped and result.rows == 2 and result.attempts == 2
    assert "the commit whose answer was lost took effect" in caplog.text
    assert "connection closed before the answer was complete; retrying" in caplog.text
    assert commits_of(weed, table, "sink-a") == ["7"]
    assert result.snapshot_id == verify_catalog(weed).load_table(table.name()).current_snapshot().snapshot_id

    # the table's reload cut short: retried, then committed
    proxy.cut_response_after(20, count=1, only="rest")
    result = commit(
        table,
        CommitRequest(data_files(weed, table, [3]), [], "sink-a", 1, 8),
        transient_retries=2,
        transient_backoff=0.1,
    )
    proxy.clear()
    assert not result.skipped and result.rows == 1 and result.attempts == 2
    assert commits_of(weed, table, "sink-a") == ["7", "8"]
    rows = verify_catalog(weed).load_table(table.name()).scan().to_arrow().sort_by("id")
    assert rows.column("id").to_pylist() == [1, 2, 3]

    # no retries left: the failure is raised, and the failure rules call it transient
    proxy.cut_response_after(20, count=1, only="rest")
    with pytest.raises(Exception) as info:  # noqa: B017 - whatever pyiceberg makes of the cut answer
        commit(table, CommitRequest(data_files(weed, table, [4]), [], "sink-a", 1, 9), transient_retries=0)
    proxy.clear()
    assert is_transient(describe_failure(info.value, label="sink a", endpoint=None, action="commit"))
    assert commits_of(weed, table, "sink-a") == ["7", "8"]
