"""What statements return: ``Result`` and ``SinkStatus``, and the rows of SHOW, SHOW CREATE,
SHOW SINK STATUS, DESCRIBE and EXPLAIN built from stored objects and plans.

The session fetches what a statement needs from the catalog store and hands it here; turning
it into columns and rows (and never a secret's value: secret references by name, inline
secrets as ``********``) happens in this module only. Text formatting (aligned tables) is the
shell's and the CLI's, in ``icesql.repl.format``.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from icesql import plan as P

INLINE_SECRET_PREFIX = "__inline__."
MASK = "********"


@dataclass(frozen=True)
class Result:
    """What one statement produced: a status message, and rows for SHOW/DESCRIBE/EXPLAIN."""

    statement: str
    message: str
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[object, ...], ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SinkStatus:
    name: str
    state: str
    rows_committed: int = 0
    bytes_committed: int = 0
    files_committed: int = 0
    commits: int = 0
    last_commit_at: float | None = None
    last_snapshot_id: int | None = None
    last_error: str | None = None
    lag: float | None = None
    skipped_records: int = 0  # bad records (ON ERROR = 'skip') and null-key changes (KEY NOT ENFORCED)
    dead_letters: int = 0  # bad records committed to the dead-letter table (ON ERROR = 'dead-letter')
    retry_attempt: int = 0  # restarts after transient failures in the current streak
    next_attempt_at: float | None = None  # when a 'retrying' sink is restarted next
    maintenance_runs: int = 0  # maintenance steps the sink made while running here
    last_maintenance: str | None = None  # what the last one did (step, files, bytes, time)
    source_lag: int | None = None  # KAFKA: records between the committed offsets and the log end
    file_format: str | None = None  # the data files' format (the sink's FORMAT, else its table's)
    readers: str | None = None  # which readers read that format (plan.FORMAT_READERS)
    # the sink's table; a routed sink's row names its TABLE template, and a row per table it
    # writes follows (live figures of this session's run: rows, commits, last commit, error)
    table: str | None = None


def show_secrets(objects: Iterable[Any]) -> Result:
    rows = tuple((o.name, format_time(o.created_at)) for o in objects)
    return Result("SHOW SECRETS", "SHOW SECRETS", ("name", "created_at"), rows)


def show_objects(plural: str, objects: Iterable[Any]) -> Result:
    """SHOW CONNECTIONS | SOURCES | VIEWS | SINKS over stored objects."""
    rows = []
    for o in objects:
        definition = P.plan_from_dict(o.definition)
        rows.append((o.name, object_type(definition), object_summary(definition)))
    label = f"SHOW {plural.upper()}"
    return Result(label, label, ("name", "type", "details"), tuple(rows))


def show_create(kind: str, name: str, sql: str) -> Result:
    label = f"SHOW CREATE {kind.upper()}"
    return Result(label, label, ("name", "create_sql"), ((name, sql),))


def sink_status(statuses: Sequence[SinkStatus]) -> Result:
    cols = tuple(f.name for f in dataclasses.fields(SinkStatus))
    rows = tuple(tuple(_status_value(f, getattr(s, f)) for f in cols) for s in statuses)
    return Result("SHOW SINK STATUS", "SHOW SINK STATUS", cols, rows)


def describe(obj: Any, sink_state: Any | None = None) -> Result:
    """DESCRIBE of a stored object (its sink state, when it is a sink that has one)."""
    if obj.kind == "secret":
        rows: list[tuple[object, ...]] = [("kind", "secret"), ("name", obj.name), ("value", MASK)]
    else:
        definition = P.plan_from_dict(obj.definition)
        rows = [("kind", obj.kind), *_flatten(definition)]
        if isinstance(definition, P.SinkPlan) and sink_state is not None:
            rows.append(("status", sink_state.status))
    rows.append(("depends_on", ", ".join(f"{k} {n}" for k, n in obj.dependencies) or "-"))
    return Result("DESCRIBE", "DESCRIBE", ("property", "value"), tuple(rows))


def explain(sink: P.SinkPlan) -> Result:
    rows: list[tuple[object, ...]] = [
        ("sink", sink.name),
        ("reads", sink.relation),
        ("catalog", sink.catalog_connection),
        ("table", sink.table_identifier),
        ("mode", sink.mode.value + (f" KEY ({', '.join(sink.key)})" if sink.key else "")),
    ]
    if sink.columns:
        for c in sink.columns:
            key = " (identifier field, required)" if c.name in sink.key else ""
            rows.append(("column", f"{c.name} {c.type}{key}"))
    else:
        rows.append(("schema", "derived from the relation when the sink starts"))
    rows.append(("partition spec", ", ".join(p.describe() for p in sink.partition_by) or "unpartitioned"))
    # no FORMAT: the engine writes the table's write.format.default (unset on a table icesql creates)
    data_format = sink.format or f"the table's {P.WRITE_FORMAT_DEFAULT} (parquet when unset)"
    rows.append(("format", f"{data_format}, format version {sink.format_version}"))
    rows.append(("maximum file size", f"{sink.maximum_file_size} bytes"))
    rows.append(("commit", sink.commit.describe()))
    if sink.mode is P.SinkMode.UPSERT:
        rows.append(
            (
                "deletes",
                "by position, through the key index"
                if sink.delete_mode is P.DeleteMode.POSITION
                else "by equality on the KEY",
            )
        )
    rows.append(("maintenance", sink.maintenance.describe()))
    for k, v in sink.properties:
        rows.append(("property", f"{k} = {v}"))
    return Result("EXPLAIN", "EXPLAIN", ("item", "value"), tuple(rows))


def query_rows(columns: Sequence[str], rows: Iterable[Sequence[object]], limit: int | None) -> Result:
    """A SELECT's rows; a warning says when the default LIMIT may have cut them."""
    body = tuple(tuple(r) for r in rows)
    cut = limit is not None and len(body) >= limit
    warnings = (f"the first {limit} rows are shown (the query has no LIMIT); add one to see more",) if cut else ()
    return Result("SELECT", f"SELECT {len(body)}", tuple(columns), body, warnings)


