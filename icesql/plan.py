"""Validated, typed plans: what the analyzer produces and the executor consumes.

Frozen dataclasses with no Lark, pyiceberg or pyspark in sight. Plans never hold a secret's
value: options that take a secret hold a ``SecretName`` and the executor asks the catalog
store for the value at the moment it connects (see ``SecretResolver``). The one exception is
``CreateSecretPlan``, whose value is wrapped in ``Redacted`` so that ``repr``, ``str`` and
``to_dict`` never show it.

Every plan has ``to_dict()`` / ``plan_from_dict()`` so the catalog store can persist it as JSON.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

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
    DEBEZIUM_JSON = "debezium-json"
    TEXT = "text"  # KAFKA: the value (or key) as one string column
    BYTES = "bytes"  # KAFKA: the value (or key) as one binary column


class SourceKind(enum.Enum):
    FILES = "files"
    GENERATOR = "generator"
    KAFKA = "kafka"


class KafkaEnvelope(enum.Enum):
    NONE = "none"  # every record is a row
    UPSERT = "upsert"  # the record key is the row's key; a null value (tombstone) deletes it


class KafkaMetadata(enum.Enum):
    """What ``INCLUDE ...`` adds to a Kafka source's rows (Materialize's clause)."""

    KEY = "key"  # the record key (string for KEY FORMAT 'text', binary for 'bytes', struct for 'json')
    PARTITION = "partition"  # int
    OFFSET = "offset"  # bigint
    TIMESTAMP = "timestamp"  # timestamp (the record's, as the broker gives it)
    HEADERS = "headers"  # array<struct<key:string,value:binary>>


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


# --------------------------------------------------------------------------- objects


@dataclass(frozen=True)
class Column:
    """A column of a relation as Spark names it, with its Spark SQL type string."""

    name: str
    type: str  # Spark DDL type, lower case: 'bigint', 'timestamp', 'struct<a:int>', ...
    nullable: bool = True


@dataclass(frozen=True)
class AwsConnectionPlan:
    name: str
    access_key_id: str | SecretName | None = None
    secret_access_key: str | SecretName | None = None
    session_token: SecretName | str | None = None
    region: str | None = None
    endpoint: str | None = None
    assume_role_arn: str | None = None
    assume_role_session_name: str | None = None
    validate: bool = True
    kind: ClassVar[str] = "aws"

    @property
    def signing_region(self) -> str:
        return self.region or DEFAULT_REGION


@dataclass(frozen=True)
class GcsConnectionPlan:
    """CREATE CONNECTION g TO GCS (...): Google Cloud Storage credentials for ``gs://`` paths.

    No CREDENTIALS: Google's default credential chain, or anonymous access when ENDPOINT names
    an emulator (fake-gcs-server)."""

    name: str
    project: str | None = None
    credentials: SecretName | None = None  # a service-account key file's JSON
    endpoint: str | None = None  # 'http://127.0.0.1:4443' (an emulator), else Google's
    validate: bool = True
    kind: ClassVar[str] = "gcs"


@dataclass(frozen=True)
class AzureConnectionPlan:
    """CREATE CONNECTION a TO AZURE (...): Azure Blob Storage / ADLS Gen2 credentials for
    ``abfs://``, ``abfss://`` and ``wasb(s)://`` paths. No key or token: the default chain."""

    name: str
    account_name: str | None = None
    account_key: SecretName | None = None
    sas_token: SecretName | None = None
    endpoint: str | None = None  # 'http://127.0.0.1:10000/devstoreaccount1' (azurite), else Azure's
    validate: bool = True
    kind: ClassVar[str] = "azure"


# A connection holding object-store credentials (``icesql.engine.connections.stores`` maps each to FileIO
# properties): what ``AWS CONNECTION``, ``GCS CONNECTION`` and ``AZURE CONNECTION`` name.
StorageConnectionPlan = AwsConnectionPlan | GcsConnectionPlan | AzureConnectionPlan


@dataclass(frozen=True)
class KafkaConnectionPlan:
    """CREATE CONNECTION k TO KAFKA (...): the brokers and how to authenticate to them."""

    name: str
    brokers: tuple[str, ...]  # 'host:port', at least one
    security_protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl_mechanism: str | None = None  # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl_username: str | SecretName | None = None
    sasl_password: SecretName | None = None
    ssl_ca: str | SecretName | None = None  # SSL CERTIFICATE AUTHORITY (PEM)
    ssl_certificate: SecretName | None = None  # client certificate (PEM)
    ssl_key: SecretName | None = None  # client key (PEM)
    validate: bool = True
    kind: ClassVar[str] = "kafka"


