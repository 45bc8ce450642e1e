"""What a test needs from the machine: skip where it is missing, fail where CI runs.

A server, broker or reader the suite starts (weed, a Kafka broker, azurite, fake-gcs-server,
moto, a Hive metastore, the Java reader harness, DuckDB's Azure extension, Prometheus,
Chromium, java itself) may be missing on a developer's machine: those tests skip there and
say why. In CI (``CI`` set, as ``.ci/run`` runs with ``CI=true``) the same absence is a
failure: CI installs every one of them, so a skip would only hide that it did not.

* ``require(ok, reason)`` in a test or fixture;
* ``missing(reason)`` where the test already knows it is missing;
* ``require_module(name, reason)`` for a Python package of the test extras;
* ``@requires(ok, reason)`` (the marker form, for a test or a module's ``pytestmark``), which
  ``tests/conftest.py`` applies before the test runs; so are tests marked ``java`` checked
  there for the harness, once.

Skips for anything else (the platform, root, an opt-out variable) stay ``pytest.skip``.
"""

from __future__ import annotations

import importlib.util
import os
from typing import NoReturn

import pytest

CI_ENV = "CI"


def under_ci() -> bool:
    """Whether ``CI`` is set to something other than empty, ``0``, ``false`` or ``no``."""
    return os.environ.get(CI_ENV, "").strip().lower() not in ("", "0", "false", "no")


def missing(reason: str) -> NoReturn:
    """Skip the test for want of ``reason``'s tool; under CI fail it instead."""
    if under_ci():
        pytest.fail(f"{reason} (CI={os.environ[CI_ENV]}: what the tests need must be there)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require(ok: object, reason: str) -> None:
    """Go on when ``ok`` is true; otherwise ``missing(reason)``."""
    if not ok:
        missing(reason)


def require_module(name: str, reason: str) -> None:
    """``require`` that the Python module ``name`` can be imported (an installed extra)."""
    require(importlib.util.find_spec(name) is not None, reason)


def requires(ok: object, reason: str) -> pytest.MarkDecorator:
    """The marker form of ``require``, evaluated (like ``skipif``'s condition) at import."""
    return pytest.mark.requires(bool(ok), reason)


__all__ = ["missing", "require", "require_module", "requires", "under_ci"]
