"""A relation by name, resolved in the order the spec gives: an icesql source (by its kind's relation),
an icesql view (its sources registered as temporary views, then its query), else a table or view of
the Spark session. The registry of relations stands above the kinds it registers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from icesql.engine.base.changelog import OP
from icesql.engine.sources.generator import generator_dataframe
from icesql.engine.sources.guard import SumAccumulator, on_error_policy
from icesql.engine.sources.relation import Binder, Relation, Resolver, first_line, quote_name
from icesql.errors import ExecutionError
from icesql.plan import OnError, SourceKind, SourcePlan, ViewPlan


def build_relation(
    backend: Any,
    name: str,
    resolve: Resolver,
    *,
    on_error: OnError | None = None,
    arrow: Any = None,
    bind: Binder | None = None,
) -> Relation:
    """The DataFrame a sink reading ``name`` consumes; a FILES source read directly by the sink
    takes the Arrow path when ``arrow`` binds it (views and Spark tables keep Spark's).
    ``bind(plan, binding)`` completes the binding of a source that needs its connection's
    credentials (KAFKA), for the source read directly and for those of a view."""
    plan = resolve(name)
    if isinstance(plan, SourcePlan):
        return source_relation(backend, plan, on_error=on_error, arrow=arrow, bind=bind)
    if isinstance(plan, ViewPlan):
        return view_relation(backend, plan, resolve, on_error=on_error, bind=bind)
    return spark_relation(
        backend.spark_for(f"relation '{name}' is a table or view of the Spark session"), name
    )


def spark_relation(spark: Any, name: str) -> Relation:
    """A table or (temporary) view of the Spark session, streaming or batch."""
    try:
        df = spark.table(name)
    except Exception as e:
        raise ExecutionError(
            f"relation '{name}' is neither an icesql source or view nor a table or view of the Spark session",
            hint="CREATE SOURCE or CREATE VIEW it, or register it with DataFrame.createOrReplaceTempView",
        ) from e
    cols = {f.name for f in df.schema.fields}
    return Relation(name=name, df=df, changelog=OP in cols)


def view_relation(
    backend: Any,
    plan: ViewPlan,
    resolve: Resolver,
    *,
    on_error: OnError | None = None,
    bind: Binder | None = None,
    _seen: frozenset[str] = frozenset(),
) -> Relation:
    if plan.name in _seen:
        raise ExecutionError(f"view '{plan.name}' refers to itself")
    spark = backend.spark_for(f"view '{plan.name}' is planned by Spark")
    accs: list[Any] = []
    letters: list[Any] = []
    sources: list[str] = []
    for dep in plan.depends_on:
        dep_plan = resolve(dep)
        if isinstance(dep_plan, SourcePlan):
            rel = source_relation(backend, dep_plan, on_error=on_error, bind=bind)
        elif isinstance(dep_plan, ViewPlan):
            rel = view_relation(
                backend, dep_plan, resolve, on_error=on_error, bind=bind, _seen=_seen | {plan.name}
            )
        else:
            continue  # a Spark table/view: the query resolves it itself
        rel.df.createOrReplaceTempView(quote_name(dep))
        if rel.skipped is not None:
            accs.append(rel.skipped)
        letters.extend(rel.letters)
        sources.extend(rel.sources)
    try:
        df = spark.sql(plan.query)
    except Exception as e:
        raise ExecutionError(f"view '{plan.name}' cannot be planned by Spark: {first_line(e)}") from e
    cols = {f.name for f in df.schema.fields}
    skipped = accs[0] if len(accs) == 1 else (SumAccumulator(accs) if accs else None)
    return Relation(
        name=plan.name,
        df=df,
        changelog=OP in cols,
        skipped=skipped,
        sources=tuple(sources),
        letters=tuple(letters),
    )


def source_relation(
    backend: Any,
    plan: SourcePlan,
    *,
    on_error: OnError | None = None,
    arrow: Any = None,
    bind: Binder | None = None,
) -> Relation:
    """The relation of a source, by its kind (``RELATIONS``)."""
    make = RELATIONS.get(plan.source_kind)
    if make is None:  # pragma: no cover - the analyzer makes only the kinds listed
        raise ExecutionError(f"source '{plan.name}': unsupported kind {plan.source_kind}")
    return make(backend, plan, on_error, arrow, bind)


def _files_relation(backend: Any, plan: SourcePlan, on_error: OnError | None, arrow: Any) -> Relation:
    from icesql.engine.sources.files.relation import files_relation

    return files_relation(backend, plan, on_error=on_error, arrow=arrow)


def _kafka_relation(
    backend: Any, plan: SourcePlan, on_error: OnError | None, binding: Any, bind: Binder | None
) -> Relation:
    from icesql.engine.sources.kafka.relation import kafka_relation

    if bind is None:
        raise ExecutionError(f"source '{plan.name}': a KAFKA source needs its connection's settings")
    return kafka_relation(backend, plan, on_error_policy(plan, on_error), bind(plan, binding))


# the relation of each source kind: (backend, plan, on_error, binding from the sink, binder)
RELATIONS: dict[SourceKind, Callable[..., Relation]] = {
    SourceKind.GENERATOR: lambda backend, plan, on_error, arrow, bind: Relation(
        name=plan.name,
        df=generator_dataframe(backend.spark_for(f"source '{plan.name}' is Spark's generator"), plan),
        sources=(plan.name,),
    ),
    SourceKind.FILES: lambda backend, plan, on_error, arrow, bind: _files_relation(
        backend, plan, on_error, arrow
    ),
    SourceKind.KAFKA: _kafka_relation,
}