@dataclass(frozen=True)
class KafkaInclude:
    """One ``INCLUDE`` item of a Kafka source: what it adds and the column's name."""

    what: KafkaMetadata
    name: str  # ``AS name``, else ``what.value``


@dataclass(frozen=True)
class KafkaSourceSpec:
    """What a ``FROM KAFKA CONNECTION k (...)`` source reads beyond the common source fields
    (FORMAT, SCHEMA, ON ERROR and MAX BYTES PER TRIGGER stay on ``SourcePlan``)."""

    connection: str  # the KAFKA connection
    topic: str
    start_offset: str = "earliest"  # 'earliest' | 'latest': where a new sink starts
    start_timestamp_ms: int | None = None  # START TIMESTAMP: the first offset at or after it
    envelope: KafkaEnvelope = KafkaEnvelope.NONE
    key_format: SourceFormat = SourceFormat.TEXT  # text | bytes | json
    key_schema: str | None = None  # KEY SCHEMA (Spark DDL) with KEY FORMAT = 'json'
    key_columns: tuple[Column, ...] = ()  # parsed from key_schema (or ('key', string/binary))
    include: tuple[KafkaInclude, ...] = ()
    max_records_per_trigger: int | None = None
    group_id: str | None = None  # CONSUMER GROUP: committed offsets for outside monitoring only
    # ON DATA LOSS: records retention deleted before the sink read them fail the sink ('fail'), or
    # are skipped with a warning naming the lost range and counted ('continue')
    on_data_loss: str = "fail"


@dataclass(frozen=True)
class CatalogConnectionPlan:
    name: str
    catalog_type: CatalogType
    uri: str | None = None
    warehouse: str | None = None
    auth: RestAuth = RestAuth.NONE
    user: str | None = None
    password: SecretName | None = None
    credential: SecretName | None = None  # OAuth2 'client_id:client_secret'
    token: SecretName | None = None
    oauth2_server_uri: str | None = None
    scope: str | None = None
    aws_connection: str | None = None
    # GCS CONNECTION = g / AZURE CONNECTION = a: the storage credentials of a gs:// or abfs://
    # warehouse (the AWS CONNECTION is both the catalog's AWS identity and its S3 storage)
    storage_connection: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    access_delegation: str | None = None  # 'vended-credentials'
    properties: tuple[tuple[str, str], ...] = ()  # passed through to the pyiceberg catalog
    validate: bool = True
    kind: ClassVar[str] = "iceberg_catalog"


@dataclass(frozen=True)
class SourcePlan:
    name: str
    source_kind: SourceKind
    path: str | None = None  # FILES: directory (or glob) watched for new files
    format: SourceFormat | None = None  # FILES only
    schema: str | None = None  # Spark DDL string as declared
    columns: tuple[Column, ...] = ()  # parsed from schema when declared
    header: bool = False  # csv
    rows_per_second: int | None = None  # GENERATOR
    total_rows: int | None = None  # GENERATOR: bounded when set
    max_files_per_trigger: int | None = None
    on_error: OnError = OnError.FAIL
    options: tuple[tuple[str, str], ...] = ()  # other reader options passed to Spark
    # FILES on object storage: the AWS connection whose keys, region and endpoint list and read it
    aws_connection: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    # FILES on gs:// or abfs://: the GCS or AZURE connection that lists and reads it
    storage_connection: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    max_bytes_per_trigger: int | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    # what becomes of a file once the batch that read it is committed: kept, moved, deleted
    clean_source: CleanSource = field(default=CleanSource.OFF, metadata=OMIT_AT_DEFAULT)
    archive_directory: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)  # CLEAN SOURCE = 'archive'
    # KAFKA: the topic and how its records become rows. ``columns`` then lists every column the
    # relation has, in order: the key columns (ENVELOPE UPSERT), the value's columns (SCHEMA;
    # ``value`` for FORMAT 'text' / 'bytes') and the INCLUDE columns
    kafka: KafkaSourceSpec | None = field(default=None, metadata=OMIT_AT_DEFAULT)


@dataclass(frozen=True)
class ViewPlan:
    name: str
    query: str  # Spark SQL, verbatim
    depends_on: tuple[str, ...] = ()  # icesql sources and views the query mentions


class Transform(enum.Enum):
    IDENTITY = "identity"
    BUCKET = "bucket"
    TRUNCATE = "truncate"
    YEAR = "year"
    MONTH = "month"
    DAY = "day"
    HOUR = "hour"
    VOID = "void"


