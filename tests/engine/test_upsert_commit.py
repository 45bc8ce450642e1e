"""MODE UPSERT end to end without Spark: inserts, updates and deletes by KEY over several commits,
checked against an expected state with independent readers (DuckDB, DataFusion/iceberg-rust and,
with the harness, the Iceberg Java library). pyiceberg cannot apply equality deletes, so it is not
used to read these tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icesql.engine.commit.snapshot import CommitGroup, CommitRequest, commit, last_committed, snapshot_summary
from icesql.engine.iceberg.tables import ensure_table, key_field_ids
from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec, dedupe_last
from icesql.plan import PartitionFieldPlan, SinkMode, SinkPlan, Transform
from tests.engine.test_schema import f, struct
from tests.support import readers

SCHEMA = struct(f("region", "string"), f("id", "long"), f("v", "string"), f("n", "integer"))

Op = tuple[str, str, int, str]  # (op 'u' upsert | 'd' delete, region, id, value)

LAYOUTS = {
    "unpartitioned": dict(key=("region", "id"), partition_by=()),
    "partitioned": dict(
        key=("region", "id"),
        partition_by=(
            PartitionFieldPlan("region", Transform.IDENTITY, None, "region"),
            PartitionFieldPlan("id", Transform.BUCKET, 4, "id_bucket_4"),
        ),
    ),
}


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")


class Sink:
    """What the pipeline does per batch: last change per key wins; every touched key gets an
    equality delete, surviving upserts a data row."""

    def __init__(self, catalog: SqlCatalog, layout: str) -> None:
        self.plan = SinkPlan(
            name="s",
            relation="r",
            catalog_connection="c",
            namespace=("up",),
            table=layout,
            mode=SinkMode.UPSERT,
            **LAYOUTS[layout],  # type: ignore[arg-type]
        )
        self.catalog = catalog
        self.table = ensure_table(catalog, None, SCHEMA, self.plan)
        self.expected: dict[tuple[str, int], tuple[str, int, str, int]] = {}
        self.progress = 0

    def files(self, ops: list[Op]) -> CommitGroup:
        rows = pa.table(
            {
                "op": [o[0] for o in ops],
                "region": [o[1] for o in ops],
                "id": pa.array([o[2] for o in ops], pa.int64()),
                "v": [o[3] for o in ops],
                "n": pa.array([len(o[3]) for o in ops], pa.int32()),
            }
        )
        last = dedupe_last(rows, ["region", "id"])
        spec = WriteSpec.from_table(self.table)
        dw = DataFileWriter(spec)
        xw = DataFileWriter(spec, "equality_deletes", key_field_ids(self.table.schema(), self.plan.key))
        upserts = last.filter(pa.compute.equal(last.column("op"), "u")).drop_columns(["op"])
        if upserts.num_rows:
            dw.write(upserts)
        xw.write(last)  # key columns are picked by name
        for o in ops:  # the model
            if o[0] == "u":
                self.expected[(o[1], o[2])] = (o[1], o[2], o[3], len(o[3]))
            else:
                self.expected.pop((o[1], o[2]), None)
        self.progress += 1
        return CommitGroup(dw.close(), xw.close(), progress=self.progress)

    def apply(self, *batches: list[Op]) -> Any:
        groups = [self.files(b) for b in batches]
        if len(groups) == 1:
            g = groups[0]
            req = CommitRequest(g.data_files, g.delete_files, "sink", 1, self.progress)
        else:
            req = CommitRequest((), (), "sink", 1, self.progress, reason="recovery", groups=groups)
        result = commit(self.table, req)
        self.table = self.catalog.load_table(self.table.name())
        self.check()
        return result

    def rows(self) -> list[tuple]:
        return sorted(self.expected.values(), key=repr)

    def check(self) -> None:
        loc = self.table.metadata_location
        expected = self.rows()
        assert readers.read_duckdb(loc) == expected, "duckdb"
        assert readers.read_datafusion(loc) == expected, "datafusion"


def scenario(sink: Sink) -> None:
    regions = ["eu", "us"]
    # 1: inserts
    sink.apply([("u", regions[i % 2], i, f"v1-{i}") for i in range(20)])
    # 2: updates and deletes
    sink.apply(
        [("u", regions[i % 2], i, f"v2-{i}") for i in range(5)]
        + [("d", regions[i % 2], i, "") for i in range(5, 9)]
    )
    # 3: a deleted key comes back, another is deleted, one updated
    sink.apply([("u", "us", 5, "back"), ("d", "eu", 0, ""), ("u", "us", 9, "v3")])
    # 4: changes within one batch: the last one per key wins
    sink.apply(
        [
            ("u", "eu", 21, "new"),
            ("d", "eu", 21, ""),  # inserted then deleted: absent
            ("d", "eu", 10, ""),
            ("u", "eu", 10, "re-added"),  # deleted then re-inserted: present
            ("u", "eu", 2, "first"),
            ("u", "eu", 2, "second"),  # updated twice: second
            ("u", "us", 2, "same id other region"),  # (us, 2) is a different key
        ]
    )
    # 5: deletes only
    r = sink.apply([("d", "us", 1, ""), ("d", "us", 3, "")])
    assert snapshot_summary(sink.table, r.snapshot_id)["operation"] == "delete"
    # 6+7 staged separately, committed together: key 30 inserted in 6 and updated in 7 must not
    # be duplicated; key 4 updated in 6 and deleted in 7 must be gone
    r = sink.apply(
        [("u", "eu", 30, "inserted"), ("u", "eu", 4, "updated")],
        [("u", "eu", 30, "updated"), ("d", "eu", 4, "")],
    )
    assert len(r.snapshot_ids) == 2
    seqs = [sink.table.metadata.snapshot_by_id(s).sequence_number for s in r.snapshot_ids]
    assert seqs[1] == seqs[0] + 1
    assert last_committed(sink.table, "sink") == (1, sink.progress)
    assert ("eu", 30) in sink.expected and ("eu", 4) not in sink.expected


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_upsert_scenario(catalog: SqlCatalog, layout: str) -> None:
    sink = Sink(catalog, layout)
    scenario(sink)
    assert len(sink.rows()) > 10
    if layout == "partitioned":
        data_files = sink.table.inspect.files().to_pylist()
        for df in data_files:
            assert df["partition"]["region"] in ("eu", "us")


@pytest.mark.java
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_upsert_scenario_java_reader(catalog: SqlCatalog, layout: str) -> None:
    sink = Sink(catalog, layout)
    scenario(sink)
    got = readers.read_java(sink.table.metadata_location)
    want = readers.canonical_digest(
        [dict(zip(["region", "id", "v", "n"], r, strict=True)) for r in sink.rows()]
    )
    assert got["rows"] == want["rows"]
    assert got["digest"] == want["digest"], (got.get("all"), want["all"])
