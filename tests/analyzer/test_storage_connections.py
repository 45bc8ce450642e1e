"""GCS and AZURE connections in the analyzer: plans, dependencies, every misuse's error (where
it points, what it hints), secrets kept out of errors, warnings and stored SQL, and the rows of
SHOW CONNECTIONS and DESCRIBE. ``tests/golden/{plan,analysis_errors}/storage_connections.sql``
hold the rendered forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icesql import results as R
from icesql.analyzer import MemoryCatalog, analyze
from icesql.analyzer.catalog import CONNECTION_PLANS, object_kind
from icesql.analyzer.connection_kinds import article, connection_kind_name
from icesql.analyzer.connections import CONNECTION_OPTIONS, STORAGES, check_storage_connection
from icesql.analyzer.diagnostics import Context
from icesql.errors import AnalysisError, ParseError
from icesql.plan import (
    AwsConnectionPlan,
    AzureConnectionPlan,
    CatalogConnectionPlan,
    CatalogType,
    CreateObjectPlan,
    GcsConnectionPlan,
    KafkaConnectionPlan,
    SchemaRegistryConnectionPlan,
    SecretName,
    SinkPlan,
    SourceKind,
    SourcePlan,
    StorageConnectionPlan,
    plan_from_dict,
    to_dict,
)
from icesql.syntax import ast as a
from icesql.syntax.options import LISTS
from icesql.syntax.parser import parse
from icesql.syntax.redaction import redact_secrets

SETUP = """
CREATE SECRET sa_json AS '{"type": "service_account"}';
CREATE SECRET azure_key AS 'a2V5';
CREATE SECRET sas AS 'sv=1&sig=x';
CREATE SECRET sk AS 'SK';
CREATE CONNECTION s3 TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = SECRET sk);
CREATE CONNECTION gcs TO GCS (PROJECT = 'my-project', CREDENTIALS = SECRET sa_json, ENDPOINT = 'http://127.0.0.1:4443');
CREATE CONNECTION blob TO AZURE (ACCOUNT NAME = 'devstoreaccount1', ACCOUNT KEY = SECRET azure_key);
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/wh');
CREATE CONNECTION k TO KAFKA (BROKER = 'localhost:9092');
CREATE SOURCE orders FROM GENERATOR (ROWS PER SECOND = 10, SCHEMA = 'id BIGINT, v STRING');
"""
BASE = Path("/base")


@pytest.fixture
def catalog() -> MemoryCatalog:
    c = MemoryCatalog()
    for stmt in parse(SETUP):
        c.apply(analyze(stmt, c, source=SETUP, base_dir=BASE).plan)
    return c


def plan_of(sql: str, catalog: MemoryCatalog) -> CreateObjectPlan:
    (stmt,) = parse(sql)
    plan = analyze(stmt, catalog, source=sql, base_dir=BASE).plan
    assert isinstance(plan, CreateObjectPlan)
    return plan


def error_of(sql: str, catalog: MemoryCatalog) -> AnalysisError:
    (stmt,) = parse(sql)
    with pytest.raises(AnalysisError) as info:
        analyze(stmt, catalog, source=sql, base_dir=BASE)
    return info.value


def at(sql: str, err: AnalysisError) -> str:
    """The text the error's caret underlines."""
    assert err.span is not None
    return sql[err.span.start : err.span.end]


def round_trips(plan: CreateObjectPlan) -> None:
    """The definition, as the catalog store keeps it (JSON), reads back as the same plan."""
    assert plan_from_dict(json.loads(json.dumps(to_dict(plan.definition)))) == plan.definition


# --------------------------------------------------------------------------- the table


def test_one_entry_per_storage_kind() -> None:
    assert list(STORAGES) == [a.ConnectionKind.AWS, a.ConnectionKind.GCS, a.ConnectionKind.AZURE]
    plans = {AwsConnectionPlan, GcsConnectionPlan, AzureConnectionPlan}
    assert {s.plan for s in STORAGES.values()} == plans
    for kind, storage in STORAGES.items():
        assert storage.kind is kind and storage.keyword == kind.value
        assert storage.plan.kind == storage.syntax.list_kind  # the plan's kind is its option list's key
        assert CONNECTION_OPTIONS[kind] is storage.options
        assert storage.options.specs == LISTS[storage.syntax.list_kind]
        assert storage.options.what == storage.option == f"{kind.value} CONNECTION"
        # AWS stays in the plans' aws_connection fields; the others share storage_connection
        assert storage.field == ("aws_connection" if kind is a.ConnectionKind.AWS else "storage_connection")
        for plan in (CatalogConnectionPlan, SourcePlan, SinkPlan):
            assert storage.field in plan.__dataclass_fields__
    assert set(CONNECTION_PLANS) == plans | {KafkaConnectionPlan, SchemaRegistryConnectionPlan, CatalogConnectionPlan}


