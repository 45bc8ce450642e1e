"""One scenario, both executors (issue 50 item 3): run a sink's scenario on Spark and in this
process (``engine.local_query``) from the same code, and compare what each leaves behind.

``Twins`` keeps one ``Pipeline`` per executor, each with a home (catalog store, checkpoint) and
a warehouse of its own; the input (a directory of files, a Kafka topic) is shared and only read,
so file names, sizes and mtimes - which reach the checkpoint and the snapshot summaries - are the
same for both. ``Pipeline.run`` asserts the executor it ran on: in this process the engine never
started Spark, logged "runs in this process" and the sink's query is a ``LocalQuery``; on Spark the
batches ran on Spark (planned in this process, ``backends.spark.planned``, or Spark's own
``StreamingQuery`` with ``ICESQL_PLANNED_BATCHES=0``) and no task ran in this process.

``TableState`` is what is compared of a table: rows read by DuckDB (checked equal to
DataFusion's), the schema with field ids, the partition spec, the live data and delete files
(counts and formats) and the ``icesql.*`` entries of the snapshot summaries, less ``VARIES``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import icesql
from tests.support.pipeline_helpers import load_table
from tests.support.readers import read_datafusion, read_duckdb

EXECUTORS = ("in_process", "spark")

# icesql.* summary keys that differ between two homes by construction: the sink id is a UUID
# each home's catalog store gives its sink, and a maintenance snapshot names it in the key that
# carries the sink's progress (``icesql.carried-progress.<sink id>``: kept, the id replaced by
# ``<sink>``). Progress, sink version, commit reason and the source's position are compared.
VARIES = frozenset({"icesql.sink-id"})
CARRIED = "icesql.carried-progress."
# the per-snapshot file counts of Iceberg's own summary
ADDED = ("added-data-files", "added-position-delete-files", "added-equality-delete-files")

LOCAL_LINE = "runs in this process, without starting Spark"
MOVED_LINE = "the sink restarts on Spark"


def on_spark(query: Any) -> bool:
    """Whether a sink's query ran its batches on Spark: Spark's streaming query, or the batches
    planned in icesql's process and run on Spark (``backends.spark.planned``)."""
    from icesql.engine.backends.local.query import LocalQuery

    return not isinstance(query, LocalQuery) or query.executor == "spark"


class ExecutorDifference(AssertionError):
    """A difference between the executors' results the suite knows of: tests that show one are
    ``xfail(strict=True, raises=ExecutorDifference)``, so any other failure still fails them."""


@dataclass
class Pipeline:
    executor: str
    home: Path
    warehouse: Path
    spark: Any  # the tests' session for the Spark executor, None in process
    caplog: Any
    log: list[str] = field(default_factory=list)  # each run's icesql log text, in order
    spark_conf: dict[str, str] | None = None  # in process: the settings of the session it stands for
    last_query: Any = None  # the query of the last sink of the last run

    def execute(self, sql: str) -> None:
        with icesql.Session(home=self.home) as s:
            s.execute(sql)

    def run(self, sinks: Sequence[str], *, moves_to_spark: bool = False) -> None:
        """A bounded run (``run --once``) of ``sinks`` on this pipeline's executor. In process,
        ``moves_to_spark``: a batch needs Spark's reader, so the sink starts here and restarts on
        Spark (the documented hand-over, ``local_query.SparkNeeded``)."""
        from icesql.engine.backends.local.query import LocalQuery

        self.caplog.clear()
        with self.caplog.at_level(logging.INFO, logger="icesql"):
            with icesql.Session(home=self.home, spark=self.spark, spark_conf=self.spark_conf) as s:
                s.run(once=True, sinks=list(sinks))
                engine = s.engine
                queries = {name: engine.runner(name).query for name in sinks}
                self.last_query = queries[sinks[-1]]
                states = {name: s.store.get_sink_state(name) for name in sinks}
            text = self.caplog.text
        self.log.append(text)
        for name in sinks:
            assert states[name].status == "stopped", f"{self.executor}: sink {name} is {states[name].status}"
            started_here = f"sink {name}: {LOCAL_LINE}" in text
            if self.executor == "spark":
                assert engine._spark is self.spark, "the Spark run started a session of its own"
                assert not started_here, f"sink {name} ran in process on the Spark executor"
                assert on_spark(queries[name]), f"sink {name}: {queries[name]!r}"
            elif moves_to_spark:
                assert started_here, f"sink {name} did not start in process"
                assert MOVED_LINE in text, f"sink {name} did not move to Spark"
                assert on_spark(queries[name]), "the restarted sink is still in process"
            else:
                assert started_here, f"sink {name} did not run in process"
                assert MOVED_LINE not in text, f"sink {name} moved to Spark"
                assert isinstance(queries[name], LocalQuery) and queries[name].executor == "local", f"sink {name}: {queries[name]!r}"
                assert engine._spark is None, "Spark was started by the in-process run"

    def table(self, identifier: str) -> Any:
        return load_table(self.home, identifier, warehouse=self.warehouse, catalog_name="lake")

    def state(self, identifier: str, columns: str = "*") -> TableState:
        return TableState.of(self.table(identifier), columns)

    def checkpoint(self) -> Path:
        (found,) = [p for p in (self.home / "sinks").glob("*/checkpoint*") if p.is_dir()]
        return found


