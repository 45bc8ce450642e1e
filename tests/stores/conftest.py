"""The servers the store tests start, once per test run (session scope, defined here once: a
fixture imported into each test module would be a fixture of each module, and start again)."""

from tests.support.azurite import azurite
from tests.support.gcs import fake_gcs
from tests.support.hive import hive_metastore
from tests.support.moto import moto_server

__all__ = ["azurite", "fake_gcs", "hive_metastore", "moto_server"]
