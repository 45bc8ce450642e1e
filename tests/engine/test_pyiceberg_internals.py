"""The private pyiceberg surface icesql relies on is all in ``pyiceberg_internals`` and still there.

A pyiceberg upgrade is checked here first: the pinned range matches pyproject.toml and the
installed version, and every private name the module uses exists. The behaviour built on them
(row deltas, manifests the Java reader accepts, compaction's replace) is tested in
test_commit.py, test_upsert_commit.py and test_compact.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyiceberg

from icesql.engine import pyiceberg_internals as internals

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
    assert hasattr(SqlCatalog, "_load_file_io")
    assert "_data" in Record.__slots__ or hasattr(Record(1), "_data")
    df = internals.new_data_file(2, file_path="x", record_count=1, file_size_in_bytes=1, partition=Record(7))
    assert isinstance(df, DataFile) and internals.partition_values(df) == (7,)


def test_private_pyiceberg_names_are_used_nowhere_else() -> None:
    """One place to check on an upgrade: no other engine module reaches into pyiceberg's privates."""
    pattern = re.compile(r"(from pyiceberg[\w.]* import [^\n]*\b_[a-z]\w*|\._(load_file_io|commit|apply|data)\b)")
    offenders = []
    for path in sorted((ROOT / "icesql" / "engine").rglob("*.py")):
        if path.name == "pyiceberg_internals.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []
