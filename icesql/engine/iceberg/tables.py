"""Target tables: create the namespace and the table when missing, refuse incompatible ones.

A new table gets the schema derived from the source (``schema.spark_to_iceberg_schema``), the
partition spec of ``PARTITION BY``, the KEY as identifier fields, ``FORMAT VERSION`` (2 by
default), ``write.format.default`` when the sink says FORMAT, and the sink's ``PROPERTIES``, on
top of ``CREATED_TABLE_PROPERTIES``. An existing table is checked with
``schema.compatibility_problems`` and refused with an ``ExecutionError`` naming the columns; its
properties are left as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from icesql.engine.iceberg.schema import (
    SparkSchemaJson,
    compatibility_problems,
    spark_to_iceberg_schema,
    unwritable_columns,
)
from icesql.errors import ExecutionError
from icesql.plan import WRITE_FORMAT_DEFAULT, PartitionFieldPlan, SinkMode, SinkPlan, Transform

log = logging.getLogger("icesql.sink")

PARTITION_FIELD_ID_START = 1000

# What a table icesql creates gets unless the sink's PROPERTIES name them. Iceberg's defaults keep
# 100 previous metadata files in the log and delete none, so a sink committing every second would
# leave 86,400 metadata files a day: a log of 50, and every commit (the sink's, its maintenance's,
# any other writer's that honours the property) deletes the files that drop out of it. The
# maintenance's metadata cleanup (``maintenance.metadata``) removes the ones a commit left behind.
METADATA_LOG_LENGTH = 50
CREATED_TABLE_PROPERTIES = {
    "write.metadata.previous-versions-max": str(METADATA_LOG_LENGTH),
    "write.metadata.delete-after-commit.enabled": "true",
}


def _identifier(identifier: str | Sequence[str] | None, plan: SinkPlan) -> tuple[str, ...]:
    if identifier is None:
        return (*plan.namespace, plan.table)
    if isinstance(identifier, str):
        return tuple(identifier.split("."))
    return tuple(identifier)


def _transform(p: PartitionFieldPlan) -> Any:
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        HourTransform,
        IdentityTransform,
        MonthTransform,
        TruncateTransform,
        VoidTransform,
        YearTransform,
    )

    t = p.transform
    if t is Transform.BUCKET:
        if not p.param or p.param <= 0:
            raise ExecutionError(f"{p.describe()}: bucket needs a positive number of buckets")
        return BucketTransform(p.param)
    if t is Transform.TRUNCATE:
        if not p.param or p.param <= 0:
            raise ExecutionError(f"{p.describe()}: truncate needs a positive width")
        return TruncateTransform(p.param)
    return {
        Transform.IDENTITY: IdentityTransform,
        Transform.YEAR: YearTransform,
        Transform.MONTH: MonthTransform,
        Transform.DAY: DayTransform,
        Transform.HOUR: HourTransform,
        Transform.VOID: VoidTransform,
    }[t]()


def _default_name(p: PartitionFieldPlan) -> str:
    if p.name:
        return p.name
    if p.transform is Transform.IDENTITY:
        return p.source_column
    if p.param is not None:
        return f"{p.source_column}_{p.transform.value}_{p.param}"
    return f"{p.source_column}_{p.transform.value}"


def column_of(schema: Any, column: str) -> Any:
    """The field of ``column`` in an Iceberg schema (exact name first, then case-insensitively)."""
    return _find(schema, column)


def _find(schema: Any, column: str) -> Any:
    for f in schema.fields:
        if f.name == column:
            return f
    for f in schema.fields:
        if f.name.lower() == column.lower():
            return f
    raise ExecutionError(f"partition column '{column}' is not a column of the source")


def partition_spec_for(schema: Any, partition_by: Sequence[PartitionFieldPlan]) -> Any:
    """The Iceberg partition spec of ``PARTITION BY`` over ``schema``."""
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec

    if not partition_by:
        return UNPARTITIONED_PARTITION_SPEC
    fields = []
    for i, p in enumerate(partition_by):
        source = _find(schema, p.source_column)
        transform = _transform(p)
        if not transform.can_transform(source.field_type):
            raise ExecutionError(
                f"{p.describe()}: cannot apply {transform} to column '{source.name}' of type {source.field_type}"
            )
        fields.append(
            PartitionField(
                source_id=source.field_id,
                field_id=PARTITION_FIELD_ID_START + i,
                transform=transform,
                name=_default_name(p),
            )
        )
    return PartitionSpec(*fields, spec_id=0)


def table_properties_for(plan: SinkPlan) -> dict[str, str]:
    """The properties of the table a sink creates: ``CREATED_TABLE_PROPERTIES``, the sink's
    ``PROPERTIES`` over them, ``FORMAT VERSION``, and ``write.format.default`` when the sink
    says FORMAT (nothing when it does not: Parquet is the default)."""
    props = {**CREATED_TABLE_PROPERTIES, **{k: str(v) for k, v in plan.properties}}
    props["format-version"] = str(plan.format_version)
    if plan.format is not None:
        props[WRITE_FORMAT_DEFAULT] = plan.format
    return props


def target_schema(spark_schema_json: SparkSchemaJson, plan: SinkPlan) -> Any:
    return spark_to_iceberg_schema(spark_schema_json, key=plan.key)


def key_field_ids(schema: Any, key: Sequence[str]) -> list[int]:
    """Field ids of the KEY columns in ``schema`` (the equality ids of delete files)."""
    return [_find(schema, k).field_id for k in key]


def table_problems(table: Any, spark_schema_json: SparkSchemaJson, plan: SinkPlan) -> list[str]:
    """Why an existing table cannot take this sink's rows (empty: it can)."""
    schema = table.schema()
    problems = compatibility_problems(schema, spark_schema_json)
    if plan.mode is SinkMode.UPSERT:
        meta = table.metadata
        if int(meta.format_version) < 2:
            problems.append(f"MODE UPSERT needs format version 2, the table is version {meta.format_version}")
        names = {f.name.lower(): f for f in schema.fields}
        key_ids = set()
        for k in plan.key:
            f = names.get(k.lower())
            if f is None:
                problems.append(f"KEY column '{k}' is not in the table")
            else:
                key_ids.add(f.field_id)
        for pf in table.spec().fields:
            if pf.source_id not in key_ids:
                col = schema.find_column_name(pf.source_id)
                problems.append(
                    f"partition column '{col}' of the table is not part of the KEY (needed by MODE UPSERT)"
                )
    return problems


def _ensure_namespace(catalog: Any, namespace: tuple[str, ...]) -> None:
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    for i in range(1, len(namespace) + 1):
        ns = namespace[:i]
        try:
            if catalog.namespace_exists(ns):
                continue
        except Exception:
            pass
        try:
            catalog.create_namespace(ns)
        except NamespaceAlreadyExistsError:
            pass
        except Exception:
            if i == len(namespace):
                raise


def ensure_table(
    catalog: Any, identifier: str | Sequence[str] | None, spark_schema_json: SparkSchemaJson, plan: SinkPlan
) -> Any:
    """Load the sink's table, creating its namespace (nested ones too) and itself when missing.

    Raises ``ExecutionError`` naming the columns when an existing table cannot take the rows.
    """
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

    ident = _identifier(identifier, plan)
    namespace = ident[:-1]
    shown = ".".join(ident)
    try:
        table = catalog.load_table(ident)
    except NoSuchTableError:
        table = None
    except Exception as e:
        unreadable = _unreadable_type(e)
        if unreadable is None:
            raise
        raise ExecutionError(
            f"table {shown} has a column of type {unreadable}, which icesql cannot read or write "
            f"(its Iceberg library, pyiceberg, does not know the type)",
            hint="write to a table without such a column, or drop the column with the tool that "
            "made it (Iceberg Java: table.updateSchema().deleteColumn(...))",
        ) from None
    if table is None:
        schema = target_schema(spark_schema_json, plan)
        spec = partition_spec_for(schema, plan.partition_by)
        if namespace:
            _ensure_namespace(catalog, namespace)
        try:
            return catalog.create_table(
                ident, schema=schema, partition_spec=spec, properties=table_properties_for(plan)
            )
        except TableAlreadyExistsError:
            table = catalog.load_table(ident)  # created concurrently: check it like any existing table
    unwritable = unwritable_columns(table.schema())
    if unwritable:
        raise ExecutionError(
            f"table {shown} cannot take the rows of sink {plan.name}: icesql cannot write "
            + ", ".join(unwritable),
            hint="write to a table without such columns, or drop them with the tool that made them "
            "(Iceberg Java: table.updateSchema().deleteColumn(...)); icesql writes no nanosecond "
            "timestamp, variant, geometry, geography or unknown column, not even as nulls",
        )
    if plan.format_version > int(table.metadata.format_version):
        table = upgrade_table(table, plan.format_version, plan.name)
    problems = table_problems(table, spark_schema_json, plan)
    if problems and plan.schema_evolution:
        table = evolve_table(table, spark_schema_json, plan)
        problems = table_problems(table, spark_schema_json, plan)
    if problems:
        raise ExecutionError(
            f"table {shown} cannot take the rows of sink {plan.name}: " + "; ".join(problems),
            hint="only new columns and widenings evolve by themselves: change the source or view "
            "back (ALTER SOURCE ... SET (SCHEMA = ...), CREATE OR REPLACE VIEW), write to a new "
            "table, or change the table by hand (Spark's ALTER TABLE, pyiceberg's update_schema) "
            "and start the sink again",
        )
    return table


