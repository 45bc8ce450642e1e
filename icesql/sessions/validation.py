"""The network checks of definitions: a connection connects (``VALIDATE``, and ``CREATE`` unless
``WITH (VALIDATE = false)``), a Kafka source's topic exists. Done before anything is stored,
outside the store's write lock; a script's checks see the secrets it creates before they are
stored (``PendingSecrets``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icesql import plan as P
from icesql.analyzer.catalog import OverlayCatalog, object_kind
from icesql.errors import CatalogError, ExecutionError
from icesql.results import Result
from icesql.sessions.store_views import CONNECTIONS
from icesql.syntax import ast as A

if TYPE_CHECKING:
    from icesql.session import Session

# What VALIDATE CONNECTION checks, and what CREATE checks over the network before it stores
Validated = (
    P.AwsConnectionPlan
    | P.GcsConnectionPlan
    | P.AzureConnectionPlan
    | P.CatalogConnectionPlan
    | P.KafkaConnectionPlan
    | P.SchemaRegistryConnectionPlan
    | P.SourcePlan
)


class PendingSecrets:
    """Secret values a script creates before they are stored (for its connection checks)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._values: dict[str, str] = {}
        self._dropped: set[str] = set()

    def record(self, plan: P.StatementPlan) -> None:
        if isinstance(plan, P.CreateSecretPlan):
            if plan.replace or not (plan.if_not_exists and self._exists(plan.name)):
                self._values[plan.name] = plan.value.reveal()
                self._dropped.discard(plan.name)
        elif isinstance(plan, P.CreateObjectPlan):
            for name, value in plan.inline_secrets:
                self._values[name] = value.reveal()
        elif isinstance(plan, P.DropPlan) and plan.kind == "secret":
            self._values.pop(plan.name, None)
            self._dropped.add(plan.name)

    def _exists(self, name: str) -> bool:
        return name in self._values or self._session.store.get_object("secret", name) is not None

    def value(self, name: str) -> str:
        if name in self._values:
            return self._values[name]
        if name in self._dropped:
            raise ExecutionError(f"secret {name!r} does not exist")
        return self._session.secret_value(name)


def needs_validation(session: Session, d: P.ObjectPlan, view: Any = None) -> bool:
    """A connection is checked unless the session or its WITH (VALIDATE = false) says not
    to; a Kafka source, whether its topic exists, unless its connection is not checked."""
    if not session.validate:
        return False
    if isinstance(d, CONNECTIONS):
        return d.validate
    if isinstance(d, P.SourcePlan) and d.kafka is not None:
        conn = (view or session.catalog_view).get("connection", d.kafka.connection)
        return isinstance(conn, P.KafkaConnectionPlan) and conn.validate
    return False


def precheck(session: Session, plan: P.StatementPlan, view: OverlayCatalog, pending: PendingSecrets) -> None:
    """The network part of a statement (connection checks), done before anything is
    applied; objects and secrets created earlier in the script are looked up in ``view``
    and ``pending``."""
    if isinstance(plan, P.CreateObjectPlan) and needs_validation(session, plan.definition, view):
        d = plan.definition
        if plan.if_not_exists and session.store.get_object(object_kind(d), d.name) is not None:
            return  # kept as it is: the definition given here is not applied, so not checked
        assert isinstance(d, Validated)
        inline = {n: v.reveal() for n, v in plan.inline_secrets}
        validate_definition(session, d, lambda n: inline[n] if n in inline else pending.value(n), view)
    elif isinstance(plan, P.ValidateConnectionPlan):
        d2 = view.get("connection", plan.name)
        if not isinstance(d2, CONNECTIONS):
            raise CatalogError(f"connection {plan.name!r} does not exist")
        validate_definition(session, d2, pending.value, view)


def validate_definition(
    session: Session,
    d: Validated,
    secrets: P.SecretResolver | None = None,
    view: Any = None,
) -> None:
    resolver = secrets or session.secret_value
    view = view or session.catalog_view
    if isinstance(d, P.SchemaRegistryConnectionPlan):
        from icesql.engine.connections.registry import validate_registry_connection

        validate_registry_connection(d, resolver)
        return
    if isinstance(d, P.KafkaConnectionPlan | P.SourcePlan):
        from icesql.engine.connections.kafka import validate_kafka_connection

        if isinstance(d, P.KafkaConnectionPlan):
            validate_kafka_connection(d, secrets=resolver)
            return
        assert d.kafka is not None
        conn = view.get("connection", d.kafka.connection)
        assert isinstance(conn, P.KafkaConnectionPlan), "the analyzer checked the connection"
        # a pattern may match no topic yet (those created later are read when they are): the
        # brokers are reached, and TOPIC or every one of TOPICS exists
        topics = (d.kafka.topic,) if not d.kafka.many_topics else d.kafka.topics
        validate_kafka_connection(conn, secrets=resolver, topics=topics)
        return
    from icesql.engine.connections import catalogs

    if isinstance(d, P.CatalogConnectionPlan):
        aws = _aws(d.aws_connection, view)
        storage: Any = view.get("connection", d.storage_connection) if d.storage_connection else None
        catalogs.validate_connection(d, aws=aws, storage=(storage,), secrets=resolver, home=session.home)
    else:  # a storage connection: AWS, GCS, AZURE
        catalogs.validate_connection(d, secrets=resolver, home=session.home)


def _aws(name: str | None, view: Any) -> P.AwsConnectionPlan | None:
    if name is None:
        return None
    plan = view.get("connection", name)
    if not isinstance(plan, P.AwsConnectionPlan):
        raise ExecutionError(f"connection {name!r} is not an AWS connection")
    return plan


def apply_validate(session: Session, plan: P.ValidateConnectionPlan, stmt: A.Statement, checked: bool) -> Result:
    if not checked:
        d = session.catalog_view.get("connection", plan.name)
        if not isinstance(d, CONNECTIONS):
            raise CatalogError(f"connection {plan.name!r} does not exist")
        validate_definition(session, d)
    return Result("VALIDATE CONNECTION", f"connection {plan.name!r} is valid")


__all__ = ["PendingSecrets", "Validated", "apply_validate", "needs_validation", "precheck", "validate_definition"]
