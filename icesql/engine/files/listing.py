"""Listing a FILES source through pyarrow's filesystems (local paths, ``s3://``; GCS and ABS by
the same FileIO properties pyiceberg understands).

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
    """A source path on its filesystem."""

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
    def fs(self) -> Any:
        """The pyarrow filesystem of the source (built once per process)."""
        if self._fs is None:
            if is_remote(self.path):
                from pyiceberg.io import load_file_io

                io: Any = load_file_io(self.io_properties, self.path)
                scheme, netloc, _ = io.parse_location(self.path)
                self._fs = io.fs_by_scheme(scheme, netloc)
            else:
                from pyarrow import fs as pafs

                self._fs = pafs.LocalFileSystem()
        return self._fs

    def fs_path(self, path: str) -> str:
        """``path`` as the filesystem names it (``bucket/key`` for S3, a plain local path)."""
        if path.startswith("file://"):
            return path[len("file://") :]
        if is_remote(path):
            return path.split("://", 1)[1]
        return path

    def _uri(self, fs_path: str) -> str:
        if is_remote(self.path):
            return f"{self.path.split('://', 1)[0]}://{fs_path}"
        return fs_path

    def list(self) -> list[Listed]:
        from pyarrow import fs as pafs

        selector = pafs.FileSelector(self.fs_path(self.directory), allow_not_found=True, recursive=False)
        out = []
        for info in self.fs.get_file_info(selector):
            if info.type != pafs.FileType.File:
                continue
            name = info.base_name
            if name.startswith((".", "_")):
                continue
            if self.pattern is not None and not fnmatch.fnmatchcase(name, self.pattern):
                continue
            mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
            out.append(Listed(self._uri(info.path), int(info.size or 0), int(mtime)))
        return out

    def open_input(self, path: str) -> Any:
        return self.fs.open_input_file(self.fs_path(path))


__all__ = ["Listed", "Location", "is_remote"]