def _unreadable_type(error: BaseException) -> str | None:
    """The type named by pyiceberg's refusal of table metadata holding a type it does not know
    (pydantic's ``Unsupported field type: 'variant'``), quoted; None for any other error."""
    import re

    m = re.search(r"Unsupported field type: ('[^']+')", str(error))
    return m.group(1) if m else None


def upgrade_table(table: Any, version: int, sink: str) -> Any:
    """``table`` upgraded in place to format ``version`` (the spec's rules: the metadata says the
    new version and, for v3, row ids start at 0 with the next snapshot; data and delete files
    stay as they are, position delete files valid until compaction rewrites them). Returns it."""
    from icesql.engine.base.pyiceberg_v3 import upgrade_format_version

    old = int(table.metadata.format_version)
    upgrade_format_version(table, version)
    log.info("sink %s: table %s upgraded from format version %s to %s", sink, ".".join(table.name()), old, version)
    return table


def evolve_table(table: Any, spark_schema_json: SparkSchemaJson, plan: SinkPlan) -> Any:
    """Additive schema evolution: the columns the rows have and the table lacks are added
    (optional, new field ids; nested fields too), and allowed widenings applied, in one schema
    change committed before any row that needs it. Returns the table as it is afterwards."""
    from icesql.engine.base.pyiceberg_internals import schema_after
    from icesql.engine.iceberg.schema import schema_additions

    adds, widen = schema_additions(table.schema(), target_schema(spark_schema_json, plan))
    if not adds and not widen:
        return table
    update = table.update_schema()
    for path, field_type in adds:
        update.add_column(path if len(path) > 1 else path[0], field_type, required=False)
    for path, field_type in widen:
        update.update_column(path if len(path) > 1 else path[0], field_type=field_type)
    if compatibility_problems(schema_after(update), spark_schema_json):
        return table  # something evolution cannot fix: the table is left as it is, and refused
    update.commit()
    changes = [f"added {'.'.join(p)} {t}" for p, t in adds] + [f"widened {'.'.join(p)} to {t}" for p, t in widen]
    log.info("sink %s: table %s schema evolved: %s", plan.name, plan.table_identifier, ", ".join(changes))
    return table.refresh()


def explain_table(
    spark_schema_json: SparkSchemaJson, plan: SinkPlan, table: Any | None = None
) -> dict[str, Any]:
    """The target table of a sink as plain data (for EXPLAIN): touches no catalog or storage.

    Pass ``table`` (an already loaded pyiceberg table) to describe an existing table instead and
    list why it could not take the rows.
    """
    if table is not None:
        schema, spec = table.schema(), table.spec()
        properties = dict(table.properties)
        fv = int(table.metadata.format_version)
        problems = [f"icesql cannot write {c}" for c in unwritable_columns(schema)]
        problems += table_problems(table, spark_schema_json, plan)
        exists = True
    else:
        schema = target_schema(spark_schema_json, plan)
        spec = partition_spec_for(schema, plan.partition_by)
        properties = table_properties_for(plan)
        fv = plan.format_version
        problems = []
        exists = False
    return {
        "table": ".".join((*plan.namespace, plan.table)),
        "exists": exists,
        "format_version": fv,
        "columns": [
            {"id": f.field_id, "name": f.name, "type": str(f.field_type), "required": f.required}
            for f in schema.fields
        ],
        "identifier_fields": [schema.find_column_name(i) for i in schema.identifier_field_ids],
        "partition_spec": [
            {
                "name": pf.name,
                "transform": str(pf.transform),
                "source": schema.find_column_name(pf.source_id),
            }
            for pf in spec.fields
        ],
        "properties": properties,
        "mode": plan.mode.value,
        "maximum_file_size": plan.maximum_file_size,
        "problems": problems,
    }


__all__ = [
    "CREATED_TABLE_PROPERTIES",
    "METADATA_LOG_LENGTH",
    "ensure_table",
    "explain_table",
    "key_field_ids",
    "partition_spec_for",
    "table_problems",
    "target_schema",
]
