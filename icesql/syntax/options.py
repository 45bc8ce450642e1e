"""Every option of the dialect, as data: names, aliases, value kinds, and which hold secrets.

The grammar parses option lists generically (``NAME WORDS = value``); what each list accepts is
declared here, once. The analyzer builds its checking tables from these declarations
(``icesql.analyzer.options.OptionTable``), the shell its completions, and the syntax layer its
secret redaction: a parse error must already be masked when the parser raises it, and the
syntax layer may not import the analyzer (imports point down the pipeline), so the facts live
at the bottom, here, and ``secrecy`` is the one rule for "this option holds a secret" that the
printer, the redactor of errors and the shell history all apply.

Pure data and small functions; imports nothing from icesql.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass


class Kind(enum.Enum):
    """What kind of value an option takes."""

    STRING = "a string"
    INT = "an integer"
    BOOL = "true or false"
    SECRET = "SECRET name"  # a plain string is accepted with a warning and stored as a hidden secret
    STRING_OR_SECRET = "a string or SECRET name"  # e.g. ACCESS KEY ID, not itself a secret
    CONNECTION = "a connection name"
    LIST = "a parenthesised option list"
    SIZE = "a size"
    DURATION = "a duration"
    STRINGS = "a string or a list of strings"  # BROKERS = ('h1:9092', 'h2:9092')
    TIMESTAMP = "a timestamp ('2026-01-01T00:00:00Z') or milliseconds since the epoch"


@dataclass(frozen=True)
class OptionSpec:
    name: str
    kind: Kind
    aliases: tuple[str, ...] = ()
    # discriminator values (catalog type, source format) the option applies to; None: all
    applies: frozenset[str] | None = None
    # for enumerated strings: accepted spelling (lower case) -> canonical value
    choices: Mapping[str, str] | None = None
    secret: bool = False  # value must be masked wherever it could show
    # Kind.SECRET: a plain string is accepted with a warning and kept as a hidden secret (the
    # design document writes SECRET ACCESS KEY = '...'); False: only SECRET name is accepted
    inline: bool = True

    @property
    def all_names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def takes_secret(self) -> bool:
        """``= SECRET name`` fits (and so does the ``NAME SECRET = name`` spelling)."""
        return self.kind in (Kind.SECRET, Kind.STRING_OR_SECRET)


S = Kind.STRING

# --------------------------------------------------------------------------- connections

AWS = (
    OptionSpec("ACCESS KEY ID", Kind.STRING_OR_SECRET),
    OptionSpec("SECRET ACCESS KEY", Kind.SECRET, secret=True),
    OptionSpec("SESSION TOKEN", Kind.SECRET, secret=True),
    OptionSpec("REGION", S),
    OptionSpec("ENDPOINT", S, aliases=("ENDPOINT URL",)),
    OptionSpec("ASSUME ROLE ARN", S),
    OptionSpec("ASSUME ROLE SESSION NAME", S),
)

# Google Cloud Storage (gs://). No CREDENTIALS: Google's default chain, or anonymous access
# when ENDPOINT names an emulator. CREDENTIALS is a service-account key file's JSON.
GCS = (
    OptionSpec("PROJECT", S, aliases=("PROJECT ID",)),
    OptionSpec("CREDENTIALS", Kind.SECRET, secret=True),
    OptionSpec("ENDPOINT", S, aliases=("ENDPOINT URL",)),
)

# Azure Blob Storage / ADLS Gen2 (abfs[s]://, wasb[s]://): an account key or a SAS token, or
# neither (the default chain).
AZURE = (
    OptionSpec("ACCOUNT NAME", S),
    OptionSpec("ACCOUNT KEY", Kind.SECRET, secret=True),
    OptionSpec("SAS TOKEN", Kind.SECRET, secret=True),
    OptionSpec("ENDPOINT", S, aliases=("ENDPOINT URL",)),
)


@dataclass(frozen=True)
class StorageKind:
    """A kind of connection that holds object-store credentials, one entry per keyword.

    The keyword names the kind everywhere it is written: ``CREATE CONNECTION c TO GCS (...)``,
    a sink's ``USING GCS CONNECTION c``, a catalog's or FILES source's ``GCS CONNECTION = c``.
    """

    keyword: str  # AWS | GCS | AZURE (and ``ConnectionKind``'s member name)
    list_kind: str  # its CREATE CONNECTION option list, a key of ``LISTS``
    store: str  # how messages name the storage
    schemes: tuple[str, ...]  # URL schemes of the paths it reads and writes, lower case
    url: str  # what messages call such a path: "an s3:// URL"
    example: str  # a path on it, for hints
    # catalog types whose ``<keyword> CONNECTION`` option it is
    catalog_types: frozenset[str]
    # words people call this storage by where the keyword belongs (``USING S3 CONNECTION``)
    other_names: tuple[str, ...] = ()

    @property
    def option(self) -> str:
        """The option naming such a connection (``GCS CONNECTION``)."""
        return f"{self.keyword} CONNECTION"

    def holds(self, path: str) -> bool:
        """Whether ``path`` is a URL on this storage."""
        scheme, sep, _ = path.partition("://")
        return bool(sep) and scheme.lower() in self.schemes


_GENERIC_CATALOGS = frozenset({"sql", "rest", "glue", "hive"})

STORAGE_KINDS = (
    StorageKind(
        "AWS", "aws", "S3", ("s3", "s3a", "s3n"), "an s3:// URL", "s3://bucket/prefix/",
        frozenset({"rest", "s3tables", "glue"}), ("S3", "S3A", "MINIO"),
    ),
    StorageKind(
        "GCS", "gcs", "Google Cloud Storage", ("gs",), "a gs:// URL", "gs://bucket/prefix/",
        _GENERIC_CATALOGS, ("GS", "GCP", "GOOGLE"),
    ),
    StorageKind(
        "AZURE", "azure", "Azure storage", ("abfs", "abfss", "wasb", "wasbs"),
        "an abfs://, abfss://, wasb:// or wasbs:// URL",
        "abfss://container@account.dfs.core.windows.net/prefix/", _GENERIC_CATALOGS,
        ("ADLS", "ABFS", "ABFSS", "WASB", "WASBS", "BLOB"),
    ),
)
STORAGE: dict[str, StorageKind] = {s.keyword: s for s in STORAGE_KINDS}


def storage_of(path: str) -> StorageKind | None:
    """The storage a path is a URL on (None: a local path, or a URL of another scheme)."""
    return next((s for s in STORAGE_KINDS if s.holds(path)), None)


def storage_named(word: str) -> StorageKind | None:
    """The storage ``word`` (upper case) is another name of: ``S3`` is AWS, ``ADLS`` AZURE."""
    return next((s for s in STORAGE_KINDS if word in s.other_names), None)


CONNECTION_WITH = (OptionSpec("VALIDATE", Kind.BOOL),)

CATALOG_TYPES: dict[str, str] = {
    "local": "local",
    "sql": "sql",
    "rest": "rest",
    "s3tables": "s3tables",
    "s3table": "s3tables",  # the design document's spelling
    "s3tablesrest": "s3tables",  # Materialize's
    "glue": "glue",
    "hive": "hive",
}

_REST = frozenset({"rest"})

ICEBERG_CATALOG = (
    OptionSpec("TYPE", S, aliases=("CATALOG TYPE",), choices=CATALOG_TYPES),
    OptionSpec("URI", S, aliases=("URL",), applies=frozenset({"rest", "s3tables", "sql", "hive", "glue"})),
    OptionSpec("WAREHOUSE", S),
    OptionSpec("USER", S, aliases=("USERNAME",), applies=_REST),
    OptionSpec("PASSWORD", Kind.SECRET, applies=_REST, secret=True),
    OptionSpec("AUTH", S, applies=_REST, choices={"oauth2": "oauth2", "basic": "basic"}),
    OptionSpec("CREDENTIAL", Kind.SECRET, applies=_REST, secret=True),
    OptionSpec("TOKEN", Kind.SECRET, applies=_REST, secret=True),
    OptionSpec("OAUTH2 SERVER URL", S, aliases=("OAUTH2 SERVER URI",), applies=_REST),
    OptionSpec("SCOPE", S, applies=_REST),
    # AWS CONNECTION (the catalog's AWS identity and S3 storage), GCS CONNECTION, AZURE CONNECTION
    *(OptionSpec(s.option, Kind.CONNECTION, applies=s.catalog_types) for s in STORAGE_KINDS),
    OptionSpec(
        "ACCESS DELEGATION",
        S,
        applies=frozenset({"rest", "s3tables"}),
        choices={"vended-credentials": "vended-credentials", "remote-signing": "remote-signing"},
    ),
    # passed through to pyiceberg, where credentials could hide: masked whole
    OptionSpec("PROPERTIES", Kind.LIST, secret=True),
)

# Kafka (Materialize's option names). Secret material must be a SECRET: unlike the AWS keys no
# design-document example writes it inline, and Materialize refuses a string there too.
SECURITY_PROTOCOLS: dict[str, str] = {
    "plaintext": "PLAINTEXT",
    "ssl": "SSL",
    "sasl_plaintext": "SASL_PLAINTEXT",
    "sasl_ssl": "SASL_SSL",
}
SASL_MECHANISMS: dict[str, str] = {
    "plain": "PLAIN",
    "scram-sha-256": "SCRAM-SHA-256",
    "scram-sha-512": "SCRAM-SHA-512",
}

KAFKA = (
    OptionSpec("BROKER", Kind.STRINGS, aliases=("BROKERS",)),
    OptionSpec("SECURITY PROTOCOL", S, choices=SECURITY_PROTOCOLS),
    OptionSpec("SASL MECHANISMS", S, aliases=("SASL MECHANISM",), choices=SASL_MECHANISMS),
    OptionSpec("SASL USERNAME", Kind.STRING_OR_SECRET),
    OptionSpec("SASL PASSWORD", Kind.SECRET, secret=True, inline=False),
    OptionSpec("SSL CERTIFICATE AUTHORITY", Kind.STRING_OR_SECRET),
    OptionSpec("SSL CERTIFICATE", Kind.SECRET, secret=True, inline=False),
    OptionSpec("SSL KEY", Kind.SECRET, secret=True, inline=False),
)

# Confluent Schema Registry (Materialize's option names; Confluent Cloud's API key and secret are
# USERNAME and PASSWORD). The password must be a SECRET, as Kafka's SASL PASSWORD.
SCHEMA_REGISTRY = (
    OptionSpec("URL", S, aliases=("URI",)),
    OptionSpec("USERNAME", Kind.STRING_OR_SECRET, aliases=("USER",)),
    OptionSpec("PASSWORD", Kind.SECRET, secret=True, inline=False),
    OptionSpec("SSL CERTIFICATE AUTHORITY", Kind.STRING_OR_SECRET),
)

# --------------------------------------------------------------------------- sources

SOURCE_FORMATS: dict[str, str] = {
    "json": "json",
    "csv": "csv",
    "parquet": "parquet",
    "orc": "orc",
    "debezium-json": "debezium-json",
}
ON_ERROR: dict[str, str] = {"fail": "fail", "skip": "skip", "dead-letter": "dead-letter"}
CLEAN_SOURCE: dict[str, str] = {"off": "off", "archive": "archive", "delete": "delete"}

TEXT_FORMATS = frozenset({"json", "csv", "debezium-json"})
CSV = frozenset({"csv"})
FILE_FORMATS = frozenset(SOURCE_FORMATS.values())
GENERATOR = frozenset({"generator"})

# Options a FILES source hands to Spark's reader (the analyzer knows Spark's names for them).
READER = (
    OptionSpec("DELIMITER", S, aliases=("SEP",), applies=CSV),
    OptionSpec("QUOTE", S, applies=CSV),
    OptionSpec("ESCAPE", S, applies=CSV),
    OptionSpec("NULL VALUE", S, applies=CSV),
    OptionSpec("MULTILINE", Kind.BOOL, applies=TEXT_FORMATS),
    OptionSpec("ENCODING", S, applies=TEXT_FORMATS),
    OptionSpec("TIMESTAMP FORMAT", S, applies=TEXT_FORMATS),
    OptionSpec("DATE FORMAT", S, applies=TEXT_FORMATS),
    OptionSpec("RECURSIVE", Kind.BOOL, applies=FILE_FORMATS),
    OptionSpec("PATH GLOB FILTER", S, applies=FILE_FORMATS),
)

SOURCE = (
    OptionSpec("FORMAT", S, choices=SOURCE_FORMATS, applies=FILE_FORMATS),
    OptionSpec("SCHEMA", S),
    OptionSpec("HEADER", Kind.BOOL, applies=CSV),
    OptionSpec("ON ERROR", S, choices=ON_ERROR, applies=FILE_FORMATS),
    OptionSpec("MAX FILES PER TRIGGER", Kind.INT, applies=FILE_FORMATS),
    OptionSpec("MAX BYTES PER TRIGGER", Kind.SIZE, applies=FILE_FORMATS),
    OptionSpec("CLEAN SOURCE", S, choices=CLEAN_SOURCE, applies=FILE_FORMATS),
    OptionSpec("ARCHIVE DIRECTORY", S, applies=FILE_FORMATS),
    *READER,
    OptionSpec("OPTIONS", Kind.LIST, applies=FILE_FORMATS),  # Spark reader options passed as they are
    # AWS CONNECTION for s3:// paths, GCS CONNECTION for gs://, AZURE CONNECTION for abfs[s]://, wasb[s]://
    *(OptionSpec(s.option, Kind.CONNECTION, applies=FILE_FORMATS) for s in STORAGE_KINDS),
    OptionSpec("ROWS PER SECOND", Kind.INT, applies=GENERATOR),
    OptionSpec("TOTAL ROWS", Kind.INT, applies=GENERATOR),
)

# A Kafka source's values (and keys): FILES formats but parquet, plus the raw text and bytes.
KAFKA_FORMATS: dict[str, str] = {
    "json": "json",
    "csv": "csv",
    "text": "text",
    "bytes": "bytes",
    "debezium-json": "debezium-json",
}
KEY_FORMATS: dict[str, str] = {"text": "text", "bytes": "bytes", "json": "json"}
# Formats whose schemas come from a Confluent Schema Registry (SCHEMA REGISTRY = csr); 'json' with a
# registry is JSON Schema. The registry's own name of each type (``schemaType``).
REGISTRY_FORMATS: dict[str, str] = {"avro": "AVRO", "protobuf": "PROTOBUF", "json": "JSON"}
# SUBJECT NAME STRATEGY: Confluent's TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy
SUBJECT_STRATEGIES: dict[str, str] = {
    "topic": "topic",
    "record": "record",
    "topic_record": "topic_record",
    "topicnamestrategy": "topic",
    "recordnamestrategy": "record",
    "topicrecordnamestrategy": "topic_record",
}

KAFKA_SOURCE = (
    OptionSpec("TOPIC", S),
    # many topics, one source (one of TOPIC, TOPICS, TOPIC PATTERN): a list, or every topic whose
    # whole name matches a regular expression; the topics are listed again every refresh interval
    # (Materialize's TOPIC METADATA REFRESH INTERVAL)
    OptionSpec("TOPICS", Kind.STRINGS),
    OptionSpec("TOPIC PATTERN", S),
    OptionSpec("TOPIC METADATA REFRESH INTERVAL", Kind.DURATION, aliases=("TOPIC REFRESH",)),
    OptionSpec("FORMAT", S, choices={**KAFKA_FORMATS, "avro": "avro", "protobuf": "protobuf"}, aliases=("VALUE FORMAT",)),
    OptionSpec("SCHEMA", S),
    OptionSpec("HEADER", Kind.BOOL, applies=CSV),
    OptionSpec("START OFFSET", S, choices={"earliest": "earliest", "latest": "latest"}),
    OptionSpec("START TIMESTAMP", Kind.TIMESTAMP),
    OptionSpec("ENVELOPE", S, choices={"none": "none", "upsert": "upsert", "debezium": "debezium"}),
    OptionSpec("KEY FORMAT", S, choices={**KEY_FORMATS, "avro": "avro", "protobuf": "protobuf"}),
    OptionSpec("KEY SCHEMA", S),
    OptionSpec("MAX RECORDS PER TRIGGER", Kind.INT),
    OptionSpec("MAX BYTES PER TRIGGER", Kind.SIZE),
    OptionSpec("ON ERROR", S, choices=ON_ERROR),
    OptionSpec("ON DATA LOSS", S, choices={"fail": "fail", "continue": "continue"}),
    OptionSpec("CONSUMER GROUP", S, aliases=("GROUP ID",)),
    # the schemas of FORMAT / KEY FORMAT 'avro' | 'protobuf' | 'json' from a registry
    OptionSpec("SCHEMA REGISTRY", Kind.CONNECTION, aliases=("SCHEMA REGISTRY CONNECTION",)),
    OptionSpec("VALUE SUBJECT", S),
    OptionSpec("KEY SUBJECT", S),
    OptionSpec("SUBJECT NAME STRATEGY", S, choices=SUBJECT_STRATEGIES),
    OptionSpec("RECORD NAME", S, aliases=("VALUE RECORD NAME",)),
    OptionSpec("KEY RECORD NAME", S),
)

# --------------------------------------------------------------------------- sinks

COMMIT = (
    OptionSpec("MINIMUM SIZE", Kind.SIZE),
    OptionSpec("MAXIMUM PERIOD", Kind.DURATION, aliases=("COMMIT INTERVAL",)),
    OptionSpec("MAXIMUM FILE SIZE", Kind.SIZE),
)

_SWITCH: dict[str, str] = {"auto": "auto", "on": "auto", "off": "off"}

# Table maintenance by the running sink (icesql.analyzer.maintenance turns them into a policy).
MAINTENANCE = (
    OptionSpec("MAINTENANCE", S, choices=_SWITCH),
    OptionSpec("COMPACTION", S, choices=_SWITCH),
    OptionSpec("COMPACTION MINIMUM FILES", Kind.INT),
    OptionSpec("MAXIMUM DELETE FILES", Kind.INT),
    OptionSpec("MAXIMUM MANIFESTS", Kind.INT),
    OptionSpec("SNAPSHOT RETENTION", Kind.DURATION),
    OptionSpec("KEEP SNAPSHOTS", Kind.INT),
    OptionSpec("ORPHAN FILE AGE", Kind.DURATION),
)

SINK = (
    OptionSpec("FORMAT", S),
    *COMMIT,
    OptionSpec("FORMAT VERSION", Kind.INT),
    OptionSpec("PROPERTIES", Kind.LIST),
    OptionSpec("ON ERROR", S, choices=ON_ERROR),
    OptionSpec("DEAD LETTER TABLE", S),  # ON ERROR = 'dead-letter': where bad records go
    # MODE UPSERT: rows replaced are deleted by position (the key index) or by equality on KEY
    OptionSpec("DELETE MODE", S, choices={"position": "position", "equality": "equality"}),
    OptionSpec("SCHEMA EVOLUTION", S, choices=_SWITCH),
    *MAINTENANCE,
)

SINK_TARGET = (OptionSpec("NAMESPACE", S), OptionSpec("TABLE", S))

ALTER_SINK = (*COMMIT, OptionSpec("FORMAT VERSION", Kind.INT), *MAINTENANCE)  # FORMAT VERSION: upgrade to 3

ALTER_SOURCE = (OptionSpec("SCHEMA", S),)  # the declared schema of a FILES source

# --------------------------------------------------------------------------- the lists

# Each option list of the dialect, by the name the syntax layer, the analyzer and the shell use.
LISTS: dict[str, tuple[OptionSpec, ...]] = {
    "aws": AWS,
    "gcs": GCS,
    "azure": AZURE,
    "iceberg_catalog": ICEBERG_CATALOG,
    "kafka": KAFKA,
    "schema_registry": SCHEMA_REGISTRY,
    "connection_with": CONNECTION_WITH,
    "source": SOURCE,
    "kafka_source": KAFKA_SOURCE,
    "sink_target": SINK_TARGET,
    "sink": SINK,
    "alter_sink": ALTER_SINK,
    "alter_source": ALTER_SOURCE,
}

# Lists where an option nobody knows may be a credential mistyped (``PASWORD = '...'``): its
# value is masked too. Elsewhere an unknown option is masked only when its name says secret.
CREDENTIAL_LISTS = frozenset(
    {*(s.list_kind for s in STORAGE_KINDS), "iceberg_catalog", "kafka", "schema_registry"}
)

# Words that make an option (or a property key) secret whatever list it is in.
SECRET_WORDS = ("SECRET", "PASSWORD", "TOKEN", "CREDENTIAL")


class Secrecy(enum.Enum):
    """How an option's value must be treated wherever it could be shown."""

    NONE = "shown"
    VALUE = "the value is a secret"  # masked whatever it is (a ``SECRET name`` reference excepted)
    NAME = "the value names a secret"  # ``PASSWORD SECRET = name``: only a literal there is masked