@dataclass(frozen=True)
class PartitionFieldPlan:
    """A resolved partition field: canonical transform, its parameter, the source column."""

    source_column: str
    transform: Transform
    param: int | None = None  # N of bucket, W of truncate
    name: str = ""  # partition field name, Iceberg's convention: ts_day, id_bucket_16, region

    def describe(self) -> str:
        if self.param is not None:
            return f"{self.transform.value}({self.param}, {self.source_column})"
        if self.transform is Transform.IDENTITY:
            return self.source_column
        return f"{self.transform.value}({self.source_column})"


@dataclass(frozen=True)
class CommitPolicy:
    minimum_size: int | None = None  # bytes staged before a commit
    maximum_period: float | None = None  # seconds since the last commit

    def describe(self) -> str:
        if self.minimum_size is None and self.maximum_period is None:
            return "every micro-batch"
        parts = []
        if self.minimum_size is not None:
            parts.append(f"{self.minimum_size} bytes staged")
        if self.maximum_period is not None:
            parts.append(f"{self.maximum_period:g}s since the last commit")
        return " or ".join(parts)


@dataclass(frozen=True)
class MaintenancePolicy:
    """How a sink keeps its table healthy (``icesql.engine.maintenance``; README "Table maintenance").

    The first group are sink options; the rest are finer knobs with Iceberg's usual values.
    Durations are seconds, sizes bytes.
    """

    automatic: bool = True  # MAINTENANCE = 'auto' | 'off': the running sink maintains its table
    compaction: bool = True  # COMPACTION = 'auto' | 'off'
    compaction_minimum_files: int = 5  # COMPACTION MINIMUM FILES: small files merged this many at a time
    maximum_delete_files: int = 4  # MAXIMUM DELETE FILES: more, and the files they apply to are rewritten
    maximum_manifests: int = 32  # MAXIMUM MANIFESTS: more, and the small ones are merged
    snapshot_retention: float = 3600.0  # SNAPSHOT RETENTION: snapshots older than this expire ...
    keep_snapshots: int = 10  # KEEP SNAPSHOTS: ... but the newest this many are kept
    orphan_file_age: float = 86400.0  # ORPHAN FILE AGE: unreferenced files older than this are deleted
    target_file_size: int | None = None  # what compaction writes; None: the sink's MAXIMUM FILE SIZE
    small_file_ratio: float = 0.75  # a data file below this fraction of the target size is small
    delete_ratio: float = 0.3  # a data file with this fraction of its rows deleted is rewritten
    expire_every: float = 60.0  # seconds between two expirations of a running sink
    orphan_check_every: float = 3600.0  # seconds between two orphan-file cleanups of a running sink
    metadata_check_versions: int = 10  # metadata versions between two metadata cleanups of a running sink
    large_rewrite_bytes: int = 64 * 1024 * 1024  # a compaction reading more runs beside the sink
    expire_batch: int = 1000  # snapshots expired by one step at most

    def describe(self) -> str:
        if not self.automatic:
            return "off"
        compaction = (
            f"compaction ({self.compaction_minimum_files} small files at a time, "
            f"above {self.maximum_delete_files} delete files)"
            if self.compaction
            else "no compaction"
        )
        return (
            f"{compaction}, manifests merged above {self.maximum_manifests}, "
            f"snapshots kept {_span(self.snapshot_retention)} (at least {self.keep_snapshots}), "
            f"orphan files deleted after {_span(self.orphan_file_age)}"
        )


