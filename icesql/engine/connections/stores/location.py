"""Listing a FILES source through pyarrow's filesystems (local paths, ``s3://``, ``gs://``,
``abfs://``: the object-store registry, ``icesql.engine.connections.stores``).

``Location(path, io_properties)`` opens the filesystem once; ``list()`` returns the files of the
source: the directory's files (not its subdirectories), or those matching a glob in the last part
of the path (``data/*.json``), without the hidden ones (names starting with ``.`` or ``_``, as
Spark skips them). Credentials stay in ``io_properties`` (never logged).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_GLOB = set("*?[")


@dataclass(frozen=True)
class Listed:
    path: str  # as the source names it: an absolute local path or a URI
    size: int
    mtime_ms: int


def is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


class Location:
    """A source path on its filesystem (``stores.filesystem``: S3, GCS, Azure or local)."""

    def __init__(self, path: str, io_properties: Mapping[str, str] | None = None) -> None:
        self.path = path
        self.io_properties = dict(io_properties or {})
        self._fs: Any = None
        base, _, last = path.rstrip("/").rpartition("/")
        self.pattern: str | None = None
        if _GLOB & set(last):
            self.directory, self.pattern = base or "/", last
        else:
            self.directory = path.rstrip("/") or "/"

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "io_properties": self.io_properties}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["io_properties"])  # type: ignore[misc]

    @property
    def filesystem(self) -> Any:
        """The source's ``stores.Filesystem`` (built once per process)."""
        if self._fs is None:
            from icesql.engine.connections import stores

            self._fs = stores.filesystem(self.io_properties, self.path)
        return self._fs

    @property
    def fs(self) -> Any:
        """The pyarrow filesystem of the source."""
        return self.filesystem.fs

    def fs_path(self, path: str) -> str:
        """``path`` as the filesystem names it (``bucket/key`` for S3, a plain local path)."""
        return str(self.filesystem.path(path))

    def list(self) -> list[Listed]:
        out = []
        for found in self.filesystem.list(self.directory, recursive=False):
            name = found.location.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith((".", "_")):
                continue
            if self.pattern is not None and not fnmatch.fnmatchcase(name, self.pattern):
                continue
            mtime = found.mtime_ns // 1_000_000 if found.mtime_ns is not None else 0
            # a local file is named by its plain path, a 'file://' source's too: the file log
            # knows the files it read by these names
            path = found.location if is_remote(self.path) else self.filesystem.path(found.location)
            out.append(Listed(path, found.size, int(mtime)))
        return out

    def open_input(self, path: str) -> Any:
        return self.filesystem.open_input(path)


__all__ = ["Listed", "Location", "is_remote"]