class Twins(dict[str, Pipeline]):
    """The two executors' pipelines of one scenario."""

    @classmethod
    def make(cls, tmp_path: Path, spark: Any, caplog: Any, connection: str = "") -> Twins:
        """Pipelines under ``tmp_path/<executor>``, each with the connection ``lake`` to a local
        catalog of its own (and ``connection``, more SQL run first)."""
        twins = cls()
        for executor in EXECUTORS:
            root = tmp_path / executor
            p = Pipeline(executor, root / "home", root / "wh", spark if executor == "spark" else None, caplog)
            p.execute(
                connection
                + f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{p.warehouse}');"
            )
            twins[executor] = p
        return twins

    @classmethod
    def with_kafka(cls, tmp_path: Path, spark: Any, caplog: Any, bootstrap: str) -> Twins:
        """``make`` with the connection ``kb`` to the Kafka broker at ``bootstrap``."""
        return cls.make(
            tmp_path, spark, caplog, connection=f"CREATE CONNECTION kb TO KAFKA (BROKER = '{bootstrap}');"
        )

    def execute(self, sql: str | Callable[[Pipeline], str]) -> None:
        for p in self.values():
            p.execute(sql(p) if callable(sql) else sql)

    def run(self, sinks: Sequence[str], *, moves_to_spark: bool = False) -> None:
        for p in self.values():
            p.run(sinks, moves_to_spark=moves_to_spark)

    def states(self, identifier: str, columns: str = "*") -> tuple[TableState, TableState]:
        return self["in_process"].state(identifier, columns), self["spark"].state(identifier, columns)


@dataclass(frozen=True)
class TableState:
    rows: list[tuple[Any, ...]]
    schema: list[tuple[int, str, str, bool]]  # every field, nested ones too: (id, path, type, required)
    spec: list[tuple[int, int, str, str]]  # (source id, field id, transform, name)
    files: dict[str, int]  # live files of the current snapshot by content and format
    added: list[dict[str, int]]  # files each snapshot added (Iceberg's summary), oldest first
    summaries: list[dict[str, str]]  # icesql.* of each snapshot, oldest first, less VARIES
    operations: list[str]

    @staticmethod
    def of(table: Any, columns: str = "*") -> TableState:
        """``columns``: what is read of the rows (a SQL select list)."""
        files: Counter[str] = Counter()
        snap = table.current_snapshot()
        if snap is not None:
            for manifest in snap.manifests(table.io):
                for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                    kind = ("data", "position-deletes", "equality-deletes")[int(e.data_file.content)]
                    files[f"{kind}:{e.data_file.file_format.name.lower()}"] += 1
        if all(k.endswith(":parquet") for k in files):
            meta = table.metadata_location
            rows = read_duckdb(meta, columns)
            assert read_datafusion(meta, columns) == rows, "DuckDB and DataFusion read different rows"
        else:
            rows = _icesql_rows(table, columns)
        summaries, operations, added = [], [], []
        for s in table.snapshots():
            props = s.summary.additional_properties
            mine = {k: v for k, v in props.items() if k.startswith("icesql.") and k not in VARIES}
            summaries.append(
                dict(sorted((CARRIED + "<sink>" if k.startswith(CARRIED) else k, v) for k, v in mine.items()))
            )
            operations.append(s.summary.operation.value)
            added.append({k: int(props[k]) for k in ADDED if k in props})
        return TableState(
            rows=rows,
            schema=list(_fields(table.schema().fields, "")),
            spec=[(f.source_id, f.field_id, str(f.transform), f.name) for f in table.spec().fields],
            files=dict(sorted(files.items())),
            added=added,
            summaries=summaries,
            operations=operations,
        )


def _icesql_rows(table: Any, columns: str) -> list[tuple[Any, ...]]:
    """Rows of a table with ORC or Avro files, which DuckDB and DataFusion do not read: icesql's
    own reader (what SELECT uses), normalised as ``readers`` normalises the others' rows (the
    test compares them with a Parquet twin read by DuckDB)."""
    from icesql.engine.select.tables import read_rows
    from tests.support.readers import _rows_from_arrow

    got = read_rows(table, table.current_snapshot())
    if columns != "*":
        got = got.select([c.strip() for c in columns.split(",")])
    return _rows_from_arrow(got)


def _fields(fields: Iterable[Any], prefix: str) -> Iterable[tuple[int, str, str, bool]]:
    for f in fields:
        path = f"{prefix}{f.name}"
        yield (f.field_id, path, str(f.field_type), f.required)
        nested = getattr(f.field_type, "fields", None)
        if nested:
            yield from _fields(nested, path + ".")
        for child in ("element_field", "key_field", "value_field"):
            sub = getattr(f.field_type, child, None)
            if sub is not None:
                yield from _fields([sub], path + ".")


def assert_same_tables(here: TableState, there: TableState, *, files: bool = True) -> None:
    """Every aspect of ``TableState`` equal (``here`` in process, ``there`` on Spark).
    ``files=False``: the files are checked apart (``assert_same_files``), as a known difference."""
    for aspect in (
        "schema",
        "spec",
        "rows",
        "operations",
        "summaries",
        *(("files", "added") if files else ()),
    ):
        a, b = getattr(here, aspect), getattr(there, aspect)
        assert a == b, f"{aspect} differ:\n in process: {a}\n on Spark:   {b}"


def assert_same_files(here: TableState, there: TableState, why: str) -> None:
    """The live files and the files each snapshot added equal; else ``ExecutorDifference``."""
    if (here.files, here.added) != (there.files, there.added):
        raise ExecutorDifference(
            f"{why}: in process {here.files}, added {here.added}; on Spark {there.files}, added {there.added}"
        )


def without(state: TableState, key: str) -> TableState:
    """``state`` without the summary entry ``key`` (checked apart by the caller)."""
    from dataclasses import replace

    return replace(state, summaries=[{k: v for k, v in s.items() if k != key} for s in state.summaries])


__all__ = [
    "EXECUTORS",
    "VARIES",
    "ExecutorDifference",
    "Pipeline",
    "TableState",
    "Twins",
    "assert_same_files",
    "assert_same_tables",
    "without",
]