@pytest.mark.parametrize(
    ("plan", "name", "article_"),
    [
        (AwsConnectionPlan("x"), "AWS", "an"),
        (GcsConnectionPlan("x"), "GCS", "a"),
        (AzureConnectionPlan("x", "acct"), "AZURE", "an"),
        (KafkaConnectionPlan("x", ("h:1",)), "KAFKA", "a"),
        (CatalogConnectionPlan("x", CatalogType.LOCAL), "ICEBERG CATALOG", "an"),
    ],
)
def test_connection_kind_names(plan: Any, name: str, article_: str) -> None:
    assert connection_kind_name(plan) == name
    assert article(name) == article_
    assert object_kind(plan) == "connection"
    c = MemoryCatalog()
    c.add(plan)
    assert c.get("connection", "x") is plan


def test_check_storage_connection_is_generic(catalog: MemoryCatalog) -> None:
    ctx = Context(None, None, BASE)
    node = a.Ident("gcs")
    found: StorageConnectionPlan = check_storage_connection(ctx, node, "gcs", catalog, a.ConnectionKind.GCS)
    assert isinstance(found, GcsConnectionPlan)
    assert isinstance(check_storage_connection(ctx, node, "s3", catalog, a.ConnectionKind.AWS), AwsConnectionPlan)
    with pytest.raises(AnalysisError, match="connection gcs is a GCS connection, expected an AZURE connection"):
        check_storage_connection(ctx, node, "gcs", catalog, a.ConnectionKind.AZURE)
    with pytest.raises(AnalysisError, match="connection lake is an ICEBERG CATALOG connection, expected a GCS"):
        check_storage_connection(ctx, node, "lake", catalog, a.ConnectionKind.GCS)


# --------------------------------------------------------------------------- connections


def test_gcs_connection_plan(catalog: MemoryCatalog) -> None:
    sql = (
        "CREATE CONNECTION g TO GCS (PROJECT = 'my-project', CREDENTIALS = SECRET sa_json, "
        "ENDPOINT = 'http://127.0.0.1:4443') WITH (VALIDATE = false)"
    )
    plan = plan_of(sql, catalog)
    assert plan.definition == GcsConnectionPlan(
        "g", project="my-project", credentials=SecretName("sa_json"), endpoint="http://127.0.0.1:4443", validate=False
    )
    assert plan.dependencies == (("secret", "sa_json"),)
    assert plan.sql == sql.replace("false", "FALSE")
    round_trips(plan)
    assert to_dict(plan.definition)["$type"] == "GcsConnectionPlan"
    assert to_dict(plan)["dependencies"] == [["secret", "sa_json"]]


def test_gcs_connection_without_options_is_the_default_chain(catalog: MemoryCatalog) -> None:
    plan = plan_of("CREATE CONNECTION g TO GCS", catalog)
    assert plan.definition == GcsConnectionPlan("g")
    assert plan.dependencies == () and plan.inline_secrets == ()
    round_trips(plan)


def test_gcs_inline_credentials_become_a_hidden_secret(catalog: MemoryCatalog) -> None:
    key = '{"type": "service_account", "private_key": "-----BEGIN hunter2"}'
    sql = f"CREATE CONNECTION g TO GCS (CREDENTIALS = '{key}')"
    (stmt,) = parse(sql)
    result = analyze(stmt, catalog, source=sql)
    plan = result.plan
    assert isinstance(plan, CreateObjectPlan) and isinstance(plan.definition, GcsConnectionPlan)
    assert plan.definition.credentials == SecretName("__inline__.g.credentials")
    ((name, value),) = plan.inline_secrets
    assert name == "__inline__.g.credentials" and value.reveal() == key
    assert "hunter2" not in plan.sql and "CREDENTIALS = '********'" in plan.sql
    (warning,) = result.warnings
    assert warning.message == "option CREDENTIALS is given as a plain string; it is stored as a hidden secret"
    assert "hunter2" not in warning.render()
    assert plan.dependencies == ()  # the hidden secret is created with the connection


def test_azure_connection_plans(catalog: MemoryCatalog) -> None:
    key = plan_of(
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'devstoreaccount1', ACCOUNT KEY = SECRET azure_key, "
        "ENDPOINT = 'http://127.0.0.1:10000/devstoreaccount1')",
        catalog,
    )
    assert key.definition == AzureConnectionPlan(
        "a",
        account_name="devstoreaccount1",
        account_key=SecretName("azure_key"),
        endpoint="http://127.0.0.1:10000/devstoreaccount1",
    )
    assert key.dependencies == (("secret", "azure_key"),)
    sas = plan_of("CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', SAS TOKEN SECRET = sas)", catalog)
    assert sas.definition == AzureConnectionPlan("a", account_name="acct", sas_token=SecretName("sas"))
    assert sas.dependencies == (("secret", "sas"),)
    chain = plan_of("CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct')", catalog)
    assert chain.definition == AzureConnectionPlan("a", account_name="acct")
    for plan in (key, sas, chain):
        round_trips(plan)


def test_azure_inline_sas_token_is_hidden(catalog: MemoryCatalog) -> None:
    sql = "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', SAS TOKEN = 'sv=2024&sig=hunter2')"
    (stmt,) = parse(sql)
    result = analyze(stmt, catalog, source=sql)
    plan = result.plan
    assert isinstance(plan, CreateObjectPlan) and isinstance(plan.definition, AzureConnectionPlan)
    assert plan.definition.sas_token == SecretName("__inline__.a.sas_token")
    assert "hunter2" not in plan.sql and all("hunter2" not in w.render() for w in result.warnings)


