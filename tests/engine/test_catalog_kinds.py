"""The catalog-kind registry and the failure rules are tables: every entry is there, in order."""

from __future__ import annotations

from icesql.engine.catalog_kinds import KINDS, REST_AUTH
from icesql.engine.failures import RULES, CatalogUnavailableError, describe_failure, is_transient
from icesql.plan import CatalogType, RestAuth


def test_every_catalog_type_has_an_entry_and_every_rest_auth_a_builder() -> None:
    assert set(KINDS) == set(CatalogType)
    assert set(REST_AUTH) == set(RestAuth)
    assert KINDS[CatalogType.S3TABLES].catalog_class == "pyiceberg.catalog.rest:RestCatalog"


def test_failure_rules_name_the_cause_and_say_what_is_transient() -> None:
    refused = ConnectionRefusedError(111, "Connection refused")
    err = describe_failure(refused, label="catalog connection 'c'", endpoint="http://127.0.0.1:9")
    assert isinstance(err, CatalogUnavailableError) and is_transient(err)
    assert err.message == "catalog connection 'c': cannot connect at http://127.0.0.1:9: unreachable (connection refused)"
    odd = describe_failure(KeyError("x"), label="catalog connection 'c'", endpoint=None)
    assert not is_transient(odd)
    assert odd.message.startswith("catalog connection 'c': cannot connect: unexpected error KeyError")
    assert len(RULES) >= 15


def test_a_connection_broken_mid_response_is_transient_and_a_mistake_is_not() -> None:
    from http.client import RemoteDisconnected

    from icesql.engine.failures import transient_failure

    broken = ConnectionError("Connection aborted.")
    broken.__cause__ = RemoteDisconnected("Remote end closed connection without response")
    err = transient_failure(broken, label="sink s", action="commit")
    assert err is not None and err.transient
    assert err.message == "sink s: cannot commit: unreachable (connection failed)"
    assert transient_failure(ValueError("bad value"), label="sink s", action="commit") is None