def explain_select(plan: P.SelectPlan, route: Any) -> Result:
    """EXPLAIN SELECT: which engine answers the query and why (an ``engine.fastpath.Route``),
    the tables it reads and the SQL each engine runs."""
    rows: list[tuple[object, ...]] = [("path", route.path), ("reason", route.reason)]
    for ref in plan.tables:
        travel = f" at snapshot {ref.snapshot_id}" if ref.snapshot_id is not None else ""
        travel += f" as of {ref.as_of}" if ref.as_of is not None else ""
        rows.append(("reads table", f"{ref.identifier}{travel} (as {ref.alias})"))
    for name in plan.relations:
        rows.append(("reads relation", name))
    if plan.limit is not None:
        rows.append(("limit", f"{plan.limit} (the default: the query has no LIMIT)"))
    rows.append(("spark sql", plan.sql))
    if route.sql is not None:
        rows.append(("duckdb sql", route.sql))
    return Result("EXPLAIN", "EXPLAIN", ("item", "value"), tuple(rows))


def show_tables(connection: str, tables: Iterable[tuple[str, ...]]) -> Result:
    rows = tuple((".".join(t[:-1]), t[-1]) for t in sorted(tables))
    return Result("SHOW TABLES", f"SHOW TABLES IN {connection}", ("namespace", "table"), rows)


def describe_table(name: str, table: Any) -> Result:
    """DESCRIBE of an Iceberg table (a pyiceberg ``Table``): schema with field ids, partition
    spec, identifier fields, current snapshot, location and properties."""
    schema = table.schema()
    rows: list[tuple[object, ...]] = [("table", name), ("location", table.location())]
    ids = set(schema.identifier_field_ids)
    for f in schema.fields:
        flags = " (identifier field)" if f.field_id in ids else ""
        flags += "" if f.optional else " not null"
        rows.append(("column", f"{f.field_id}: {f.name} {f.field_type}{flags}"))
    spec = table.spec()
    parts = [f"{pf.transform}({schema.find_column_name(pf.source_id)})" for pf in spec.fields]
    rows.append(("partition spec", ", ".join(parts) or "unpartitioned"))
    idents = [schema.find_column_name(i) for i in schema.identifier_field_ids]
    rows.append(("identifier fields", ", ".join(str(n) for n in idents) or "-"))
    rows.append(("format version", table.format_version))
    snap = table.current_snapshot()
    rows.append(("current snapshot", snap.snapshot_id if snap is not None else "-"))
    for k, v in sorted(table.properties.items()):
        rows.append(("property", f"{k} = {v}"))
    return Result("DESCRIBE", "DESCRIBE", ("property", "value"), tuple(rows))


SNAPSHOT_COLUMNS = (
    "snapshot_id", "committed_at", "operation", "reason", "progress", "rows_added", "rows_deleted",
)


def show_snapshots(sink: str, snapshots: Iterable[Any], sink_id: str | None) -> Result:
    """SHOW SNAPSHOTS OF SINK: each snapshot of the sink's table, newest first, with the commit
    reason and progress icesql writes in the summary (``engine.commit``); another writer's
    snapshots show ``-`` there, a maintenance snapshot its own reason."""
    rows = []
    for snap in sorted(snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number or 0), reverse=True):
        summary = dict(snap.summary.additional_properties) if snap.summary is not None else {}
        mine = summary.get("icesql.sink-id") == sink_id
        reason = summary.get("icesql.commit-reason", "-")
        progress = summary.get("icesql.progress", "-") if mine else "-"
        operation = getattr(getattr(snap.summary, "operation", None), "value", "-")
        deleted = sum(int(summary.get(k, 0)) for k in ("deleted-records", "added-position-deletes", "added-equality-deletes"))
        rows.append(
            (
                snap.snapshot_id,
                format_time(snap.timestamp_ms / 1000),
                operation,
                reason,
                progress,
                int(summary.get("added-records", 0)),
                deleted,
            )
        )
    return Result("SHOW SNAPSHOTS", f"SHOW SNAPSHOTS OF SINK {sink}", SNAPSHOT_COLUMNS, tuple(rows))


