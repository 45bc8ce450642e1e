"""A sink's failure in one line: a bad record, a null KEY, new columns, a catalog's or an object
store's client named by its connection and address, else the informative head of Spark's trace.
"""

from __future__ import annotations

from typing import Any

from icesql.engine.base.restarts import SchemaChangedError
from icesql.engine.base.wire import marked_message
from icesql.engine.connections.failures import rule_failure, service_of, transient_failure
from icesql.errors import ExecutionError


def translate_new_columns(exc: BaseException, *, evolve: bool) -> ExecutionError | None:
    """A batch stopped by ``files.decode.NewColumnsError``: a restart that evolves the table
    (``SchemaChangedError``), or with evolution off the sink's end, saying why."""
    from icesql.engine.sources.decode import NEW_COLUMNS_MARKER

    body = marked_message(exc, NEW_COLUMNS_MARKER)
    if body is None:
        return None
    if evolve:
        return SchemaChangedError(f"{body}; the sink restarts to add them to the table")
    return ExecutionError(
        f"{body}; the sink stops instead of dropping them",
        hint="SCHEMA EVOLUTION = 'off' keeps the table's columns as they are: ALTER SINK ... SET "
        "(SCHEMA EVOLUTION = 'auto') to add them, or write the files without them",
    )


def execution_error(exc: BaseException) -> ExecutionError:
    text = str(exc).strip() or type(exc).__name__
    # Spark wraps Python errors in long JVM traces: keep the informative head.
    lines = [ln for ln in text.splitlines() if ln.strip()]
    head = lines[0] if lines else text
    for ln in lines:
        if "Error:" in ln or "Exception:" in ln:
            head = ln.strip()
            break
    return ExecutionError(head[:1000])
def library_failure(exc: BaseException, name: str, target: Any) -> ExecutionError | None:
    """A failure of the catalog's or the object store's client, named by the connection the
    sink used there and its address, with the cause the failure rules give; otherwise (Spark,
    ...) a cause the rules know to be transient."""
    label = f"sink {name}"
    service = service_of(exc)
    if target is not None and target.assumes_role:
        from icesql.engine.connections.aws import forget_role_credentials
        from icesql.engine.connections.failures import expired_role_credentials

        expired = expired_role_credentials(exc, label=label, action="write or commit")
        if expired is not None:
            forget_role_credentials()  # the retry assumes the role anew
            return expired
    if service is not None and target is not None:
        what, endpoint = target.where(service)
        return rule_failure(exc, label=label, action=f"use {what}", endpoint=endpoint)
    return transient_failure(exc, label=label, action="write or commit")

