"""What CREATE CONNECTION / SOURCE / VIEW / SINK define: the object plans the catalog store keeps.

One frozen dataclass per kind of object (and the parts they are made of: columns, partition
fields, policies). Each is stored as JSON through ``plan_json``; a field added after objects
were first stored carries ``OMIT_AT_DEFAULT``, so stored definitions (and golden plans) read as
they were. Options that take a secret hold a ``SecretName``, never a value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from icesql.plan_vocabulary import (
    DEFAULT_MAXIMUM_FILE_SIZE,
    DEFAULT_REGION,
    OMIT_AT_DEFAULT,
    CatalogType,
    CleanSource,
    DeleteMode,
    KafkaEnvelope,
    KafkaMetadata,
    OnError,
    RestAuth,
    SecretName,
    SinkMode,
    SourceFormat,
    SourceKind,
    Transform,
)


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
class SchemaRegistryConnectionPlan:
    """CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (...): where a registry is and how to
    authenticate to it (HTTP basic; Confluent Cloud's API key and secret are USERNAME/PASSWORD)."""

    name: str
    url: str  # 'https://registry.example.com:8081', without credentials
    username: str | SecretName | None = None
    password: SecretName | None = None
    ssl_ca: str | SecretName | None = None  # SSL CERTIFICATE AUTHORITY (PEM)
    validate: bool = True
    kind: ClassVar[str] = "schema_registry"


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
    topic: str  # TOPIC; '' for a source of many topics (``topics`` or ``topic_pattern``)
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
    # A Confluent Schema Registry (FORMAT AVRO | PROTOBUF | JSON USING CONFLUENT SCHEMA REGISTRY
    # CONNECTION csr): the connection's name, and the registry's type of each half's schema
    # ('AVRO' | 'PROTOBUF' | 'JSON'; None: that half is not read through the registry)
    registry: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    value_schema_type: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    key_schema_type: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    # SUBJECT NAME STRATEGY: 'topic' (<topic>-value), 'record' (<record name>) or 'topic_record'
    # (<topic>-<record name>), with RECORD NAME / KEY RECORD NAME for the last two
    subject_name_strategy: str = field(default="topic", metadata=OMIT_AT_DEFAULT)
    value_record_name: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    key_record_name: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    # Many topics, one source: TOPICS (a list) or TOPIC PATTERN (every topic whose whole name the
    # regular expression matches, Python's ``re.fullmatch``), listed again every
    # ``topic_refresh`` seconds (TOPIC METADATA REFRESH INTERVAL; None: the engine's default)
    topics: tuple[str, ...] = field(default=(), metadata=OMIT_AT_DEFAULT)
    topic_pattern: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    topic_refresh: float | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    # The subject each half's schema is registered under (VALUE SUBJECT / KEY SUBJECT, else the
    # strategy's), and the schema captured at CREATE SOURCE: the subject's latest version then.
    # Rows are read as this schema (the reader schema); records written with another version of
    # it are resolved to it. ``*_referenced`` holds the schemas it imports, transitively, as
    # (reference name, schema text)
    value_subject: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    value_schema_id: int | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    value_schema_version: int | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    value_schema: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    value_referenced: tuple[tuple[str, str], ...] = field(default=(), metadata=OMIT_AT_DEFAULT)
    key_subject: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    key_schema_id: int | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    key_schema_version: int | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    key_schema_text: str | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    key_referenced: tuple[tuple[str, str], ...] = field(default=(), metadata=OMIT_AT_DEFAULT)

    @property
    def many_topics(self) -> bool:
        """TOPICS or TOPIC PATTERN (a TOPICS list of one included): records carry their topic, and
        the offsets are kept per topic (Spark's Kafka source's form)."""
        return bool(self.topics) or self.topic_pattern is not None

    @property
    def schema_per_topic(self) -> bool:
        """A registry source of many topics whose values are read each with its own writer schema
        (its schema id), no source-level schema: Debezium's one subject per topic (issue 53). Its
        relation is the records whole, for a routed sink to decode per table."""
        return self.registry is not None and self.value_schema_type is not None and self.value_subject is None

    def describe_topics(self) -> str:
        return describe_topics(self.topic, self.topics, self.topic_pattern)


def describe_topics(topic: str | None, topics: tuple[str, ...], pattern: str | None) -> str:
    """What a Kafka source reads, for messages: "topic 'a'", "topics 'a', 'b'", "the topics
    matching 'x'"."""
    if pattern is not None:
        return f"the topics matching '{pattern}'"
    if topics:
        return "topics " + ", ".join(f"'{t}'" for t in topics)
    return f"topic '{topic}'"


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
    def routed(self) -> bool:
        """One sink, many tables: TABLE is a template (``icesql.routing``) filled per record."""
        from icesql.routing import is_template

        return is_template(self.table)

    @property
    def dead_letter_identifier(self) -> tuple[str, ...]:
        """The dead-letter table of ``ON ERROR = 'dead-letter'``, as (namespace..., table); a
        routed sink's (one for all its tables) is named after the sink."""
        base = self.name if self.routed else self.table
        return self.dead_letter_table or (*self.namespace, f"{base}_dead_letters")



# what CREATE CONNECTION/SOURCE/VIEW/SINK defines (and the catalog store keeps)
ObjectPlan = (
    StorageConnectionPlan
    | KafkaConnectionPlan
    | SchemaRegistryConnectionPlan
    | CatalogConnectionPlan
    | SourcePlan
    | ViewPlan
    | SinkPlan
)
