"""The words plans are made of: kinds and modes as enums, secret references, shared defaults.

Everything here is a value with no plan around it: the enums a plan's fields take (and
``plan_json`` tags by class name), ``SecretName`` (a reference a plan holds where a secret
goes) and ``Redacted`` (the one secret value a plan carries, CREATE SECRET's, which refuses to
be printed or pickled), and the defaults the analyzer, the engine and SHOW output agree on.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_MAXIMUM_FILE_SIZE = 512 * 1024 * 1024  # 512 MiB, as S3 Tables and the design doc
# A sink's FORMAT: the data file formats Iceberg tables hold (``write.format.default``'s values).
DATA_FILE_FORMATS = ("parquet", "orc", "avro")
# The table property naming the format of new data files (Iceberg Java's and pyiceberg's name);
# a table without it is written in Parquet, the spec's default.
WRITE_FORMAT_DEFAULT = "write.format.default"
# Which readers read a table's data files of each format (SHOW SINK STATUS and the README say
# so; icesql does not refuse a format some reader cannot read)
FORMAT_READERS = {
    "parquet": "Iceberg Java/Spark, pyiceberg, DuckDB, iceberg-rust/DataFusion",
    "orc": "Iceberg Java/Spark, pyiceberg (not uuid, fixed or time columns); not DuckDB, iceberg-rust",
    "avro": "Iceberg Java/Spark; not pyiceberg, DuckDB, iceberg-rust",
}
OMIT_AT_DEFAULT = {"omit_at_default": True}  # field metadata: ``to_dict`` leaves the field out at its default
DEFAULT_REGION = "us-east-1"  # SigV4 signing region when the AWS connection sets none


class Redacted:
    """A secret value that refuses to be printed."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Redacted('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Redacted) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> Any:  # never pickled into Spark closures or logs by accident
        raise TypeError("a secret value cannot be pickled")


@dataclass(frozen=True)
class SecretName:
    """A reference to a stored secret; the value is looked up only when connecting."""

    name: str


# (name) -> value; raises CatalogError when the secret is missing.
SecretResolver = Callable[[str], str]


class CatalogType(enum.Enum):
    LOCAL = "local"
    SQL = "sql"
    REST = "rest"
    S3TABLES = "s3tables"
    GLUE = "glue"
    HIVE = "hive"


class RestAuth(enum.Enum):
    NONE = "none"
    OAUTH2 = "oauth2"  # USER/PASSWORD as client credentials, or CREDENTIAL
    BASIC = "basic"  # USER/PASSWORD as HTTP basic
    TOKEN = "token"  # TOKEN = SECRET t (bearer)
    SIGV4 = "sigv4"  # through an AWS CONNECTION


class SourceFormat(enum.Enum):
    JSON = "json"
    CSV = "csv"
    PARQUET = "parquet"
    ORC = "orc"  # FILES: ORC files (their schema from the footers when no SCHEMA is given)
    DEBEZIUM_JSON = "debezium-json"
    TEXT = "text"  # KAFKA: the value (or key) as one string column
    BYTES = "bytes"  # KAFKA: the value (or key) as one binary column
    AVRO = "avro"  # KAFKA with a SCHEMA REGISTRY: Avro framed with the registry's schema id
    PROTOBUF = "protobuf"  # KAFKA with a SCHEMA REGISTRY: Protobuf framed likewise


class SourceKind(enum.Enum):
    FILES = "files"
    GENERATOR = "generator"
    KAFKA = "kafka"


class KafkaEnvelope(enum.Enum):
    NONE = "none"  # every record is a row
    UPSERT = "upsert"  # the record key is the row's key; a null value (tombstone) deletes it
    DEBEZIUM = "debezium"  # the value is a Debezium change event (before, after, op) from a registry


class KafkaMetadata(enum.Enum):
    """What ``INCLUDE ...`` adds to a Kafka source's rows (Materialize's clause)."""

    KEY = "key"  # the record key (string for KEY FORMAT 'text', binary for 'bytes', struct for 'json')
    PARTITION = "partition"  # int
    OFFSET = "offset"  # bigint
    TIMESTAMP = "timestamp"  # timestamp (the record's, as the broker gives it)
    HEADERS = "headers"  # array<struct<key:string,value:binary>>
    TOPIC = "topic"  # string (a source of many topics has it without asking: ``KafkaSourceSpec``)


class SinkMode(enum.Enum):
    APPEND = "append"
    UPSERT = "upsert"


class DeleteMode(enum.Enum):
    """How an upsert sink deletes the rows it replaces."""

    POSITION = "position"  # position deletes found through the key index (the default)
    EQUALITY = "equality"  # equality deletes on the KEY


class CleanSource(enum.Enum):
    OFF = "off"
    ARCHIVE = "archive"  # moved under ARCHIVE DIRECTORY, keeping its path
    DELETE = "delete"


class OnError(enum.Enum):
    FAIL = "fail"
    SKIP = "skip"
    DEAD_LETTER = "dead-letter"  # bad records go to the sink's dead-letter table



class Transform(enum.Enum):
    IDENTITY = "identity"
    BUCKET = "bucket"
    TRUNCATE = "truncate"
    YEAR = "year"
    MONTH = "month"
    DAY = "day"
    HOUR = "hour"
    VOID = "void"
