"""Helpers for pipeline / engine tests: resolvers, a state store, input files, table reads."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from icesql.plan import (
    AwsConnectionPlan,
    CatalogConnectionPlan,
    CatalogType,
    SourcePlan,
    ViewPlan,
)

SPARK_TEST_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.pyspark.python": sys.executable,
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.minBatchesToRetain": "10",
}


def spark_for_tests() -> Any:
    from icesql.engine.backends.spark.session import get_spark

    return get_spark("local[2]", SPARK_TEST_CONF)


class Objects:
    """An ``ObjectResolver`` over dicts."""

    def __init__(
        self,
        connections: dict[str, AwsConnectionPlan | CatalogConnectionPlan] | None = None,
        relations: dict[str, SourcePlan | ViewPlan] | None = None,
    ) -> None:
        self.connections = dict(connections or {})
        self.relations = dict(relations or {})

    def connection(self, name: str) -> AwsConnectionPlan | CatalogConnectionPlan:
        return self.connections[name]

    def relation(self, name: str) -> SourcePlan | ViewPlan | None:
        return self.relations.get(name)


class State:
    """A ``StateCallback``; persisted to ``path`` (JSON) when given, so restarts see it."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.data: dict[str, dict[str, Any]] = {}
        if path is not None and path.exists():
            self.data = json.loads(path.read_text())
        self.history: list[tuple[str, dict[str, Any]]] = []

    def _save(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, default=str))
            os.replace(tmp, self.path)

    def _entry(self, name: str) -> dict[str, Any]:
        return self.data.setdefault(name, {"sink_id": uuid.uuid4().hex, "version": 0})

    def sink_id(self, name: str) -> str:
        with self._lock:
            sid = self._entry(name)["sink_id"]
            self._save()
            return str(sid)

    def bump_version(self, name: str) -> int:
        with self._lock:
            e = self._entry(name)
            e["version"] += 1
            self._save()
            return int(e["version"])

    def update(self, name: str, **fields: Any) -> None:
        with self._lock:
            self._entry(name).update(fields)
            self.history.append((name, dict(fields)))
            self._save()

    def get(self, name: str) -> dict[str, Any]:
        with self._lock:
            return dict(self.data.get(name, {}))


def local_catalog(name: str = "cat", warehouse: Path | str = "warehouse") -> CatalogConnectionPlan:
    return CatalogConnectionPlan(name=name, catalog_type=CatalogType.LOCAL, warehouse=str(warehouse))


def write_json_lines(directory: Path, name: str, rows: list[dict[str, Any]] | list[str]) -> Path:
    """Write a JSON-lines file atomically (temp file outside the watched name, then rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / name
    tmp = directory / f".{name}.tmp"
    with open(tmp, "w") as fh:
        for r in rows:
            fh.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    os.replace(tmp, final)
    return final


def dbz(
    op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int, wrap: bool = False
) -> dict[str, Any]:
    """A Debezium change event (schemas disabled; ``wrap``: inside ``{"payload": ...}``)."""
    e = {"before": before, "after": after, "op": op, "ts_ms": 1_700_000_000_000 + lsn, "source": {"lsn": lsn}}
    return {"payload": e} if wrap else e


def changelog_file(directory: Path, k: int, changes: list[dict[str, Any]]) -> Path:
    """Changelog file ``k`` with its mtime in ``k`` order: Spark takes a directory's files by mtime."""
    path = write_json_lines(directory, f"{k:03d}.json", changes)
    os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))
    return path


def load_table(home: Path, identifier: str, warehouse: Path | None = None, catalog_name: str = "cat") -> Any:
    """The table a ``local_catalog()`` of ``home`` holds."""
    wh = warehouse if warehouse is not None else home / "warehouse"
    if not wh.is_absolute():
        wh = home / wh
    return sql_catalog(wh, catalog_name).load_table(identifier)


def sql_catalog(warehouse: Path | str, name: str = "cat") -> Any:
    """pyiceberg's view of the SQLite catalog a ``local_catalog`` on ``warehouse`` keeps."""
    from pyiceberg.catalog.sql import SqlCatalog

    wh = Path(warehouse)
    return SqlCatalog(name, uri=f"sqlite:///{wh / 'catalog.db'}", warehouse=wh.as_uri())


def summaries(table: Any) -> list[dict[str, str]]:
    """Snapshot summaries of the table's main branch, oldest first."""
    out = []
    for snap in table.snapshots():
        s = snap.summary
        out.append(
            {"operation": s.operation.value, **s.additional_properties, "snapshot_id": str(snap.snapshot_id)}
        )
    return out


def icesql_summaries(table: Any) -> list[dict[str, str]]:
    return [s for s in summaries(table) if "icesql.sink-id" in s]


def wait_for(cond: Any, timeout: float = 90.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
