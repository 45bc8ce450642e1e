"""Sink-like Iceberg tables built without Spark, for the maintenance tests.

A table is created the way a sink creates it (``tables.ensure_table``), its files are written by
icesql's own ``DataFileWriter`` and committed by ``commit.commit`` with a sink id and progress,
as a sink's runner commits them. Position deletes (icesql's upserts write equality deletes;
pyiceberg writes neither) are Parquet files with the spec's ``file_path``/``pos`` columns,
committed as a row delta through the same path.
"""

from __future__ import annotations

import struct as binary
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icesql.engine.commit.snapshot import CommitRequest, CommitResult, commit
from icesql.engine.iceberg.tables import ensure_table, key_field_ids
from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec
from icesql.plan import PartitionFieldPlan, SinkMode, SinkPlan, Transform
from tests.support.readers import read_datafusion, read_duckdb

FILE_PATH_ID = 2147483546  # the Iceberg spec's reserved field ids of a position delete file
POS_ID = 2147483545


def sql_catalog(tmp_path: Path, name: str = "test") -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    wh = tmp_path / "wh"
    wh.mkdir(parents=True, exist_ok=True)
    return SqlCatalog(name, uri=f"sqlite:///{wh}/catalog.db", warehouse=wh.as_uri())


def sink_table(catalog: Any, name: str = "t", *, partition_by: str | None = None, upsert: bool = True) -> Any:
    """Table ``ns.<name>`` (``id BIGINT, region STRING, v STRING``) as an upsert sink on ``id``
    creates it; ``partition_by='region'`` partitions it by that column (then KEY is (id, region))."""
    schema = {
        "type": "struct",
        "fields": [
            {"name": n, "type": t, "nullable": True, "metadata": {}}
            for n, t in (("id", "long"), ("region", "string"), ("v", "string"))
        ],
    }
    key: tuple[str, ...] = ("id", "region") if partition_by else ("id",)
    plan = SinkPlan(
        name="s",
        relation="r",
        catalog_connection="c",
        namespace=("ns",),
        table=name,
        key=key if upsert else (),
        mode=SinkMode.UPSERT if upsert else SinkMode.APPEND,
        partition_by=(PartitionFieldPlan(partition_by, Transform.IDENTITY, name=partition_by),)
        if partition_by
        else (),
    )
    return ensure_table(catalog, None, schema, plan)


def rows_batch(ids: Sequence[int], v: str = "x", region: str = "eu") -> pa.RecordBatch:
    return pa.record_batch(
        {"id": pa.array(list(ids), pa.int64()), "region": [region] * len(ids), "v": [v] * len(ids)}
    )


def data(table: Any, ids: Sequence[int], v: str = "x", region: str = "eu", max_file_size: int | None = None) -> list:
    w = DataFileWriter(WriteSpec.from_table(table, max_file_size=max_file_size))
    w.write(rows_batch(ids, v, region))
    return w.close()


def equality_deletes(table: Any, ids: Sequence[int], region: str = "eu") -> list:
    key = ["id", "region"] if not table.spec().is_unpartitioned() else ["id"]
    w = DataFileWriter(WriteSpec.from_table(table), "equality_deletes", key_field_ids(table.schema(), key))
    w.write(rows_batch(ids, region=region))
    return w.close()


def position_deletes(table: Any, positions: Mapping[str, Sequence[int]], partition: tuple[Any, ...] = ()) -> Any:
    """One position delete file deleting ``positions`` (data file path -> row positions)."""
    from pyiceberg.manifest import DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    from icesql.engine.base.pyiceberg_internals import new_data_file

    rows = sorted((p, int(i)) for p, ps in positions.items() for i in ps)
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(FILE_PATH_ID)}),
            pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_ID)}),
        ]
    )
    t = pa.Table.from_pylist([{"file_path": p, "pos": i} for p, i in rows], schema=schema)
    path = f"{table.location().rstrip('/')}/data/{uuid.uuid4().hex}-pos-deletes.parquet"
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink)
    payload = sink.getvalue().to_pybytes()
    with table.io.new_output(path).create(overwrite=True) as out:
        out.write(payload)
    paths = [p for p, _ in rows]
    poss = [i for _, i in rows]
    df = new_data_file(
        int(table.metadata.format_version),
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=len(rows),
        file_size_in_bytes=len(payload),
        column_sizes={},
        value_counts={FILE_PATH_ID: len(rows), POS_ID: len(rows)},
        null_value_counts={FILE_PATH_ID: 0, POS_ID: 0},
        nan_value_counts={},
        lower_bounds={FILE_PATH_ID: min(paths).encode(), POS_ID: binary.pack("<q", min(poss))},
        upper_bounds={FILE_PATH_ID: max(paths).encode(), POS_ID: binary.pack("<q", max(poss))},
        split_offsets=None,
        equality_ids=None,
        key_metadata=None,
        sort_order_id=None,
    )
    df.spec_id = table.spec().spec_id
    return df


def sink_commit(
    table: Any,
    progress: int,
    data_files: Sequence[Any] = (),
    delete_files: Sequence[Any] = (),
    *,
    sink_id: str = "sink-a",
    version: int = 1,
) -> CommitResult:
    return commit(table, CommitRequest(list(data_files), list(delete_files), sink_id, version, progress))


def sink_history(table: Any, snapshots: int, *, merge_every: int | None = None, sink_id: str = "sink-a") -> Any:
    """``snapshots`` sink commits of one row each, as a sink leaves them (a snapshot per commit
    with its progress), built many snapshots per catalog commit (as icesql commits several staged
    batches) so that building a long history is quick; with ``merge_every``, the manifests are
    merged after every that many commits, as maintenance does."""
    from icesql.engine.commit.snapshot import CommitGroup
    from icesql.engine.maintenance import rewrite_manifests

    table.transaction().set_properties({"write.metadata.previous-versions-max": "10"}).commit_transaction()
    step = merge_every or 100
    done = 0
    while done < snapshots:
        n = min(step, snapshots - done)
        groups = [CommitGroup(tuple(data(table, [done + i])), (), done + i) for i in range(n)]
        commit(table, CommitRequest((), (), sink_id, 1, done + n - 1, groups=groups))
        done += n
        if merge_every:
            rewrite_manifests(table, max_manifests=1)
    return table


def read_rows(table: Any) -> list[tuple[Any, ...]]:
    """The table's rows as DuckDB and DataFusion read them (they must agree)."""
    table.refresh()
    duck = sorted(read_duckdb(table.metadata_location))
    fusion = sorted(read_datafusion(table.metadata_location))
    assert fusion == duck, "DuckDB and DataFusion disagree"
    return duck


def live_paths(table: Any) -> dict[int, set[str]]:
    """content (0 data, 1 position deletes, 2 equality deletes) -> paths the current snapshot reads."""
    table.refresh()
    out: dict[int, set[str]] = {}
    for f in table.inspect.files().to_pylist():
        out.setdefault(f["content"], set()).add(f["file_path"])
    return out


def local(path: str) -> Path:
    return Path(path.removeprefix("file://"))


__all__ = [
    "data",
    "equality_deletes",
    "live_paths",
    "local",
    "position_deletes",
    "read_rows",
    "rows_batch",
    "sink_commit",
    "sink_history",
    "sink_table",
    "sql_catalog",
]