def _span(seconds: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= n and seconds % n == 0:
            return f"{seconds / n:g}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True)
class SinkPlan:
    name: str
    relation: str  # icesql source/view name, or a Spark table/view (dotted)
    catalog_connection: str
    namespace: tuple[str, ...]
    table: str
    aws_connection: str | None = None
    key: tuple[str, ...] = ()
    key_enforced: bool = True
    mode: SinkMode = SinkMode.APPEND
    partition_by: tuple[PartitionFieldPlan, ...] = ()
    # FORMAT: 'parquet' | 'orc' | 'avro' (DATA_FILE_FORMATS). None: the sink did not say, and
    # the engine writes the table's ``write.format.default`` (Parquet for a table icesql
    # creates). Left out of the JSON form at None; a stored "format": "parquet" still loads.
    format: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    commit: CommitPolicy = field(default_factory=CommitPolicy)
    maximum_file_size: int = DEFAULT_MAXIMUM_FILE_SIZE
    format_version: int = 2
    properties: tuple[tuple[str, str], ...] = ()
    on_error: OnError = OnError.FAIL
    columns: tuple[Column, ...] = ()  # source columns when known at analysis time
    # MODE UPSERT: how replaced rows are deleted (left out of the JSON form at its default)
    delete_mode: DeleteMode = field(default=DeleteMode.POSITION, metadata=OMIT_AT_DEFAULT)
    # added after sinks were first stored: left out of the JSON form at its default, so stored
    # definitions (and golden plans) read as they were
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy, metadata=OMIT_AT_DEFAULT)
    # SCHEMA EVOLUTION = 'auto': columns the rows bring are added to the table (and allowed
    # widenings applied) before the rows are committed; 'off': the sink stops instead
    schema_evolution: bool = field(default=True, metadata=OMIT_AT_DEFAULT)
    # ON ERROR = 'dead-letter': DEAD LETTER TABLE = 'ns.t' as (namespace..., table); empty: the
    # target's name + ``_dead_letters`` in the target's namespace
    dead_letter_table: tuple[str, ...] = field(default=(), metadata=OMIT_AT_DEFAULT)
    # USING GCS CONNECTION g / USING AZURE CONNECTION a: the storage credentials the sink writes
    # a gs:// or abfs:// table's files with (USING AWS CONNECTION stays in ``aws_connection``)
    storage_connection: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)

    @property
    def table_identifier(self) -> str:
        return ".".join((*self.namespace, self.table))

    @property
    def dead_letter_identifier(self) -> tuple[str, ...]:
        """The dead-letter table of ``ON ERROR = 'dead-letter'``, as (namespace..., table)."""
        return self.dead_letter_table or (*self.namespace, f"{self.table}_dead_letters")


# --------------------------------------------------------------------------- statement plans


# what CREATE CONNECTION/SOURCE/VIEW/SINK defines (and the catalog store keeps)
ObjectPlan = (
    StorageConnectionPlan | KafkaConnectionPlan | CatalogConnectionPlan | SourcePlan | ViewPlan | SinkPlan
)


@dataclass(frozen=True)
class CreateSecretPlan:
    name: str
    value: Redacted
    if_not_exists: bool = False
    replace: bool = False  # ALTER SECRET


@dataclass(frozen=True)
class CreateObjectPlan:
    """CREATE CONNECTION/SOURCE/VIEW/SINK: the definition plus what it depends on."""

    definition: ObjectPlan
    sql: str  # canonical CREATE statement (secret values never appear in it)
    dependencies: tuple[tuple[str, str], ...] = ()  # (kind, name): 'secret'/'connection'/...
    if_not_exists: bool = False
    # A secret written as a plain string where a SECRET is expected (the design doc's
    # SECRET ACCESS KEY = '...'): the session stores it as a hidden secret under this name,
    # the definition refers to it by SecretName, and ``sql`` shows it as '********'.
    inline_secrets: tuple[tuple[str, Redacted], ...] = ()
    # CREATE OR REPLACE VIEW: an existing view of that name is replaced (its sinks restart)
    replace: bool = field(default=False, metadata=OMIT_AT_DEFAULT)


@dataclass(frozen=True)
class AlterSourcePlan:
    """ALTER SOURCE name SET (SCHEMA = '...')."""

    name: str
    definition: SourcePlan  # the source's definition after the change


@dataclass(frozen=True)
class AlterSinkPlan:
    name: str
    definition: SinkPlan  # the sink's definition after the change
    sql: str


@dataclass(frozen=True)
class DropPlan:
    kind: str  # 'secret' | 'connection' | 'source' | 'view' | 'sink'
    name: str
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True)
class ShowPlan:
    kind: str  # plural listing: 'secrets', 'connections', ...


@dataclass(frozen=True)
class ShowCreatePlan:
    kind: str
    name: str


@dataclass(frozen=True)
class ShowSinkStatusPlan:
    name: str | None = None


@dataclass(frozen=True)
class DescribePlan:
    name: str


@dataclass(frozen=True)
class ExplainPlan:
    sink: SinkPlan


@dataclass(frozen=True)
class ValidateConnectionPlan:
    name: str


@dataclass(frozen=True)
class FlushSinkPlan:
    name: str | None = None