@pytest.mark.parametrize(
    ("sql", "message", "caret", "hint"),
    [
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT KEY = SECRET azure_key)",
            "AZURE connection needs ACCOUNT NAME",
            "a",
            "add ACCOUNT NAME = 'mystorageaccount' (the storage account's name)",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'ab')",
            "invalid ACCOUNT NAME 'ab': a storage account name is 3 to 24 lower-case letters and digits",
            "'ab'",
            "write ACCOUNT NAME = 'mystorageaccount'",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'DevStore1')",
            "invalid ACCOUNT NAME 'DevStore1': a storage account name is 3 to 24 lower-case letters and digits",
            "'DevStore1'",
            "write ACCOUNT NAME = 'devstore1'",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = SECRET azure_key, SAS TOKEN = SECRET sas)",
            "SAS TOKEN cannot be combined with ACCOUNT KEY",
            "SAS TOKEN = SECRET sas",
            "an AZURE connection authenticates one way: ACCOUNT KEY, SAS TOKEN, or neither (the default chain)",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', SAS TOKEN = SECRET sas, ACCOUNT KEY = SECRET azure_key)",
            "ACCOUNT KEY cannot be combined with SAS TOKEN",
            "ACCOUNT KEY = SECRET azure_key",
            "an AZURE connection authenticates one way: ACCOUNT KEY, SAS TOKEN, or neither (the default chain)",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ENDPOINT = '127.0.0.1:10000')",
            "option ENDPOINT must be a URL starting with http:// or https://, found '127.0.0.1:10000'",
            "'127.0.0.1:10000'",
            "write ENDPOINT = 'https://host:port/path'",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = SECRET nokey)",
            "unknown secret nokey",
            "nokey",
            "create it first: CREATE SECRET nokey AS '...'",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = azure_key)",
            "option ACCOUNT KEY expects SECRET name, found an identifier",
            "azure_key",
            "write ACCOUNT KEY = SECRET secret_name",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT NAMES = 'x')",
            "unknown AZURE CONNECTION option ACCOUNT NAMES",
            "ACCOUNT NAMES = 'x'",
            "did you mean ACCOUNT NAME?",
        ),
        (
            "CREATE CONNECTION g TO GCS (PROJECT = '  ')",
            "PROJECT must not be empty",
            "'  '",
            "write PROJECT = 'my-project'",
        ),
        (
            "CREATE CONNECTION g TO GCS (ENDPOINT = 'localhost:4443')",
            "option ENDPOINT must be a URL starting with http:// or https://, found 'localhost:4443'",
            "'localhost:4443'",
            "write ENDPOINT = 'https://host:port/path'",
        ),
        (
            "CREATE CONNECTION g TO GCS (PROJECT = 'p', PROJECT ID = 'q')",
            "option PROJECT ID repeats PROJECT (they are the same option)",
            "PROJECT ID = 'q'",
            "give each option once",
        ),
        (
            "CREATE CONNECTION g TO GCS (CREDENTIAL = SECRET sa_json)",
            "unknown GCS CONNECTION option (a name mentioning a secret, not repeated)",
            "CREDENTIAL = SECRET sa_json",
            "did you mean CREDENTIALS?",
        ),
        (
            "CREATE CONNECTION g TO GCS (CREDENTIALS = 5)",
            "option CREDENTIALS expects SECRET name, found a number",
            "5",
            "write CREDENTIALS = SECRET secret_name",
        ),
        (
            "CREATE CONNECTION g TO GCS (REGION = 'us')",
            "unknown GCS CONNECTION option REGION",
            "REGION = 'us'",
            "valid options: PROJECT, CREDENTIALS, ENDPOINT",
        ),
    ],
)
def test_connection_errors(sql: str, message: str, caret: str, hint: str, catalog: MemoryCatalog) -> None:
    err = error_of(sql, catalog)
    assert err.message == message
    assert at(sql, err) == caret
    assert err.hint == hint