def _index(specs: tuple[OptionSpec, ...]) -> dict[str, OptionSpec]:
    return {n: s for s in specs for n in s.all_names}


_BY_NAME: dict[str, dict[str, OptionSpec]] = {kind: _index(specs) for kind, specs in LISTS.items()}


def lookup(list_kind: str, name: str) -> tuple[OptionSpec | None, bool]:
    """(spec, secret_form) of ``name`` in a list: ``PASSWORD SECRET = x`` is ``PASSWORD = SECRET x``."""
    by_name = _BY_NAME.get(list_kind, {})
    spec = by_name.get(name)
    if spec is not None:
        return spec, False
    if name.endswith(" SECRET"):
        base = by_name.get(name[: -len(" SECRET")])
        if base is not None and base.takes_secret:
            return base, True
    return None, False


# Names that hold a secret without a secret word in them: ACCOUNT KEY (and pyiceberg's
# 'adls.account-key'), SSL KEY, a private key.
_SECRET_KEY = re.compile(r"(?:ACCOUNT|SSL|PRIVATE)[\s_.-]*KEY", re.IGNORECASE)


def mentions_secret(text: str) -> bool:
    """Whether a name (an option's, a property key) or a piece of text says it holds a secret."""
    upper = text.upper()
    return any(w in upper for w in SECRET_WORDS) or _SECRET_KEY.search(text) is not None


