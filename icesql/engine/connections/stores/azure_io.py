"""``AzureFileIO``: pyiceberg's pyarrow FileIO reading both spellings of an Azure location,
``abfs://container/path`` and ``abfs://container@account.dfs.core.windows.net/path`` (the one
Iceberg Java writes), and deleting a file in one Delete Blob request where it holds an account
key or a SAS token (``azure_rest``). Imported by pyiceberg through ``py-io-impl``
(``stores.azure``)."""

from __future__ import annotations

from pyiceberg.io import InputFile, OutputFile
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.typedef import EMPTY_DICT, Properties

from icesql.engine.connections.stores.azure_rest import SCHEMES, BlobService, account_of, container_of


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

    def delete(self, location: str | InputFile | OutputFile) -> None:
        """Delete Blob, one request (pyarrow's delete takes four and may stall: ``azure_rest``);
        through pyarrow where no key or SAS token signs requests (the default chain)."""
        text = location.location if isinstance(location, (InputFile, OutputFile)) else location
        scheme, netloc, path = self.parse_location(text, self.properties)
        service = BlobService.from_properties(self.properties, account_of(netloc)) if scheme in SCHEMES else None
        if service is None:
            return super().delete(location)
        container, _, name = path.partition("/")
        service.delete(container, name)


__all__ = ["AzureFileIO"]