@pytest.mark.parametrize(
    "value",
    [
        "/home/me/key.json",
        "not json at all hunter2",
        '["a list", "hunter2"]',
        '"just a string hunter2"',
        "{broken json hunter2",
    ],
)
def test_gcs_inline_credentials_must_be_a_key_files_json(value: str, catalog: MemoryCatalog) -> None:
    sql = f"CREATE CONNECTION g TO GCS (CREDENTIALS = '{value}')"
    err = error_of(sql, catalog)
    assert err.message == (
        "CREDENTIALS must be a service-account key file's JSON, found a string that is not a JSON object"
    )
    assert at(sql, err) == f"'{value}'"
    assert err.hint is not None and "CREATE SECRET sa AS" in err.hint
    rendered = err.render()
    assert value not in rendered and "hunter2" not in rendered and "key.json" not in rendered


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE CONNECTION g TO GCS (CREDENTIALS = '{\"k\": \"hunter2\"}', PROJECT = 5)",
        "CREATE CONNECTION g TO GCS (CREDENTIALS = '{\"k\": \"hunter2\"}', ENDPOINT = 'nope')",
        "CREATE CONNECTION g TO GCS (CREDENTIALZ = 'hunter2')",
        "CREATE CONNECTION g TO GCS (KEY = 'hunter2')",
        "CREATE CONNECTION g TO GCS (CREDENTIALS = \"hunter2\", PROJECT = 5)",
        "CREATE CONNECTION a TO AZURE (ACCOUNT KEY = 'hunter2', ACCOUNT NAME = 'Bad Name')",
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', SAS TOKEN = 'hunter2', ACCOUNT KEY = 'hunter2')",
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', SAS TOKN = 'hunter2')",
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = 'hunter2', ENDPOINT = 'x')",
        "CREATE CONNECTION a TO AZURE (ACCOUNT KEY = 'hunter2')",
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY hunter2 = 'x')",
    ],
)
def test_errors_never_show_a_secret(sql: str, catalog: MemoryCatalog) -> None:
    err = error_of(sql, catalog)
    rendered = err.render()
    assert "hunter2" not in rendered, rendered


# --------------------------------------------------------------------------- catalogs


def test_catalog_with_a_gcs_connection(catalog: MemoryCatalog) -> None:
    plan = plan_of(
        "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', URI = 'sqlite:///c.db', "
        "WAREHOUSE = 'gs://bucket/wh', GCS CONNECTION = gcs)",
        catalog,
    )
    d = plan.definition
    assert isinstance(d, CatalogConnectionPlan)
    assert d.storage_connection == "gcs" and d.aws_connection is None and d.warehouse == "gs://bucket/wh"
    assert plan.dependencies == (("connection", "gcs"),)
    round_trips(plan)


@pytest.mark.parametrize("ctype", ["sql", "rest", "glue", "hive"])
def test_catalog_types_that_take_an_azure_connection(ctype: str, catalog: MemoryCatalog) -> None:
    uri = {"sql": "'sqlite:///c.db'", "rest": "'https://cat'", "hive": "'thrift://hms:9083'"}.get(ctype)
    options = f"TYPE = '{ctype}'" + (f", URI = {uri}" if uri else "") + ", AZURE CONNECTION = blob"
    plan = plan_of(f"CREATE CONNECTION c TO ICEBERG CATALOG ({options})", catalog)
    d = plan.definition
    assert isinstance(d, CatalogConnectionPlan) and d.storage_connection == "blob"
    assert ("connection", "blob") in plan.dependencies


def test_catalog_with_aws_identity_and_gcs_storage(catalog: MemoryCatalog) -> None:
    plan = plan_of("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'glue', AWS CONNECTION = s3, GCS CONNECTION = gcs)", catalog)
    d = plan.definition
    assert isinstance(d, CatalogConnectionPlan)
    assert (d.aws_connection, d.storage_connection) == ("s3", "gcs")
    assert plan.dependencies == (("connection", "s3"), ("connection", "gcs"))


def test_catalog_without_storage_connection_reads_as_before(catalog: MemoryCatalog) -> None:
    plan = plan_of("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', AWS CONNECTION = s3)", catalog)
    d = plan.definition
    assert isinstance(d, CatalogConnectionPlan) and d.storage_connection is None
    assert "storage_connection" not in to_dict(d)  # stored definitions of old catalogs are unchanged


@pytest.mark.parametrize(
    ("sql", "message", "caret", "hint"),
    [
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', GCS CONNECTION = gcs, AZURE CONNECTION = blob)",
            "AZURE CONNECTION cannot be combined with GCS CONNECTION",
            "AZURE CONNECTION = blob",
            "a catalog's files are on one storage: keep GCS CONNECTION or AZURE CONNECTION, the one its warehouse is on",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'local', GCS CONNECTION = gcs)",
            "option GCS CONNECTION does not apply to catalog type 'local'",
            "GCS CONNECTION = gcs",
            "GCS CONNECTION applies to catalog types 'glue', 'hive', 'rest' or 'sql'",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3tables', WAREHOUSE = 'arn:x', AWS CONNECTION = s3, AZURE CONNECTION = blob)",
            "option AZURE CONNECTION does not apply to catalog type 's3tables'",
            "AZURE CONNECTION = blob",
            "AZURE CONNECTION applies to catalog types 'glue', 'hive', 'rest' or 'sql'",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', GCS CONNECTION = gsc)",
            "unknown connection gsc",
            "gsc",
            "did you mean gcs?",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', GCS CONNECTION = nothing)",
            "unknown connection nothing",
            "nothing",
            "create it first: CREATE CONNECTION nothing TO GCS (...)",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', GCS CONNECTION = s3)",
            "connection s3 is an AWS connection, expected a GCS connection",
            "s3",
            "GCS CONNECTION names a connection created with CREATE CONNECTION s3 TO GCS (...)",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', AZURE CONNECTION = lake)",
            "connection lake is an ICEBERG CATALOG connection, expected an AZURE connection",
            "lake",
            "AZURE CONNECTION names a connection created with CREATE CONNECTION lake TO AZURE (...)",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', AWS CONNECTION = gcs)",
            "connection gcs is a GCS connection, expected an AWS connection",
            "gcs",
            "AWS CONNECTION names a connection created with CREATE CONNECTION gcs TO AWS (...)",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'hive', URI = 'thrift://h:1', WAREHOUSE = 'gs://b/', AZURE CONNECTION = blob)",
            "WAREHOUSE is a gs:// URL, but AZURE CONNECTION gives Azure storage credentials",
            "'gs://b/'",
            "a warehouse on Azure storage is an abfs://, abfss://, wasb:// or wasbs:// URL: "
            "WAREHOUSE = 'abfss://container@account.dfs.core.windows.net/prefix/'",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', GOOGLE CONNECTION = gcs)",
            "unknown ICEBERG CATALOG option GOOGLE CONNECTION",
            "GOOGLE CONNECTION = gcs",
            "did you mean GCS CONNECTION? (a connection TO GCS holds Google Cloud Storage credentials)",
        ),
    ],
)
def test_catalog_errors(sql: str, message: str, caret: str, hint: str, catalog: MemoryCatalog) -> None:
    err = error_of(sql, catalog)
    assert err.message == message
    assert at(sql, err) == caret
    assert err.hint == hint


