"""Secret hygiene for everything that talks to catalogs and object stores.

Secrets are resolved through the store at call time (``SecretValues``) and remembered, so that:

* ``scrub(text)`` masks them (and passwords in URLs) in any text icesql is about to show;
* a filter on the loggers of pyiceberg, botocore, urllib3, requests and sqlalchemy masks them in
  every log record, and drops botocore's DEBUG records of STS answers (which carry credentials
  before icesql could learn them).

Errors built from library exceptions are raised with an empty exception chain elsewhere
(``failures.guarded``), so no library message rides along in a traceback either.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable

from icesql.plan import SecretName, SecretResolver

MASK = "********"

_SECRET_VALUES: set[str] = set()  # every secret value resolved in this process (for log masking)
_SECRET_LOCK = threading.Lock()
_URL_USERINFO = re.compile(r"(?P<pre>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@\s/]*@")
_MIN_GLOBAL_SECRET = 4  # shorter remembered values would mangle unrelated text


def remember_secret(value: str) -> None:
    """Mask ``value`` in every later log record and ``scrub`` call of this process."""
    if value:
        with _SECRET_LOCK:
            _SECRET_VALUES.add(value)
        _install_log_filter()


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with secret values and URL passwords masked.

    ``extra`` (the secrets of the current call) are masked whatever their length; the values
    remembered from earlier calls (used by the log filter) from 4 characters up.
    """
    with _SECRET_LOCK:
        values = {v for v in _SECRET_VALUES if len(v) >= _MIN_GLOBAL_SECRET}
    values.update(v for v in extra if v)
    # longest first, so a secret containing another is masked whole
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return _URL_USERINFO.sub(lambda m: m.group("pre") + MASK + "@", text)


class _ScrubFilter(logging.Filter):
    """Masks secret values in records of the libraries that talk to catalogs and stores."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record is not ours to fix
            return True
        if "SecretAccessKey" in message or "<SessionToken>" in message or '"SessionToken"' in message:
            # botocore logs STS response bodies at DEBUG before we learn the values in them
            record.msg, record.args = "[icesql: a response carrying AWS credentials was not logged]", ()
            return True
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


_FILTER = _ScrubFilter()
_FILTERED_LOGGERS = (
    "pyiceberg",
    "botocore",
    "botocore.endpoint",
    "botocore.parsers",
    "botocore.auth",
    "botocore.hooks",
    "botocore.credentials",
    "botocore.httpsession",
    "botocore.retryhandler",
    "boto3",
    "urllib3",
    "urllib3.connectionpool",
    "requests",
    "sqlalchemy",
    "sqlalchemy.engine",
    "sqlalchemy.engine.Engine",
    "icesql.engine",
    "icesql.engine.connections.catalogs",
    "icesql.engine.connections.failures",
    "icesql.sink",
    "icesql.sources",
    "icesql.kafka",
    "icesql.kafka.librdkafka",  # librdkafka's own log lines (``kafka.connection``)
    # py4j logs every command it sends the JVM at DEBUG (-v), a data source's options included
    "py4j",
    "py4j.clientserver",
    "py4j.java_gateway",
)
_filter_installed = False


def _install_log_filter() -> None:
    # Logger filters only see records logged on that very logger, hence the list of children.
    global _filter_installed
    if _filter_installed:
        return
    for name in _FILTERED_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    _filter_installed = True


class SecretValues:
    """Resolves plan values through the store for one call, and remembers them for masking."""

    def __init__(self, resolver: SecretResolver) -> None:
        self._resolver = resolver
        self.values: list[str] = []
        self.aws_credentials: dict[str, dict[str, str]] = {}  # per AWS connection, this call only

    def plain(self, value: str | SecretName | None) -> str | None:
        """A value that is not secret by itself (an access key id) but may be stored as one."""
        if value is None:
            return None
        if isinstance(value, SecretName):
            return self._resolver(value.name)
        return value

    def secret(self, value: str | SecretName | None) -> str | None:
        """A secret value: resolved, and remembered so no message or log shows it."""
        resolved = self.plain(value)
        if resolved:
            self.remember(resolved)
            if ":" in resolved:  # 'client_id:client_secret' - the secret half alone too
                tail = resolved.split(":", 1)[1]
                if tail:
                    self.remember(tail)
        return resolved

    def remember(self, value: str) -> None:
        """A value derived from secrets (a 'user:password' credential) that must be masked too."""
        self.values.append(value)
        remember_secret(value)

    def scrub(self, text: str) -> str:
        """Mask only this call's secrets (for messages icesql wrote itself)."""
        for value in sorted(set(self.values), key=len, reverse=True):
            if value and value in text:
                text = text.replace(value, MASK)
        return text


__all__ = ["MASK", "SecretValues", "remember_secret", "scrub"]