def secrecy(list_kind: str | None, name: str, *, key_is_string: bool = False) -> Secrecy:
    """The one rule for whether the value of option ``name`` in ``list_kind`` is secret.

    ``list_kind`` is a key of ``LISTS``, or None when it cannot be told (a statement whose head
    is misspelled): then an option is shown only if every list that knows it shows it. A
    property key written as a string (``'s3.secret-access-key' = ...``) is secret when it
    mentions a secret, a password, a token, a credential or an account, SSL or private key
    (``mentions_secret``). When in doubt, secret.
    """
    if key_is_string:
        # a connection takes no option keyed by a string: one there is unknown, so hidden
        return Secrecy.VALUE if mentions_secret(name) or list_kind in CREDENTIAL_LISTS else Secrecy.NONE
    if list_kind is None:
        found = [lookup(kind, name) for kind in LISTS]
        known = [(spec, form) for spec, form in found if spec is not None]
        if not known:
            return Secrecy.VALUE
        if any(spec.secret and not form for spec, form in known):
            return Secrecy.VALUE
        if any(form for _, form in known):
            return Secrecy.NAME
        return Secrecy.VALUE if mentions_secret(name) else Secrecy.NONE
    spec, secret_form = lookup(list_kind, name)
    if spec is None:
        if list_kind in CREDENTIAL_LISTS or mentions_secret(name):
            return Secrecy.VALUE
        return Secrecy.NONE
    if secret_form:
        return Secrecy.NAME
    return Secrecy.VALUE if spec.secret else Secrecy.NONE


def known_prefix(list_kind: str | None, words: list[str]) -> int:
    """How many leading ``words`` spell a known option (0: none), for ``NAME value`` written
    without ``=``: ``SECRET ACCESS KEY hunter2`` is the option SECRET ACCESS KEY and a value."""
    kinds = [list_kind] if list_kind in LISTS else list(LISTS)  # unknown (prose): any list
    for n in range(len(words), 0, -1):
        name = " ".join(words[:n])
        if any(lookup(kind, name)[0] is not None for kind in kinds):
            return n
    return 0


__all__ = [
    "CATALOG_TYPES",
    "CREDENTIAL_LISTS",
    "KAFKA_FORMATS",
    "KEY_FORMATS",
    "LISTS",
    "REGISTRY_FORMATS",
    "SCHEMA_REGISTRY",
    "SECRET_WORDS",
    "SUBJECT_STRATEGIES",
    "STORAGE",
    "STORAGE_KINDS",
    "Kind",
    "OptionSpec",
    "Secrecy",
    "StorageKind",
    "known_prefix",
    "lookup",
    "mentions_secret",
    "secrecy",
    "storage_named",
    "storage_of",
]
