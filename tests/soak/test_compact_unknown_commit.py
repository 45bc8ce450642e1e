"""A compaction whose commit response is cut short (issue 16, found by the short soak): the catalog
committed the rewrite, the client saw an error. The manifests written for that commit must stay:
deleting them (as a refused commit's are) left the table pointing at a missing manifest list and
every reader and the sink failed on it. Real parts: weed mini's REST catalog and S3 behind the
fault proxy, pyiceberg, DuckDB."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from icesql.engine.maintenance.compact import CompactMode, compact_table
from tests.e2e.test_weed_sinks import s3_props, verify_catalog
from tests.support.faultproxy import FaultProxy
from tests.support.readers import read_duckdb
from tests.support.weed import WeedServer

pytestmark = pytest.mark.weed


def test_a_cut_commit_response_keeps_the_rewrite_readable(weed: WeedServer, proxy: FaultProxy) -> None:
    ns = f"cut_{uuid.uuid4().hex[:8]}"
    direct = verify_catalog(weed)
    direct.create_namespace(ns)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = direct.create_table(f"{ns}.t", schema=schema)
    for i in range(6):  # six small files: something to compact
        table.append(pa.table({"id": [i], "v": [f"v{i}"]}, schema=schema))
    expected = sorted((i, f"v{i}") for i in range(6))

    through = weed.rest_catalog(proxy.url("rest"), name="through-proxy").load_table(f"{ns}.t")

    # the commit request goes through; its response is cut after 20 bytes. The cut is armed as
    # the commit is sent, not earlier: compact_table refreshes the table just before it commits,
    # and that response must arrive whole
    commit_table = through.catalog.commit_table

    def cut_commit(*args: object, **kwargs: object) -> object:
        proxy.cut_response_after(20, count=1, only="rest")
        return commit_table(*args, **kwargs)

    through.catalog.commit_table = cut_commit
    with pytest.raises(Exception) as info:  # noqa: B017 - whatever pyiceberg makes of a cut response
        compact_table(
            through, mode=CompactMode.FULL, io_properties=s3_props(weed), retries=0
        )
    proxy.clear()
    after = direct.load_table(f"{ns}.t")
    # the catalog did commit the rewrite (that is the case under test)
    assert after.current_snapshot().summary.get("icesql.commit-reason") == "compact", (info.value, after.current_snapshot())
    assert read_duckdb(after.metadata_location, s3=s3_props(weed)) == expected
    # and the table's every manifest list is there (the sink read them and failed before)
    for snap in after.snapshots():
        assert list(snap.manifests(after.io)) is not None