# --------------------------------------------------------------------------- sinks


@pytest.mark.parametrize(
    ("clause", "name"),
    [("USING GCS CONNECTION gcs", "gcs"), ("USING AZURE CONNECTION blob", "blob")],
)
def test_sink_using_a_storage_connection(clause: str, name: str, catalog: MemoryCatalog) -> None:
    plan = plan_of(f"CREATE SINK s FROM orders TO ICEBERG CATALOG lake {clause} NAMESPACE ns TABLE t", catalog)
    d = plan.definition
    assert isinstance(d, SinkPlan)
    assert d.storage_connection == name and d.aws_connection is None
    assert plan.dependencies == (("source", "orders"), ("connection", "lake"), ("connection", name))
    assert clause in plan.sql
    round_trips(plan)


def test_sink_using_aws_reads_as_before(catalog: MemoryCatalog) -> None:
    plan = plan_of("CREATE SINK s FROM orders TO ICEBERG CATALOG lake USING AWS CONNECTION s3 NAMESPACE ns TABLE t", catalog)
    d = plan.definition
    assert isinstance(d, SinkPlan) and d.aws_connection == "s3" and d.storage_connection is None
    assert "storage_connection" not in to_dict(d)


def test_explain_sink_checks_the_storage_connection(catalog: MemoryCatalog) -> None:
    sql = "EXPLAIN CREATE SINK s FROM orders TO ICEBERG CATALOG lake USING AZURE CONNECTION gcs NAMESPACE ns TABLE t"
    err = error_of(sql, catalog)
    assert err.message == "connection gcs is a GCS connection, expected an AZURE connection"


@pytest.mark.parametrize(
    ("sql", "message", "caret", "hint"),
    [
        (
            "CREATE SINK s FROM orders TO ICEBERG CATALOG lake USING GCS CONNECTION gcss NAMESPACE ns TABLE t",
            "unknown connection gcss",
            "gcss",
            "did you mean gcs?",
        ),
        (
            "CREATE SINK s FROM orders TO ICEBERG CATALOG lake USING AZURE CONNECTION gcs NAMESPACE ns TABLE t",
            "connection gcs is a GCS connection, expected an AZURE connection",
            "gcs",
            "AZURE CONNECTION names a connection created with CREATE CONNECTION gcs TO AZURE (...)",
        ),
        (
            "CREATE SINK s FROM orders TO ICEBERG CATALOG lake USING GCS CONNECTION k NAMESPACE ns TABLE t",
            "connection k is a KAFKA connection, expected a GCS connection",
            "k",
            "GCS CONNECTION names a connection created with CREATE CONNECTION k TO GCS (...)",
        ),
        (
            "CREATE SINK s FROM orders TO ICEBERG CATALOG blob NAMESPACE ns TABLE t",
            "connection blob is an AZURE connection, expected an ICEBERG CATALOG connection",
            "blob",
            "a sink writes through CREATE CONNECTION ... TO ICEBERG CATALOG (...)",
        ),
    ],
)
def test_sink_errors(sql: str, message: str, caret: str, hint: str, catalog: MemoryCatalog) -> None:
    err = error_of(sql, catalog)
    assert err.message == message
    assert at(sql, err) == caret
    assert err.hint == hint


def _sink(**kw: Any) -> a.CreateSink:
    return a.CreateSink(
        a.Ident("s"),
        a.QualifiedName((a.Ident("orders"),)),
        a.Ident("lake"),
        namespace=a.StringLit("ns"),
        table=a.StringLit("t"),
        **kw,
    )


