"""One object store: its URL schemes, its connection's credentials as FileIO properties, its
pyarrow filesystem (``Filesystem``, the one FileIO-to-pyarrow adapter), and how its failures
read.

An ``ObjectStore`` is data plus a few functions, the way pyiceberg keeps one FileIO per scheme
(``pyiceberg.io.SCHEMA_TO_FILE_IO``): the S3, GCS, Azure and local entries live in their own
modules and are registered in ``icesql.engine.connections.stores``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from icesql.engine.base.secrets import SecretValues

FileIoProperties = dict[str, str]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")  # two letters at least: 'C:' is a drive


def split_location(location: str) -> tuple[str, str, str]:
    """(scheme, netloc, path) of a location; ('', '', location) for a plain path. Hadoop's
    ``file:/x`` (what a Hive metastore answers) is ``file:///x``."""
    if not _SCHEME.match(location):
        return "", "", location
    parts = urlsplit(location)
    return parts.scheme.lower(), parts.netloc, parts.path


def _no_validate(plan: Any, sec: SecretValues) -> None:
    return None


@dataclass(frozen=True)
class ObjectStore:
    """One kind of object store.

    * ``schemes``: the URL schemes it serves (the first is its own spelling);
    * ``connection_kind``: the ``kind`` of the connection plan that holds its credentials
      (``'aws'``, ``'gcs'``, ``'azure'``; None for the local file system) and ``keyword``, how
      SQL names it (``USING GCS CONNECTION g``);
    * ``file_io(plan, sec)``: the connection's FileIO properties (secrets resolved through
      ``sec`` and remembered for masking);
    * ``credential_keys``: the FileIO properties that carry credentials. A layer that carries
      any of them replaces all of them below it (``stores.layer``): a vended token never sits
      next to another identity's key;
    * ``file_io_impl``: the pyiceberg FileIO class its paths need (``py-io-impl``), when
      pyiceberg's own choice for the scheme is not the pyarrow one;
    * ``validate(plan, sec)``: one cheap authenticated call (``VALIDATE CONNECTION``);
    * ``failure``: what the text of a failure of its client says (``failures.service_of``);
    * ``split(netloc, path)`` / ``join(fs_path, scheme, netloc)``: a location's path in the
      pyarrow filesystem and back (Azure's ``container@account.dfs.core.windows.net`` netloc).
    """

    name: str
    schemes: tuple[str, ...]
    keyword: str = ""
    connection_kind: str | None = None
    file_io: Callable[[Any, SecretValues], FileIoProperties] = lambda plan, sec: {}
    credential_keys: tuple[str, ...] = ()
    file_io_impl: str | None = None
    validate: Callable[[Any, SecretValues], None] = _no_validate
    endpoint: Callable[[Any], str | None] = lambda plan: getattr(plan, "endpoint", None)
    failure: re.Pattern[str] | None = None
    # (code, HTTP status) of the store's error in a failure's text, and which codes mean what
    error_code: Callable[[str], tuple[str, str] | None] = lambda text: None
    auth_codes: frozenset[str] = frozenset()
    not_found_codes: frozenset[str] = frozenset()
    transient_codes: frozenset[str] = frozenset()
    not_found: str = "bucket or object not found"
    # the options a user checks when the store refuses (the hint of a one-line error)
    check_hint: str = "check the connection's credentials and ENDPOINT, and the bucket"
    split: Callable[[str, str], str] = lambda netloc, path: f"{netloc}{path}"
    # a location's netloc spelled one way (Azure: the container without its account's host)
    netloc_key: Callable[[str], str] = lambda netloc: netloc
    join: Callable[[str, str, str], str] = lambda fs_path, scheme, netloc: f"{scheme}://{fs_path}"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def label(self, plan: Any) -> str:
        return f"{self.keyword} connection '{plan.name}'"

    def is_transient(self, text: str) -> bool:
        """The store's error in ``text`` is worth a retry (throttled, unavailable, 5xx)."""
        found = self.error_code(text)
        return found is not None and (found[0] in self.transient_codes or found[1].startswith("5"))

    def explain(self, text: str) -> str:
        """A short cause for the store's error in ``text``."""
        found = self.error_code(text)
        if found is None:
            return f"{self.keyword} object store error"
        code, status = found
        said = f"{code}, HTTP {status}" if status else code
        if code in self.auth_codes or status in ("401", "403"):
            return f"the object store refused the credentials ({said})"
        if code in self.not_found_codes or status == "404":
            return f"{self.not_found} ({said})"
        if self.is_transient(text):
            return f"object store unavailable ({said})"
        return f"object store error ({said})"


@dataclass(frozen=True)
class Listed:
    """A file a listing found."""

    location: str  # a URI spelled as the listed location is (a plain path for a local one)
    size: int
    mtime_ns: int | None


class Filesystem:
    """The pyarrow filesystem under one location, and the way between its URIs and the
    filesystem's paths. Built from a FileIO (or its properties) through ``stores.filesystem``;
    listing a FILES source, listing a table's files for orphan cleanup and the Spark Connect
    drop box all use it."""

    def __init__(self, fs: Any, store: ObjectStore, location: str, io: Any = None) -> None:
        self.fs = fs
        self.store = store
        self.io = io  # the FileIO the filesystem came from: its delete is the store's own
        self.scheme, self.netloc, _ = split_location(location)

    def path(self, location: str) -> str:
        """``location`` as the filesystem names it (``bucket/key``, a plain local path)."""
        scheme, netloc, path = split_location(location)
        if not scheme:
            return location
        if scheme == "file":
            return path
        return self.store.split(netloc, path)

    def uri(self, fs_path: str) -> str:
        """A filesystem path back as a URI spelled like the location this was built for."""
        if not self.scheme:
            return fs_path
        if self.scheme == "file":
            return f"file://{fs_path}"
        return self.store.join(fs_path, self.scheme, self.netloc)

    def list(self, location: str, *, recursive: bool) -> Iterator[Listed]:
        """The files under ``location`` (a directory; nothing when it does not exist)."""
        from pyarrow import fs as pafs

        selector = pafs.FileSelector(self.path(location).rstrip("/") or "/", recursive=recursive, allow_not_found=True)
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File:
                yield Listed(self.uri(info.path), int(info.size or 0), info.mtime_ns)

    def open_input(self, location: str) -> Any:
        return self.fs.open_input_file(self.path(location))

    def move(self, src: str, dest: str) -> None:
        """Move a file (filesystem paths). Where the filesystem cannot (Azure Blob without a
        hierarchical namespace), a copy then a delete: a crash between them leaves both, which
        ``CLEAN SOURCE`` takes for a move cut short, as it does on S3."""
        try:
            self.fs.move(src, dest)
        except NotImplementedError:
            self.fs.copy_file(src, dest)
            self.delete(src)

    def delete(self, fs_path: str) -> None:
        """Delete a file (a filesystem path) as the FileIO does (Azure: one Delete Blob)."""
        if self.io is not None:
            self.io.delete(self.uri(fs_path))
        else:
            self.fs.delete_file(fs_path)


__all__ = ["FileIoProperties", "Filesystem", "Listed", "ObjectStore", "split_location"]
