"""The private pyiceberg surface icesql relies on is all in ``pyiceberg_internals`` and still there.

A pyiceberg upgrade is checked here first: the pinned range matches pyproject.toml and the
installed version, and every private name the module uses exists. The behaviour built on them
(row deltas, manifests the Java reader accepts, compaction's replace) is tested in
test_commit.py, test_upsert_commit.py and test_compact.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyiceberg

from icesql.engine.base import pyiceberg_internals as internals
from icesql.engine.base.pyiceberg_catalogs import cheap_commits

ROOT = Path(__file__).resolve().parents[2]


def test_the_pinned_range_is_the_one_pyproject_installs() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    pin = re.search(r'"pyiceberg\[[^\]]*\]([^"]+)"', pyproject)
    assert pin is not None
    assert pin.group(1) == ",".join(internals.PYICEBERG_RANGE)
    assert internals.pyiceberg_version_supported(pyiceberg.__version__)
    assert not internals.pyiceberg_version_supported("0.13.0")
    assert not internals.pyiceberg_version_supported("0.11.1")


def test_every_private_name_used_exists_in_the_installed_pyiceberg() -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io import pyarrow as pa_io
    from pyiceberg.manifest import DataFile, ManifestWriterV2
    from pyiceberg.table import Transaction
    from pyiceberg.table.update import snapshot
    from pyiceberg.typedef import Record

    fast_append = snapshot._FastAppendFiles
    for name in (
        "_commit",
        "_existing_manifests",
        "_manifests",
        "_summary",
        "new_manifest_writer",
        "new_manifest_output",
        "append_data_file",
    ):
        assert hasattr(fast_append, name), name
    for name in ("_with_partition", "_meta", "content", "add_entry", "to_manifest_file"):
        assert hasattr(ManifestWriterV2, name), name
    assert isinstance(Transaction.__dict__["table_metadata"], property)
    assert hasattr(Transaction, "_apply")
    assert hasattr(pa_io, "_get_parquet_writer_kwargs")
    assert hasattr(pa_io, "_primitive_to_physical")
    assert hasattr(SqlCatalog, "_load_file_io")
    assert hasattr(SqlCatalog, "_update_and_stage_table") and hasattr(SqlCatalog, "_parse_metadata_version")
    from pyiceberg.table import update as table_update

    for name in ("_apply_table_update", "_TableMetadataUpdateContext", "_update_table_metadata_log"):
        assert hasattr(table_update, name), name
    assert "_data" in Record.__slots__ or hasattr(Record(1), "_data")
    df = internals.new_data_file(2, file_path="x", record_count=1, file_size_in_bytes=1, partition=Record(7))
    assert isinstance(df, DataFile) and internals.partition_values(df) == (7,)


def test_private_pyiceberg_names_are_used_nowhere_else() -> None:
    """The places to check on an upgrade (``pyiceberg_internals``, its format v3 part
    ``pyiceberg_v3`` and its catalog part ``pyiceberg_catalogs``): no other engine module
    reaches into pyiceberg's privates."""
    pattern = re.compile(r"(from pyiceberg[\w.]* import [^\n]*\b_[a-z]\w*|\._(load_file_io|commit|apply|data)\b)")
    offenders = []
    for path in sorted((ROOT / "icesql" / "engine").rglob("*.py")):
        if path.name in ("pyiceberg_internals.py", "pyiceberg_v3.py", "pyiceberg_catalogs.py"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def _table(tmp_path: Path, cheap: bool) -> tuple[Any, Any]:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    if cheap:
        cheap_commits(catalog)
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", pa.schema([pa.field("id", pa.int64())]))
    return catalog, table


def test_staged_metadata_is_pyicebergs_update_without_the_copy(tmp_path: Path) -> None:
    """The same metadata as ``update_table_metadata`` for a commit's updates (a snapshot, a ref,
    a property), metadata log included, and the base metadata is left as it was."""
    import pyarrow as pa
    from pyiceberg.table.update import update_table_metadata

    _, table = _table(tmp_path, cheap=False)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    base = table.metadata
    before = base.model_dump()
    tx = internals.transaction(table)
    tx.set_properties(owner="icesql")
    with tx.update_snapshot().fast_append() as append:
        for f in _data_files(table, [3]):
            append.append_data_file(f)
    updates = tx._updates
    ours = internals.staged_metadata(base, updates, table.metadata_location)
    theirs = update_table_metadata(base, updates, metadata_location=table.metadata_location)
    assert ours.model_dump() == theirs.model_dump()
    assert ours.metadata_log[-1].metadata_file == table.metadata_location
    assert base.model_dump() == before
    assert internals.staged_metadata(base, ()) is base


def _data_files(table: Any, ids: list[int]) -> list[Any]:
    import pyarrow as pa

    from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec

    w = DataFileWriter(WriteSpec.from_table(table))
    w.write(pa.record_batch({"id": pa.array(ids, pa.int64())}))
    return [f.to_data_file(2) for f in w.close()]


def test_a_catalog_with_cheap_commits_writes_what_pyiceberg_writes(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Commits through ``cheap_commits`` give the metadata a plain catalog gives: snapshots,
    rows, metadata log and version numbers, read back by a catalog without it; and they do not
    go through pyiceberg's ``update_table_metadata`` (its deep copy) at all."""
    import pyarrow as pa
    import pyiceberg.catalog as pyiceberg_catalog
    from pyiceberg.catalog.sql import SqlCatalog

    results = []
    for cheap in (False, True):
        path = tmp_path / ("cheap" if cheap else "plain")
        path.mkdir()
        _, table = _table(path, cheap)
        if cheap:

            def copying(*args: Any, **kwargs: Any) -> Any:
                raise AssertionError("a commit went through pyiceberg's update_table_metadata")

            monkeypatch.setattr(pyiceberg_catalog, "update_table_metadata", copying)
        for i in range(3):
            table.append(pa.table({"id": pa.array([i], pa.int64())}))
        table.transaction().set_properties(k="v").commit_transaction()
        plain = SqlCatalog("c", uri=f"sqlite:///{path}/c.db", warehouse=f"file://{path}/wh")
        back = plain.load_table("ns.t")
        md = back.metadata
        results.append(
            (
                sorted(back.scan().to_arrow()["id"].to_pylist()),
                len(md.snapshots),
                [Path(e.metadata_file).name.split("-")[0] for e in md.metadata_log],
                Path(back.metadata_location).name.split("-")[0],
                md.properties.get("k"),
                [s.summary.operation.value for s in md.snapshots],
            )
        )
    assert results[0] == results[1]
    assert results[1][0] == [0, 1, 2] and results[1][2] == ["00000", "00001", "00002", "00003"]
