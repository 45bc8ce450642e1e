"""Statements that change the catalog store: CREATE (secrets, connections, sources, views,
sinks), ALTER SOURCE and ALTER SINK (the sinks running here follow), DROP (with what depends
on the object). Each ``apply_*`` is the ``APPLY`` entry of its plan (``icesql.sessions.dispatch``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from icesql import plan as P
from icesql.analyzer.catalog import object_kind
from icesql.errors import CatalogError
from icesql.results import Result
from icesql.sessions.validation import Validated, needs_validation, validate_definition
from icesql.syntax import ast as A

if TYPE_CHECKING:
    from catalog_store import CatalogStore
    from icesql.session import Session


def apply_secret(session: Session, plan: P.CreateSecretPlan, stmt: A.Statement, checked: bool) -> Result:
    store = session.store
    if plan.replace:
        store.alter_secret(plan.name, plan.value.reveal())
        return Result("ALTER SECRET", "ALTER SECRET")
    created = store.create_secret(plan.name, plan.value.reveal(), if_not_exists=plan.if_not_exists)
    msg = "CREATE SECRET" if created else f"secret {plan.name!r} already exists, skipping"
    return Result("CREATE SECRET", msg)


def apply_create(session: Session, plan: P.CreateObjectPlan, stmt: A.Statement, checked: bool) -> Result:
    store = session.store
    d = plan.definition
    kind = object_kind(d)
    label = f"CREATE {kind.upper()}"
    if plan.if_not_exists and store.get_object(kind, d.name) is not None:
        if kind == "sink":
            session.remember_sink(d.name)
        return Result(label, f"{kind} {d.name!r} already exists, skipping")
    if kind == "sink":
        check_cleaned_sources(store, d.name, plan.dependencies)
    if plan.replace and store.get_object(kind, d.name) is not None:
        store.replace_object(kind, d.name, plan.sql, P.to_dict(d), plan.dependencies)
        restarted = relation_changed(session, kind, d.name)
        return Result(f"CREATE OR REPLACE {kind.upper()}", f"CREATE OR REPLACE {kind.upper()}" + restarted)
    if store.get_object(kind, d.name) is not None:
        raise CatalogError(
            f"{kind} {d.name!r} already exists",
            hint=f"use CREATE {kind.upper()} IF NOT EXISTS, or DROP {kind.upper()} {d.name} first",
        )
    if not checked and needs_validation(session, d):
        # Validate before storing (a connection that cannot connect is not kept), outside
        # the store's write lock, with inline secrets that are not stored yet.
        assert isinstance(d, Validated)
        inline = {n: v.reveal() for n, v in plan.inline_secrets}
        validate_definition(session, d, lambda n: inline[n] if n in inline else session.secret_value(n))
    with store.transaction():
        for name, value in plan.inline_secrets:
            if store.get_object("secret", name) is not None:
                store.alter_secret(name, value.reveal())
            else:
                store.create_secret(name, value.reveal(), hidden=True)
        store.create_object(kind, d.name, plan.sql, P.to_dict(d), plan.dependencies)
    if kind == "sink":
        session.remember_sink(d.name)
    return Result(label, label)


def check_cleaned_sources(store: CatalogStore, sink: str, dependencies: tuple[tuple[str, str], ...]) -> None:
    """A FILES source with CLEAN SOURCE feeds one sink: a second one would miss the files the
    first moves away or deletes once it has committed them."""
    stack, seen = [d for d in dependencies if d[0] in ("view", "source")], set()
    while stack:
        kind, name = stack.pop()
        if (kind, name) in seen:
            continue
        seen.add((kind, name))
        obj = store.get_object(kind, name)
        if obj is None:
            continue
        if kind == "view":
            stack.extend(d for d in obj.dependencies if d[0] in ("view", "source"))
            continue
        source = P.plan_from_dict(obj.definition)
        if source.clean_source is P.CleanSource.OFF:
            continue
        readers = sorted({n for k, n in all_dependents(store, "source", name) if k == "sink"} - {sink})
        if readers:
            raise CatalogError(
                f"source {name!r} has CLEAN SOURCE = '{source.clean_source.value}' and sink "
                f"{readers[0]!r} already reads it: a second sink would miss the files the first "
                "one moves away",
                hint="give each sink a source of its own (its own directory), or create the "
                "source without CLEAN SOURCE",
            )


def apply_alter_source(session: Session, plan: P.AlterSourcePlan, stmt: A.Statement, checked: bool) -> Result:
    obj = session.store.get_object("source", plan.name)
    assert obj is not None, "the analyzer checked that the source exists"
    session.store.replace_object(
        "source", plan.name, with_schema(obj.sql, plan.definition.schema), P.to_dict(plan.definition), obj.dependencies
    )
    return Result("ALTER SOURCE", "ALTER SOURCE" + relation_changed(session, "source", plan.name))


def relation_changed(session: Session, kind: str, name: str) -> str:
    """A source's schema or a view's query changed: the sinks reading it that run here restart
    (a restart adds the new columns to their tables); returns what the result says of them."""
    readers = [n for k, n in all_dependents(session.store, kind, name) if k == "sink"]
    engine = session.running_engine
    if engine is None or not readers:
        return ""
    restarted = engine.relation_changed(readers, f"{kind} {name} changed")
    return f" (sinks restarting: {', '.join(restarted)})" if restarted else ""


def apply_alter_sink(session: Session, plan: P.AlterSinkPlan, stmt: A.Statement, checked: bool) -> Result:
    obj = session.store.get_object("sink", plan.definition.name)
    deps = tuple(obj.dependencies) if obj is not None else ()
    session.store.replace_object("sink", plan.name, plan.sql, P.to_dict(plan.definition), deps)
    if session.running_engine is not None:
        # A running sink picks the new commit policy up at once.
        session.running_engine.update_sink(plan.definition)
    return Result("ALTER SINK", "ALTER SINK")


def apply_drop(session: Session, plan: P.DropPlan, stmt: A.Statement, checked: bool) -> Result:
    store = session.store
    label = f"DROP {plan.kind.upper()}"
    if store.get_object(plan.kind, plan.name) is None:
        if plan.if_exists:
            return Result(label, f"{plan.kind} {plan.name!r} does not exist, skipping")
        raise CatalogError(f"{plan.kind} {plan.name!r} does not exist")
    from catalog_store import DependentObjectsError

    dependents = all_dependents(store, plan.kind, plan.name)
    engine = session.running_engine
    for kind, name in [(plan.kind, plan.name), *dependents]:
        if kind == "sink" and engine is not None and (plan.cascade or kind == plan.kind):
            engine.stop_sink(name)
    try:
        dropped = store.drop_object(plan.kind, plan.name, cascade=plan.cascade)
    except DependentObjectsError as err:
        names = ", ".join(f"{k} {n}" for k, n in err.dependents)
        verb = "depends" if len(err.dependents) == 1 else "depend"
        raise CatalogError(
            f"cannot drop {plan.kind} {plan.name!r}: {names} {verb} on it",
            hint=f"drop them first, or use DROP {plan.kind.upper()} {plan.name} CASCADE",
        ) from None
    # (the store deletes hidden inline secrets that nothing uses any more)
    for kind, name in dropped:
        if kind == "sink":
            session.forget_sink(name)
    extra = [f"{k} {n}" for k, n in dropped if (k, n) != (plan.kind, plan.name)]
    msg = label + (f" (also dropped {', '.join(extra)})" if extra else "")
    return Result(label, msg)


def with_schema(create_sql: str, schema: str | None) -> str:
    """A stored CREATE SOURCE statement with its SCHEMA option replaced by ``schema``."""
    from icesql.syntax.parser import parse_one

    stmt = parse_one(create_sql)
    assert isinstance(stmt, A.CreateSource)
    options = [o for o in stmt.options if o.key_is_string or o.name != "SCHEMA"]
    if schema is not None:
        options.insert(0, A.Option("SCHEMA", A.StringLit(schema)))
    return dataclasses.replace(stmt, options=tuple(options)).to_sql()


def all_dependents(store: CatalogStore, kind: str, name: str) -> list[tuple[str, str]]:
    """Everything that depends on an object, directly or through others."""
    seen: list[tuple[str, str]] = []
    stack = [(kind, name)]
    while stack:
        for dep in store.dependents(*stack.pop()):
            if dep not in seen:
                seen.append(dep)
                stack.append(dep)
    return seen


__all__ = [
    "all_dependents",
    "apply_alter_sink",
    "apply_alter_source",
    "apply_create",
    "apply_drop",
    "apply_secret",
    "check_cleaned_sources",
    "relation_changed",
    "with_schema",
]
