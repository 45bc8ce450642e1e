"""``AzureFileIO``: pyiceberg's pyarrow FileIO reading both spellings of an Azure location,
``abfs://container/path`` and ``abfs://container@account.dfs.core.windows.net/path`` (the one
Iceberg Java writes). Imported by pyiceberg through ``py-io-impl`` (``stores.azure``)."""

from __future__ import annotations

from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.typedef import EMPTY_DICT, Properties

from icesql.engine.stores.azure import SCHEMES, account_of, container_of


class AzureFileIO(PyArrowFileIO):
    def __init__(self, properties: Properties = EMPTY_DICT) -> None:
        super().__init__(properties)

    @staticmethod
    def parse_location(location: str, properties: Properties = EMPTY_DICT) -> tuple[str, str, str]:
        scheme, netloc, path = PyArrowFileIO.parse_location(location, properties)
        if scheme in SCHEMES and "@" in netloc:
            return scheme, netloc, container_of(netloc) + path[len(netloc) :]
        return scheme, netloc, path

    def _initialize_fs(self, scheme: str, netloc: str | None = None):  # type: ignore[no-untyped-def]
        if scheme in SCHEMES and netloc and "adls.account-name" not in self.properties:
            # no ACCOUNT NAME: the account the location names (Iceberg Java's spelling)
            account = account_of(netloc)
            if account:
                return AzureFileIO({**self.properties, "adls.account-name": account})._initialize_fs(scheme)
        return super()._initialize_fs(scheme, netloc)


__all__ = ["AzureFileIO"]
