"""The key index's files: shard chains and manifests, under the table's data directory::

    <table>/data/icesql-index/<sink id>/m-<progress>-<version>.parquet     one row per shard
    <table>/data/icesql-index/<sink id>/s<shard>/b-<progress>-<version>-<attempt>.parquet  base
    <table>/data/icesql-index/<sink id>/s<shard>/d-<progress>-<version>-<attempt>.parquet  delta

A manifest names, per shard, the chain of files whose application gives the shard at that
progress, the data files the batch added (so that the manifest of the batch the table holds is
told apart from one written by an attempt that never committed), and the table snapshot it was
rebuilt from (rebuilds only). Everything is Parquet: S3 Tables buckets accept nothing else under
``data/``. The files are written whole (one PUT, or a rename on local disks).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from icesql.engine.base.layout import INDEX_ROOT


@dataclass(frozen=True)
class Manifest:
    """The index at one progress of the sink."""

    progress: int
    version: int
    shards: int
    key: tuple[str, ...]
    chains: tuple[tuple[str, ...], ...]  # per shard: base (or nothing), then deltas, relative names
    added_files: tuple[str, ...] = ()  # data files the batch of this progress added
    snapshot_id: int | None = None  # a rebuild: the snapshot it was built from
    shard_keys: tuple[int, ...] = ()  # per shard: live entries (for the status and sizing)
    deltas: tuple[str | None, ...] = ()  # per shard: this progress's delta (the keys it changed)

    @property
    def keys(self) -> int:
        return sum(self.shard_keys)

    @property
    def name(self) -> str:
        return manifest_name(self.progress, self.version)


def manifest_name(progress: int, version: int) -> str:
    return f"m-{progress + 1:020d}-{version:010d}.parquet"  # +1: a rebuild before any commit is -1


def _parse_manifest_name(name: str) -> tuple[int, int] | None:
    if not (name.startswith("m-") and name.endswith(".parquet")):
        return None
    try:
        p, v = name[2:-8].split("-")
        return int(p) - 1, int(v)
    except ValueError:
        return None


def shard_file(shard: int, kind: str, progress: int, version: int) -> str:
    """A new shard file name (``kind``: ``b`` base, ``d`` delta); unique per attempt."""
    return f"s{shard:05d}/{kind}-{progress + 1:020d}-{version:010d}-{uuid.uuid4().hex[:8]}.parquet"


class IndexStore:
    """The index directory of one sink's table (picklable; opens its filesystem lazily)."""

    def __init__(self, table_location: str, sink_id: str, io_properties: Mapping[str, str]) -> None:
        self.root = f"{table_location.rstrip('/')}/{INDEX_ROOT}/{sink_id}"
        self.io_properties = dict(io_properties)
        self._location: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "io_properties": self.io_properties}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.root = state["root"]
        self.io_properties = state["io_properties"]
        self._location = None

    def use_io(self, io_properties: Mapping[str, str]) -> None:
        """Reach the index with ``io_properties`` from now on (fresh credentials)."""
        if dict(io_properties) != self.io_properties:
            self.io_properties = dict(io_properties)
            self._location = None

    @property
    def location(self) -> Any:
        if self._location is None:
            from icesql.engine.connections.stores.location import Location

            self._location = Location(self.root, self.io_properties)
        return self._location

    @property
    def fs(self) -> Any:
        return self.location.fs

    def path(self, name: str) -> str:
        return f"{self.location.fs_path(self.root)}/{name}"

    # ----------------------------------------------------------------- raw files

    def write_table(self, name: str, table: Any) -> int:
        """Write ``table`` (pyarrow) as Parquet at ``name``; returns the bytes written."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        data = sink.getvalue().to_pybytes()
        final = self.path(name)
        if self.fs.type_name == "local":  # an object store has no directories to make
            self.fs.create_dir(final.rsplit("/", 1)[0], recursive=True)
            tmp = f"{final}.{uuid.uuid4().hex[:8]}.tmp"
            with self.fs.open_output_stream(tmp) as out:
                out.write(data)
            self.fs.move(tmp, final)
        else:
            with self.fs.open_output_stream(final) as out:
                out.write(data)
        return len(data)

    def read_table(self, name: str, columns: Sequence[str] | None = None) -> Any:
        import pyarrow.parquet as pq

        with self.fs.open_input_file(self.path(name)) as f:
            return pq.read_table(f, columns=list(columns) if columns is not None else None)

    def read_entries(self, name: str) -> Any:
        """A shard file (base or delta) with ``__path`` read as a dictionary, whether it was
        written as one or as a plain string (an older index): a shard never holds a string per
        entry of its files' paths, not even while it loads."""
        import pyarrow.parquet as pq

        from icesql.engine.index.shard import PATH

        with self.fs.open_input_file(self.path(name)) as f:
            return pq.read_table(f, read_dictionary=[PATH])

    def exists(self, name: str) -> bool:
        from pyarrow import fs as pafs

        return bool(self.fs.get_file_info(self.path(name)).type == pafs.FileType.File)

    def delete(self, name: str) -> None:
        try:
            self.fs.delete_file(self.path(name))
        except (FileNotFoundError, OSError):
            pass

    def files(self) -> list[str]:
        """Every file of the index, relative to its root."""
        from pyarrow import fs as pafs

        base = self.location.fs_path(self.root).rstrip("/")
        selector = pafs.FileSelector(base, allow_not_found=True, recursive=True)
        out = []
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File and not info.base_name.endswith(".tmp"):
                out.append(info.path[len(base) + 1 :])
        return out

    # ----------------------------------------------------------------- manifests

    def write_manifest(self, m: Manifest) -> None:
        import pyarrow as pa

        rows = [
            {
                "shard": s,
                "chain": list(chain),
                "progress": m.progress,
                "version": m.version,
                "shards": m.shards,
                "key": list(m.key),
                "added_files": list(m.added_files) if s == 0 else [],
                "snapshot_id": m.snapshot_id,
                "keys": m.shard_keys[s] if s < len(m.shard_keys) else 0,
                "delta": m.deltas[s] if s < len(m.deltas) else None,
            }
            for s, chain in enumerate(m.chains)
        ]
        self.write_table(m.name, pa.Table.from_pylist(rows, schema=_MANIFEST_SCHEMA()))

    def read_manifest(self, name: str) -> Manifest | None:
        try:
            rows = sorted(self.read_table(name).to_pylist(), key=lambda r: r["shard"])
        except (FileNotFoundError, OSError, ValueError):
            return None
        if not rows:
            return None
        first = rows[0]
        return Manifest(
            progress=int(first["progress"]),
            version=int(first["version"]),
            shards=int(first["shards"]),
            key=tuple(first["key"]),
            chains=tuple(tuple(r["chain"]) for r in rows),
            added_files=tuple(first["added_files"] or ()),
            snapshot_id=first["snapshot_id"],
            shard_keys=tuple(int(r["keys"] or 0) for r in rows),
            deltas=tuple(r.get("delta") for r in rows),
        )

    def manifests(self) -> list[tuple[int, int, str]]:
        """``(progress, version, name)`` of every manifest, newest first."""
        out = []
        for name in self.files():
            if "/" in name:
                continue
            parsed = _parse_manifest_name(name)
            if parsed is not None:
                out.append((parsed[0], parsed[1], name))
        return sorted(out, reverse=True)

    def complete(self, m: Manifest) -> bool:
        """Every file the manifest names is there (S3 Tables' maintenance may have removed one)."""
        present = set(self.files())
        return all(f in present for chain in m.chains for f in chain)

    def cleanup(self, keep: Manifest) -> int:
        """Delete every manifest but ``keep`` and the files it does not name (the index's older
        versions and what attempts that never committed wrote); returns how many were deleted."""
        named = {f for chain in keep.chains for f in chain} | {keep.name} | {d for d in keep.deltas if d}
        n = 0
        for name in self.files():
            if name not in named:
                self.delete(name)
                n += 1
        return n


def _MANIFEST_SCHEMA() -> Any:  # noqa: N802 - a constant built lazily (pyarrow)
    import pyarrow as pa

    return pa.schema(
        [
            ("shard", pa.int32()),
            ("chain", pa.list_(pa.string())),
            ("progress", pa.int64()),
            ("version", pa.int64()),
            ("shards", pa.int32()),
            ("key", pa.list_(pa.string())),
            ("added_files", pa.list_(pa.string())),
            ("snapshot_id", pa.int64()),
            ("keys", pa.int64()),
            ("delta", pa.string()),
        ]
    )


__all__ = ["INDEX_ROOT", "IndexStore", "Manifest", "manifest_name", "shard_file"]
