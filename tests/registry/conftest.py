"""The Confluent Schema Registry tests: the stand-in server (tests/support/registry.py) as fixtures."""

from __future__ import annotations

from tests.support.registry import schema_registry, secure_registry

__all__ = ["schema_registry", "secure_registry"]