def test_a_tree_built_by_hand_is_checked_too(catalog: MemoryCatalog) -> None:
    both = _sink(
        aws_connection=a.Ident("s3"), storage_connection=a.ConnectionRef(a.ConnectionKind.GCS, a.Ident("gcs"))
    )
    with pytest.raises(AnalysisError, match="USING GCS CONNECTION cannot be combined with USING AWS CONNECTION"):
        analyze(both, catalog)
    kafka = _sink(storage_connection=a.ConnectionRef(a.ConnectionKind.KAFKA, a.Ident("k")))
    with pytest.raises(AnalysisError, match="USING KAFKA CONNECTION does not name a storage connection"):
        analyze(kafka, catalog)
    ok = analyze(_sink(storage_connection=a.ConnectionRef(a.ConnectionKind.AZURE, a.Ident("blob"))), catalog)
    assert isinstance(ok.plan, CreateObjectPlan) and ok.plan.definition.storage_connection == "blob"  # type: ignore[union-attr]


# --------------------------------------------------------------------------- FILES sources


@pytest.mark.parametrize(
    ("path", "option", "name"),
    [
        ("gs://bucket/events/", "GCS CONNECTION", "gcs"),
        ("abfs://c@devstoreaccount1.dfs.core.windows.net/e/", "AZURE CONNECTION", "blob"),
        ("abfss://c@devstoreaccount1.dfs.core.windows.net/e/", "AZURE CONNECTION", "blob"),
        ("wasb://c@devstoreaccount1.blob.core.windows.net/e/", "AZURE CONNECTION", "blob"),
        ("WASBS://c@devstoreaccount1.blob.core.windows.net/e/", "AZURE CONNECTION", "blob"),
    ],
)
def test_files_on_object_storage(path: str, option: str, name: str, catalog: MemoryCatalog) -> None:
    plan = plan_of(f"CREATE SOURCE f FROM FILES '{path}' (FORMAT = 'parquet', {option} = {name})", catalog)
    d = plan.definition
    assert isinstance(d, SourcePlan) and d.source_kind is SourceKind.FILES
    assert d.path == path and d.storage_connection == name and d.aws_connection is None
    assert plan.dependencies == (("connection", name),)
    round_trips(plan)


def test_files_on_s3_read_as_before(catalog: MemoryCatalog) -> None:
    plan = plan_of("CREATE SOURCE f FROM FILES 's3://b/e/' (FORMAT = 'parquet', AWS CONNECTION = s3)", catalog)
    d = plan.definition
    assert isinstance(d, SourcePlan) and d.aws_connection == "s3" and d.storage_connection is None
    assert plan.dependencies == (("connection", "s3"),)
    assert "storage_connection" not in to_dict(d)


@pytest.mark.parametrize("path", ["gs://bucket/events/", "abfss://c@acct.dfs.core.windows.net/e/"])
def test_files_on_object_storage_without_a_connection(path: str, catalog: MemoryCatalog) -> None:
    # as s3:// without AWS CONNECTION: the engine's default credentials, the path kept as a URL
    plan = plan_of(f"CREATE SOURCE f FROM FILES '{path}' (FORMAT = 'parquet')", catalog)
    d = plan.definition
    assert isinstance(d, SourcePlan) and d.path == path and d.storage_connection is None
    assert plan.dependencies == ()


def test_files_source_archive_on_the_same_storage(catalog: MemoryCatalog) -> None:
    plan = plan_of(
        "CREATE SOURCE f FROM FILES 'wasbs://c@a.blob.core.windows.net/in/' (FORMAT = 'parquet', "
        "AZURE CONNECTION = blob, CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = 'abfss://c@a.dfs.core.windows.net/done/')",
        catalog,
    )
    d = plan.definition
    assert isinstance(d, SourcePlan) and d.archive_directory == "abfss://c@a.dfs.core.windows.net/done"


