"""A KAFKA connection as librdkafka configuration, and its check (``VALIDATE``).

``client_config(plan, secrets)`` -> the ``confluent_kafka`` configuration of a connection (holds
secret values: never log or print it; ``redacted_config`` is what may be shown). Secret values are
remembered for masking (``secrets.remember_secret``) as they are resolved, so no icesql log line,
error or hint can show them; librdkafka's own log lines go through ``logger`` below, which masks
them too.

``validate_kafka_connection(plan, secrets=..., topics=())`` reads the cluster's metadata once (and
checks that the topics given exist) and turns every failure into one ``ExecutionError`` line with a hint:
unreachable, refused, authentication failed, unknown topic.

confluent-kafka is imported lazily; a missing one names the pip command (``require``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from icesql.engine.base.secrets import SecretValues, scrub
from icesql.errors import ExecutionError
from icesql.plan import KafkaConnectionPlan, SecretResolver

log = logging.getLogger("icesql.kafka")

INSTALL_HINT = "pip install 'icesql[kafka]' (KAFKA sources read topics through confluent-kafka)"
# librdkafka settings whose values are secrets (masked in ``redacted_config``)
SECRET_KEYS = frozenset(("sasl.password", "ssl.key.pem", "ssl.certificate.pem", "ssl.key.password"))
DEFAULT_TIMEOUT = 10.0  # seconds a metadata request may take before the cluster counts as unreachable


def require() -> Any:
    """``confluent_kafka``, or an error that says how to install it."""
    try:
        import confluent_kafka
    except ModuleNotFoundError:
        raise ExecutionError("KAFKA sources need the confluent-kafka package", hint=INSTALL_HINT) from None
    return confluent_kafka


class _MaskedLogger(logging.LoggerAdapter):
    """librdkafka's log lines (``logger`` in its configuration) with secret values masked."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return scrub(str(msg)), kwargs


def client_config(plan: KafkaConnectionPlan, secrets: SecretResolver | SecretValues) -> dict[str, Any]:
    """librdkafka's configuration for ``plan``. Holds secret values: never print it."""
    sec = secrets if isinstance(secrets, SecretValues) else SecretValues(secrets)
    conf: dict[str, Any] = {
        "bootstrap.servers": ",".join(plan.brokers),
        "security.protocol": plan.security_protocol.lower(),
        "client.id": "icesql",
        "logger": _MaskedLogger(logging.getLogger("icesql.kafka.librdkafka"), {}),
    }
    if plan.sasl_mechanism:
        conf["sasl.mechanisms"] = plan.sasl_mechanism.upper()
    user = sec.plain(plan.sasl_username)
    if user:
        conf["sasl.username"] = user
    password = sec.secret(plan.sasl_password)
    if password:
        conf["sasl.password"] = password
    ca = sec.plain(plan.ssl_ca)
    if ca:
        conf["ssl.ca.pem"] = ca
    cert = sec.secret(plan.ssl_certificate)
    if cert:
        conf["ssl.certificate.pem"] = cert
    key = sec.secret(plan.ssl_key)
    if key:
        conf["ssl.key.pem"] = key
    return conf


def redacted_config(conf: dict[str, Any]) -> dict[str, str]:
    """``conf`` as it may be shown: secret values replaced, the logger left out."""
    return {k: ("********" if k in SECRET_KEYS else str(v)) for k, v in conf.items() if k != "logger"}


def executor_config(conf: dict[str, Any]) -> dict[str, Any]:
    """``conf`` without what cannot travel to an executor (the logger object)."""
    return {k: v for k, v in conf.items() if k != "logger"}


def _label(plan: KafkaConnectionPlan) -> str:
    return f"Kafka connection '{plan.name}' ({', '.join(plan.brokers)})"


def describe_kafka_error(err: Any, plan: KafkaConnectionPlan, what: str) -> ExecutionError:
    """A ``KafkaError`` (or ``KafkaException``) as one line with a hint; secret-free."""
    ck = require()
    kerr = err.args[0] if isinstance(err, ck.KafkaException) and err.args else err
    code = kerr.code() if hasattr(kerr, "code") else None
    text = scrub(kerr.str() if hasattr(kerr, "str") else str(kerr))
    E = ck.KafkaError
    auth = {E._AUTHENTICATION, getattr(E, "SASL_AUTHENTICATION_FAILED", -1), E._SSL}
    if code in auth:
        return ExecutionError(
            f"{_label(plan)}: authentication refused while trying to {what} ({text})",
            hint="check SASL USERNAME / SASL PASSWORD, SASL MECHANISMS and SECURITY PROTOCOL",
        )
    if code in (E.UNKNOWN_TOPIC_OR_PART, E._UNKNOWN_TOPIC, E._UNKNOWN_PARTITION):
        return ExecutionError(
            f"{_label(plan)}: {what}: the topic does not exist ({text})",
            hint="create the topic, or check TOPIC's spelling (topic names are case-sensitive)",
        )
    if code in (E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED):
        return ExecutionError(
            f"{_label(plan)}: not allowed to {what} ({text})",
            hint="grant the connection's user READ and DESCRIBE on the topic",
        )
    err_out = ExecutionError(
        f"{_label(plan)}: cannot {what}: the brokers did not answer ({text})",
        hint="check that the brokers are running and reachable from this machine, and the BROKER addresses",
    )
    err_out.transient = True  # type: ignore[attr-defined]
    return err_out


def validate_kafka_connection(
    plan: KafkaConnectionPlan,
    *,
    secrets: SecretResolver,
    topics: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
) -> list[str]:
    """Read the cluster's metadata once (and check that ``topics`` exist); returns the topic
    names. Every failure is one ``ExecutionError`` line (``describe_kafka_error``)."""
    ck = require()
    conf = client_config(plan, secrets)
    errors: list[Any] = []
    conf["error_cb"] = errors.append  # librdkafka reports refused connections and auth failures here
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(conf)
    try:
        # all topics, not the one: asking a broker for a topic's metadata may create it (noida-db
        # does, as brokers with auto.create.topics.enable do)
        md = admin.list_topics(timeout=timeout)
    except ck.KafkaException as e:
        fatal = [x for x in errors if x.code() != ck.KafkaError._TRANSPORT] or errors
        raise describe_kafka_error(fatal[0] if fatal else e, plan, "read the cluster's metadata") from None
    for topic in topics:
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            if t is not None and t.error is not None:
                raise describe_kafka_error(t.error, plan, f"read topic '{topic}'")
            raise ExecutionError(
                f"{_label(plan)}: topic '{topic}' does not exist",
                hint="create the topic, or check TOPIC's spelling (topic names are case-sensitive)",
            )
    log.debug("kafka connection %s: %d topic(s)", plan.name, len(md.topics))
    return sorted(md.topics)


__all__ = [
    "INSTALL_HINT",
    "client_config",
    "describe_kafka_error",
    "executor_config",
    "redacted_config",
    "require",
    "validate_kafka_connection",
]