@dataclass(frozen=True)
class TableRef:
    """An Iceberg table a SELECT reads (``connection.namespace.table`` in its text), at the
    current snapshot or travelled to ``snapshot_id`` / ``as_of`` (an ISO timestamp)."""

    alias: str  # the temporary view the query reads it through
    connection: str
    namespace: tuple[str, ...]
    table: str
    snapshot_id: int | None = None
    as_of: str | None = None  # as written
    as_of_ms: int | None = None  # the same, milliseconds since the epoch
    start: int = 0  # the name (and its time travel clause) in the source text
    end: int = 0

    @property
    def identifier(self) -> str:
        return ".".join((self.connection, *self.namespace, self.table))


@dataclass(frozen=True)
class SelectPlan:
    """A bounded query: ``sql`` is the Spark SQL to run, each table reference replaced by the
    alias its rows are registered under; ``edits`` map it back to the source text
    ((sql start, sql end, source start, source end), in order) so that Spark's errors point at
    the statement; ``base`` is the source offset of ``sql``'s character ``head``."""

    sql: str
    relations: tuple[str, ...] = ()  # icesql sources and views read
    tables: tuple[TableRef, ...] = ()
    limit: int | None = None  # the LIMIT added when the query has none
    head: int = 0
    base: int = 0
    edits: tuple[tuple[int, int, int, int], ...] = ()

    def source_offset(self, pos: int) -> int:
        """The source offset of ``sql[pos]``."""
        shift = self.base - self.head
        for s0, s1, o0, o1 in self.edits:
            if pos < s0:
                break
            if pos < s1:
                return o0
            shift = o1 - s1
        return max(self.base, pos + shift)


@dataclass(frozen=True)
class ExplainSelectPlan:
    """``EXPLAIN SELECT``: the query analysed as a SELECT is; the engine says which path
    would answer it and why, without running it."""

    select: SelectPlan


@dataclass(frozen=True)
class ShowTablesPlan:
    connection: str
    namespace: tuple[str, ...] = ()


@dataclass(frozen=True)
class DescribeTablePlan:
    connection: str
    namespace: tuple[str, ...]
    table: str


@dataclass(frozen=True)
class ShowSnapshotsPlan:
    sink: str


StatementPlan = (
    CreateSecretPlan
    | CreateObjectPlan
    | AlterSourcePlan
    | AlterSinkPlan
    | DropPlan
    | ShowPlan
    | ShowCreatePlan
    | ShowSinkStatusPlan
    | DescribePlan
    | ExplainPlan
    | ExplainSelectPlan
    | ValidateConnectionPlan
    | FlushSinkPlan
    | SelectPlan
    | ShowTablesPlan
    | DescribeTablePlan
    | ShowSnapshotsPlan
)


# --------------------------------------------------------------------------- JSON form

_PLAN_TYPES: dict[str, type[Any]] = {
    t.__name__: t
    for t in (
        AwsConnectionPlan,
        GcsConnectionPlan,
        AzureConnectionPlan,
        KafkaConnectionPlan,
        KafkaInclude,
        KafkaSourceSpec,
        CatalogConnectionPlan,
        SourcePlan,
        ViewPlan,
        SinkPlan,
        PartitionFieldPlan,
        CommitPolicy,
        MaintenancePolicy,
        Column,
        SecretName,
    )
}
_ENUMS: dict[str, type[enum.Enum]] = {
    t.__name__: t
    for t in (
        CatalogType,
        RestAuth,
        SourceFormat,
        SourceKind,
        SinkMode,
        OnError,
        CleanSource,
        KafkaEnvelope,
        KafkaMetadata,
        Transform,
        DeleteMode,
    )
}


def to_dict(obj: Any) -> Any:
    """JSON-ready form of a plan; tagged so ``plan_from_dict`` can rebuild it exactly."""
    if isinstance(obj, Redacted):
        raise TypeError("a secret value is never serialised with a plan")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {"$type": type(obj).__name__}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.metadata.get("omit_at_default") and value == _default(f):
                continue
            out[f.name] = to_dict(value)
        return out
    if isinstance(obj, enum.Enum):
        return {"$enum": type(obj).__name__, "value": obj.value}
    if isinstance(obj, tuple):
        return [to_dict(x) for x in obj]
    return obj


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def plan_from_dict(data: Any) -> Any:
    """Inverse of ``to_dict``."""
    if isinstance(data, dict):
        if "$enum" in data:
            return _ENUMS[data["$enum"]](data["value"])
        if "$type" in data:
            cls = _PLAN_TYPES[data["$type"]]
            kwargs = {k: plan_from_dict(v) for k, v in data.items() if k != "$type"}
            return cls(**kwargs)
        return {k: plan_from_dict(v) for k, v in data.items()}
    if isinstance(data, list):
        return tuple(plan_from_dict(x) for x in data)
    return data