@pytest.mark.parametrize(
    ("sql", "message", "caret", "hint"),
    [
        (
            "CREATE SOURCE f FROM FILES 'data/e/' (FORMAT = 'parquet', GCS CONNECTION = gcs)",
            "GCS CONNECTION reads files on Google Cloud Storage: the path must be a gs:// URL",
            "'data/e/'",
            "write FROM FILES 'gs://bucket/prefix/' (or leave GCS CONNECTION out for local files)",
        ),
        (
            "CREATE SOURCE f FROM FILES 'data/e/' (FORMAT = 'parquet', AZURE CONNECTION = blob)",
            "AZURE CONNECTION reads files on Azure storage: the path must be an abfs://, abfss://, wasb:// or wasbs:// URL",
            "'data/e/'",
            "write FROM FILES 'abfss://container@account.dfs.core.windows.net/prefix/' "
            "(or leave AZURE CONNECTION out for local files)",
        ),
        (
            "CREATE SOURCE f FROM FILES 'data/e/' (FORMAT = 'parquet', AWS CONNECTION = s3)",
            "AWS CONNECTION reads files on S3: the path must be an s3:// URL",  # as before
            "'data/e/'",
            "write FROM FILES 's3://bucket/prefix/' (or leave AWS CONNECTION out for local files)",
        ),
        (
            "CREATE SOURCE f FROM FILES 's3://b/e/' (FORMAT = 'parquet', GCS CONNECTION = gcs)",
            "GCS CONNECTION reads files on Google Cloud Storage: the path must be a gs:// URL",
            "'s3://b/e/'",
            "the path is an s3:// URL: write AWS CONNECTION = name (a connection TO AWS) instead",
        ),
        (
            "CREATE SOURCE f FROM FILES 'gs://b/e/' (FORMAT = 'parquet', AWS CONNECTION = s3)",
            "AWS CONNECTION reads files on S3: the path must be an s3:// URL",
            "'gs://b/e/'",
            "the path is a gs:// URL: write GCS CONNECTION = name (a connection TO GCS) instead",
        ),
        (
            "CREATE SOURCE f FROM FILES 'gs://b/e/' (FORMAT = 'parquet', GCS CONNECTION = blob)",
            "connection blob is an AZURE connection, expected a GCS connection",
            "blob",
            "GCS CONNECTION names a connection created with CREATE CONNECTION blob TO GCS (...)",
        ),
        (
            "CREATE SOURCE f FROM FILES 'gs://b/e/' (FORMAT = 'parquet', GCS CONNECTION = gcs2)",
            "unknown connection gcs2",
            "gcs2",
            "did you mean gcs?",
        ),
        (
            "CREATE SOURCE f FROM FILES 'gs://b/e/' (FORMAT = 'parquet', AWS CONNECTION = s3, GCS CONNECTION = gcs)",
            "GCS CONNECTION cannot be combined with AWS CONNECTION",
            "GCS CONNECTION = gcs",
            "a FILES source reads one storage: keep the connection its path is on",
        ),
        (
            "CREATE SOURCE f FROM FILES 'gs://b/e/' (FORMAT = 'parquet', GS CONNECTION = gcs)",
            "unknown SOURCE option GS CONNECTION",
            "GS CONNECTION = gcs",
            "did you mean GCS CONNECTION? (a connection TO GCS holds Google Cloud Storage credentials)",
        ),
        (
            "CREATE SOURCE f FROM FILES 's3://b/e/' (FORMAT = 'parquet', S3 CONNECTION = s3)",
            "unknown SOURCE option S3 CONNECTION",
            "S3 CONNECTION = s3",
            "did you mean AWS CONNECTION? (a connection TO AWS holds S3 credentials)",
        ),
        (
            "CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id INT', AZURE CONNECTION = blob)",
            "option AZURE CONNECTION does not apply to GENERATOR sources",
            "AZURE CONNECTION = blob",
            "a GENERATOR source takes ROWS PER SECOND, TOTAL ROWS and SCHEMA",
        ),
        (
            "CREATE SOURCE f FROM FILES 'gs://b/e/' (FORMAT = 'parquet', CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = 's3://b/a/')",
            "ARCHIVE DIRECTORY must be on the source's storage: on Google Cloud Storage (a gs:// URL)",
            "'s3://b/a/'",
            "files are moved, not copied across storages",
        ),
        (
            "CREATE SOURCE f FROM FILES 's3://b/e/' (FORMAT = 'parquet', CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = 'gs://b/a/')",
            "ARCHIVE DIRECTORY must be on the source's storage: on S3 (an s3:// URL)",  # as before
            "'gs://b/a/'",
            "files are moved, not copied across storages",
        ),
        (
            "CREATE SOURCE f FROM FILES '/data/e/' (FORMAT = 'parquet', CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = 'gs://b/a/')",
            "ARCHIVE DIRECTORY must be on the source's storage: a local directory",
            "'gs://b/a/'",
            "files are moved, not copied across storages",
        ),
    ],
)
def test_files_errors(sql: str, message: str, caret: str, hint: str, catalog: MemoryCatalog) -> None:
    err = error_of(sql, catalog)
    assert err.message == message
    assert at(sql, err) == caret
    assert err.hint == hint


def test_a_script_checked_whole_records_every_dependency() -> None:
    """What DROP CONNECTION consults (the stored dependencies): each use of a GCS or AZURE
    connection is one, as AWS's are."""
    c = MemoryCatalog()
    deps: dict[str, tuple[tuple[str, str], ...]] = {}
    script = SETUP + (
        "CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', GCS CONNECTION = gcs);\n"
        "CREATE SOURCE f FROM FILES 'abfss://c@a.dfs.core.windows.net/' (FORMAT = 'parquet', AZURE CONNECTION = blob);\n"
        "CREATE SINK s FROM f TO ICEBERG CATALOG cat USING AZURE CONNECTION blob NAMESPACE ns TABLE t;\n"
    )
    for stmt in parse(script):
        plan = analyze(stmt, c, source=script, base_dir=BASE).plan
        if isinstance(plan, CreateObjectPlan):
            deps[plan.definition.name] = plan.dependencies
        c.apply(plan)
    assert deps["gcs"] == (("secret", "sa_json"),)
    assert deps["blob"] == (("secret", "azure_key"),)
    assert deps["cat"] == (("connection", "gcs"),)
    assert deps["f"] == (("connection", "blob"),)
    assert deps["s"] == (("source", "f"), ("connection", "cat"), ("connection", "blob"))


# --------------------------------------------------------------------------- SHOW and DESCRIBE