def format_time(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _status_value(field: str, value: Any) -> Any:
    if field in ("last_commit_at", "next_attempt_at"):
        return format_time(value)
    if value is None:
        return "-"
    return value


def object_type(d: P.ObjectPlan) -> str:
    if isinstance(d, P.AwsConnectionPlan | P.GcsConnectionPlan | P.AzureConnectionPlan):
        return d.kind  # aws, gcs, azure
    if isinstance(d, P.KafkaConnectionPlan):
        return f"kafka ({d.security_protocol.lower()})"
    if isinstance(d, P.SchemaRegistryConnectionPlan):
        return "confluent schema registry"
    if isinstance(d, P.CatalogConnectionPlan):
        return f"iceberg catalog ({d.catalog_type.value})"
    if isinstance(d, P.SourcePlan):
        return d.source_kind.value + (f" ({d.format.value})" if d.format else "")
    if isinstance(d, P.ViewPlan):
        return "view"
    return f"iceberg sink ({d.mode.value})"


def _details(*items: str | None) -> str:
    return ", ".join(x for x in items if x) or "-"


def object_summary(d: P.ObjectPlan) -> str:
    if isinstance(d, P.AwsConnectionPlan):
        return _details(d.region and f"region {d.region}", d.endpoint)
    if isinstance(d, P.GcsConnectionPlan):
        return _details(d.project and f"project {d.project}", d.endpoint)
    if isinstance(d, P.AzureConnectionPlan):
        return _details(d.account_name and f"account {d.account_name}", d.endpoint)
    if isinstance(d, P.KafkaConnectionPlan):
        return ", ".join(d.brokers)
    if isinstance(d, P.SchemaRegistryConnectionPlan):
        return d.url
    if isinstance(d, P.CatalogConnectionPlan):
        return d.uri or d.warehouse or "-"
    if isinstance(d, P.SourcePlan):
        if d.kafka is not None:
            registry = f", schemas from {d.kafka.registry}" if d.kafka.registry else ""
            what = d.kafka.describe_topics() if d.kafka.many_topics else f"topic {d.kafka.topic}"
            return f"{what} on {d.kafka.connection}{registry}"
        return d.path or (f"{d.rows_per_second} rows/s" if d.rows_per_second else "-")
    if isinstance(d, P.ViewPlan):
        return ", ".join(d.depends_on) or "-"
    return f"{d.relation} -> {d.catalog_connection}.{d.table_identifier}"


def _flatten(d: Any, prefix: str = "") -> Iterator[tuple[str, object]]:
    """(property, value) rows of a plan for DESCRIBE; secret references shown by name only."""
    for f in dataclasses.fields(d):
        value = getattr(d, f.name)
        key = prefix + f.name
        if value is None or value == () or value == "":
            continue
        if isinstance(value, P.SecretName):
            yield key, f"SECRET {value.name}" if not value.name.startswith(INLINE_SECRET_PREFIX) else MASK
        elif isinstance(value, P.CommitPolicy):
            yield key, value.describe()
        elif isinstance(value, P.KafkaSourceSpec):
            yield from _flatten(value, key + ".")
        elif isinstance(value, tuple) and value and isinstance(value[0], P.KafkaInclude):
            yield key, ", ".join(f"{i.what.value} AS {i.name}" for i in value)
        elif isinstance(value, tuple) and value and isinstance(value[0], P.PartitionFieldPlan):
            yield key, ", ".join(p.describe() for p in value)
        elif isinstance(value, tuple) and value and isinstance(value[0], P.Column):
            yield key, ", ".join(f"{c.name} {c.type}" for c in value)
        elif f.name.endswith("_referenced"):  # the schemas a registry schema imports: their names
            yield key, ", ".join(name for name, _ in value)
        elif isinstance(value, tuple) and value and isinstance(value[0], tuple):
            yield key, ", ".join(f"{k}={v}" for k, v in value)
        elif isinstance(value, tuple):
            yield key, ", ".join(str(v) for v in value)
        elif isinstance(value, enum.Enum):
            yield key, value.value
        else:
            yield key, value


__all__ = [
    "INLINE_SECRET_PREFIX",
    "Result",
    "SinkStatus",
    "describe",
    "describe_table",
    "explain",
    "format_time",
    "object_summary",
    "object_type",
    "query_rows",
    "show_create",
    "show_objects",
    "show_secrets",
    "show_snapshots",
    "show_tables",
    "sink_status",
]