class _Stored:
    def __init__(self, plan: Any, kind: str = "connection", deps: tuple[tuple[str, str], ...] = ()) -> None:
        self.name = plan.name
        self.kind = kind
        self.definition = to_dict(plan)
        self.dependencies = deps


def test_show_connections_rows() -> None:
    objects = [
        _Stored(GcsConnectionPlan("g", project="p", credentials=SecretName("sa"), endpoint="http://127.0.0.1:4443")),
        _Stored(GcsConnectionPlan("g2")),
        _Stored(AzureConnectionPlan("a", account_name="acct", sas_token=SecretName("t"), endpoint="http://e/acct")),
        _Stored(AzureConnectionPlan("a2", account_name="acct")),
    ]
    rows = R.show_objects("connections", objects).rows
    assert rows == (
        ("g", "gcs", "project p, http://127.0.0.1:4443"),
        ("g2", "gcs", "-"),
        ("a", "azure", "account acct, http://e/acct"),
        ("a2", "azure", "account acct"),
    )
    assert R.object_type(AwsConnectionPlan("x")) == "aws"  # as before


def test_describe_shows_secret_names_never_values() -> None:
    plan = AzureConnectionPlan(
        "a", account_name="acct", account_key=SecretName("__inline__.a.account_key"), endpoint="http://e"
    )
    rows = dict(R.describe(_Stored(plan)).rows)
    assert rows["account_key"] == "********" and rows["account_name"] == "acct"
    rows = dict(R.describe(_Stored(GcsConnectionPlan("g", credentials=SecretName("sa")), deps=(("secret", "sa"),))).rows)
    assert rows["credentials"] == "SECRET sa" and rows["depends_on"] == "secret sa"


# --------------------------------------------------------------------------- mistyped statements

V = "<V>"
TEMPLATES = [
    f"CREATE CONNECTION g TO GCS ( PROJECT = 'p' , CREDENTIALS = {V} , ENDPOINT = 'http://127.0.0.1:4443' )",
    f"CREATE CONNECTION a TO AZURE ( ACCOUNT NAME = 'acct' , ACCOUNT KEY = {V} , ENDPOINT = 'http://e' )",
    f"CREATE CONNECTION a TO AZURE ( ACCOUNT NAME = 'acct' , SAS TOKEN = {V} ) WITH ( VALIDATE = false )",
]
JUNK = ["'", '"', ";", "--", "(", ")", ",", "=", "AS", "SECRET", "\n"]
VALUE = "Xq7Rk2Vw9Lm4"


def _mistyped(template: str) -> list[str]:
    """The template with each single slip a person makes: a piece dropped (never the value),
    doubled, swapped with the next, glued to it, or a stray piece inserted before it."""
    pieces = template.split(" ")
    out = []
    for i in range(len(pieces)):
        if pieces[i] != V:
            out.append(pieces[:i] + pieces[i + 1 :])
        out.append(pieces[:i] + [pieces[i]] + pieces[i:])
        if i + 1 < len(pieces):
            out.append(pieces[:i] + [pieces[i + 1], pieces[i]] + pieces[i + 2 :])
            out.append(pieces[:i] + [pieces[i] + pieces[i + 1]] + pieces[i + 2 :])
        out.extend(pieces[:i] + [junk] + pieces[i:] for junk in JUNK)
    return [" ".join(p) for p in out]


@pytest.mark.parametrize("template", TEMPLATES, ids=["gcs", "azure-key", "azure-sas"])
@pytest.mark.parametrize("quote", ["'", '"'])
def test_no_part_of_a_storage_credential_is_ever_shown(template: str, quote: str, catalog: MemoryCatalog) -> None:
    """As ``tests/test_properties.py`` does for AWS and catalogs, exhaustively over one slip:
    parse errors, analysis errors and warnings, and the shell's history."""
    windows = {VALUE[i : i + 5] for i in range(len(VALUE) - 4)}
    for sql in _mistyped(template):
        sql = sql.replace(V, quote + VALUE + quote)
        shown = [redact_secrets(sql)]
        try:
            stmts = parse(sql)
        except ParseError as err:
            shown.append(err.render())
            stmts = []
        for stmt in stmts:
            try:
                result = analyze(stmt, catalog, source=sql)
                shown += [w.render() for w in result.warnings]
                if isinstance(result.plan, CreateObjectPlan):
                    shown.append(result.plan.sql)
            except AnalysisError as err:
                shown.append(err.render())
        text = "\n".join(shown)
        assert not [w for w in windows if w in text], (sql, text)


@pytest.mark.parametrize("key", ["adls.account-key", "adls.sas-token.acct", "gcs.oauth2.token"])
def test_catalog_properties_refuse_storage_credentials(key: str, catalog: MemoryCatalog) -> None:
    sql = f"CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', PROPERTIES = ('{key}' = 'hunter2'))"
    err = error_of(sql, catalog)
    assert err.message == f"property '{key}' carries a credential; PROPERTIES are stored and shown in clear text"
    assert err.hint == (
        "pass credentials through PASSWORD / CREDENTIAL / TOKEN = SECRET name or an AWS, GCS or AZURE CONNECTION"
    )
    assert "hunter2" not in err.render()
