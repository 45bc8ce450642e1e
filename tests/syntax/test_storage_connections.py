"""GCS and AZURE connections in the syntax layer: the grammar, the ast, the printer, the option
lists, and secret values masked in parse errors and redacted from the shell's history."""

from __future__ import annotations

import pytest

from icesql import ParseError
from icesql.syntax import ast as a
from icesql.syntax.lexer import option_list_kind, significant, tokenize
from icesql.syntax.options import (
    CREDENTIAL_LISTS,
    LISTS,
    STORAGE,
    STORAGE_KINDS,
    Secrecy,
    lookup,
    secrecy,
    storage_named,
    storage_of,
)
from icesql.syntax.parser import _fast_parse, get_parser, parse, parse_one
from icesql.syntax.printer import CONNECTION_LISTS, format_script, to_sql
from icesql.syntax.redaction import find_secrets, mask_secrets, redact_secrets

GCS = (
    "CREATE CONNECTION g TO GCS (PROJECT = 'my-project', CREDENTIALS = SECRET sa_json, "
    "ENDPOINT = 'http://127.0.0.1:4443') WITH (VALIDATE = false)"
)
AZURE = (
    "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'devstoreaccount1', ACCOUNT KEY = SECRET k, "
    "ENDPOINT = 'http://127.0.0.1:10000/devstoreaccount1')"
)
VALID = [
    GCS,
    AZURE,
    "CREATE CONNECTION g TO GCS",
    "CREATE CONNECTION IF NOT EXISTS g TO gcs ()",
    "CREATE CONNECTION a TO azure (ACCOUNT NAME = 'acct', SAS TOKEN = SECRET t)",
    "CREATE CONNECTION g TO GCS (CREDENTIALS SECRET = sa, PROJECT ID = \"p\")",
    "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', URI = 'sqlite:///c.db', GCS CONNECTION = g)",
    "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://c', AZURE CONNECTION = a)",
    "CREATE SINK s FROM o TO ICEBERG CATALOG c USING GCS CONNECTION g NAMESPACE n TABLE t",
    "CREATE SINK s FROM o INTO ICEBERG CATALOG CONNECTION c (NAMESPACE = 'n', TABLE = 't') USING AZURE CONNECTION a",
    "CREATE SINK s FROM o TO ICEBERG CATALOG c USING AWS CONNECTION s3 NAMESPACE n TABLE t",
    "EXPLAIN CREATE SINK s FROM o TO ICEBERG CATALOG c USING GCS CONNECTION \"G\" TABLE t",
    "CREATE SOURCE f FROM FILES 'gs://b/p/' (FORMAT = 'parquet', GCS CONNECTION = g)",
    "CREATE SOURCE f FROM FILES 'abfss://c@a.dfs.core.windows.net/p/' (FORMAT = 'parquet', AZURE CONNECTION = a)",
    # gcs and azure stay names wherever a name stands
    "CREATE CONNECTION gcs TO AZURE (ACCOUNT NAME = 'x'); CREATE CONNECTION azure TO GCS",
    "CREATE SINK gcs FROM azure TO ICEBERG CATALOG gcs USING AZURE CONNECTION gcs NAMESPACE azure TABLE gcs",
    "CREATE SINK azure FROM gcs INTO ICEBERG CATALOG azure (NAMESPACE = 'n', TABLE = 't') USING GCS CONNECTION azure KEY (gcs)",
    "CREATE SOURCE gcs FROM FILES 'gs://b/' (FORMAT = 'parquet', GCS CONNECTION = gcs, SCHEMA = 'azure INT')",
    "DROP CONNECTION gcs; DROP CONNECTION IF EXISTS azure CASCADE; SHOW CREATE CONNECTION gcs; DESCRIBE azure",
    "VALIDATE CONNECTION gcs; DESCRIBE azure.gcs.azure; SHOW TABLES IN gcs.azure; FLUSH SINK azure",
    "CREATE SECRET gcs AS 'v'; ALTER SECRET azure AS 'w'; CREATE VIEW gcs AS SELECT * FROM azure",
    "CREATE SINK s FROM gcs.azure TO ICEBERG CATALOG c PARTITION BY (gcs, bucket(4, azure))",
]


# --------------------------------------------------------------------------- the tree


def test_connection_kinds() -> None:
    g = parse_one(GCS)
    assert isinstance(g, a.CreateConnection) and g.connection_kind is a.ConnectionKind.GCS
    assert [o.name for o in g.options] == ["PROJECT", "CREDENTIALS", "ENDPOINT"]
    assert g.options[1].value == a.SecretRef(a.Ident("sa_json"))
    assert g.with_options == (a.Option("VALIDATE", a.BoolLit(False)),)
    z = parse_one(AZURE)
    assert isinstance(z, a.CreateConnection) and z.connection_kind is a.ConnectionKind.AZURE
    assert [o.name for o in z.options] == ["ACCOUNT NAME", "ACCOUNT KEY", "ENDPOINT"]
    assert z.to_dict()["connection_kind"] == "AZURE"
    assert parse_one("create connection g to Gcs").connection_kind is a.ConnectionKind.GCS  # type: ignore[attr-defined]


def test_catalog_and_source_options_are_generic_options() -> None:
    c = parse_one(VALID[6])
    assert isinstance(c, a.CreateConnection)
    assert c.options[-1] == a.Option("GCS CONNECTION", a.Ident("g"))
    f = parse_one(VALID[13])
    assert isinstance(f, a.CreateSource) and f.options[-1] == a.Option("AZURE CONNECTION", a.Ident("a"))


def test_sink_using_clause() -> None:
    s = parse_one(VALID[8])
    assert isinstance(s, a.CreateSink)
    assert s.aws_connection is None
    assert s.storage_connection == a.ConnectionRef(a.ConnectionKind.GCS, a.Ident("g"))
    assert s.storage_connection.span is not None
    assert VALID[8][s.storage_connection.span.start : s.storage_connection.span.end] == "USING GCS CONNECTION g"
    z = parse_one(VALID[9])
    assert isinstance(z, a.CreateSink)
    assert z.storage_connection == a.ConnectionRef(a.ConnectionKind.AZURE, a.Ident("a"))
    # AWS stays where it was, and the ast's dictionaries of sinks without the new clause read as before
    w = parse_one(VALID[10])
    assert isinstance(w, a.CreateSink)
    assert w.aws_connection == a.Ident("s3") and w.storage_connection is None
    assert "storage_connection" not in w.to_dict()
    assert s.to_dict()["storage_connection"] == {
        "type": "ConnectionRef",
        "kind": "GCS",
        "name": {"type": "Ident", "name": "g", "quoted": False},
    }


@pytest.mark.parametrize("sql", VALID)
def test_round_trip_and_fast_path(sql: str) -> None:
    stmts = parse(sql)
    for stmt in stmts:
        assert parse(stmt.to_sql()) == [stmt], stmt.to_sql()
    canonical = format_script(stmts)
    assert format_script(parse(canonical)) == canonical
    assert _fast_parse(sql) == get_parser().parse(sql) == stmts


def test_canonical_sql() -> None:
    assert parse_one(VALID[3]).to_sql() == "CREATE CONNECTION IF NOT EXISTS g TO GCS"
    assert parse_one(VALID[9]).to_sql() == (
        "CREATE SINK s FROM o TO ICEBERG CATALOG c (NAMESPACE = 'n', TABLE = 't') USING AZURE CONNECTION a"
    )
    assert to_sql(a.ConnectionRef(a.ConnectionKind.GCS, a.Ident("G", quoted=True))) == 'USING GCS CONNECTION "G"'


def test_printer_redacts_secret_values_never_secret_names() -> None:
    g = parse_one("CREATE CONNECTION g TO GCS (CREDENTIALS = '{\"private_key\": \"hunter2\"}', PROJECT = 'p')")
    z = parse_one(
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = 'hunter2', SAS TOKEN = SECRET t, "
        "X = 'hunter3')"
    )
    assert to_sql(g, redact=True) == "CREATE CONNECTION g TO GCS (CREDENTIALS = '<redacted>', PROJECT = 'p')"
    assert to_sql(z, redact=True) == (
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = '<redacted>', SAS TOKEN = SECRET t, "
        "X = '<redacted>')"  # an unknown option of a credential list: hidden to be safe
    )


# --------------------------------------------------------------------------- parse errors


def _error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(text)
    return info.value


def _caret(text: str, err: ParseError) -> str:
    assert err.span is not None
    return text[err.span.start : err.span.end]


@pytest.mark.parametrize(
    ("text", "message", "at", "hint"),
    [
        (
            "CREATE SINK s FROM o TO ICEBERG CATALOG c USING GCS CONNECTION g USING AZURE CONNECTION a",
            "USING AZURE CONNECTION cannot be combined with USING GCS CONNECTION",
            "USING AZURE CONNECTION a",
            "a sink writes its table's files through one storage connection: keep one USING clause",
        ),
        (
            "CREATE SINK s FROM o TO ICEBERG CATALOG c USING AWS CONNECTION s3 TABLE t USING GCS CONNECTION g",
            "USING GCS CONNECTION cannot be combined with USING AWS CONNECTION",
            "USING GCS CONNECTION g",
            "a sink writes its table's files through one storage connection: keep one USING clause",
        ),
        (
            "CREATE SINK s FROM o TO ICEBERG CATALOG c USING AZURE CONNECTION a USING AZURE CONNECTION b",
            "USING AZURE CONNECTION is given twice",
            "USING AZURE CONNECTION b",
            "each clause of CREATE SINK may appear once",
        ),
        (
            "CREATE SINK s FROM o TO ICEBERG CATALOG c USING AWS CONNECTION a USING AWS CONNECTION b",
            "USING AWS CONNECTION is given twice",  # as before
            "USING AWS CONNECTION b",
            "each clause of CREATE SINK may appear once",
        ),
        (
            "CREATE CONNECTION c TO S3 (REGION = 'x')",
            "expected AWS, AZURE, CONFLUENT, GCS, ICEBERG or KAFKA, found 'S3'",
            "S3",
            "did you mean AWS? (a connection TO AWS holds S3 credentials)",
        ),
        (
            "CREATE CONNECTION c TO GOOGLE (PROJECT = 'x')",
            "expected AWS, AZURE, CONFLUENT, GCS, ICEBERG or KAFKA, found 'GOOGLE'",
            "GOOGLE",
            "did you mean GCS? (a connection TO GCS holds Google Cloud Storage credentials)",
        ),
        (
            "CREATE SINK s FROM o TO ICEBERG CATALOG c USING WASBS CONNECTION a",
            "expected AWS, AZURE or GCS, found 'WASBS'",
            "WASBS",
            "did you mean AZURE? (a connection TO AZURE holds Azure storage credentials)",
        ),
        (
            "CREATE CONNECTION c TO GSC ()",
            "expected AWS, AZURE, CONFLUENT, GCS, ICEBERG or KAFKA, found 'GSC'",
            "GSC",
            "did you mean GCS?",
        ),
        (
            "CREATE SINK s FROM o TO ICEBERG CATALOG c USING CONNECTION a",
            "expected AWS, AZURE or GCS, found 'CONNECTION'",
            "CONNECTION",
            None,
        ),
    ],
)
def test_errors_point_at_the_clause_and_say_what_to_do(text: str, message: str, at: str, hint: str | None) -> None:
    err = _error(text)
    assert err.message == message
    assert _caret(text, err) == at
    assert err.hint == hint


# --------------------------------------------------------------------------- option lists


def test_every_storage_kind_is_wired_everywhere() -> None:
    assert [s.keyword for s in STORAGE_KINDS] == ["AWS", "GCS", "AZURE"]
    for s in STORAGE_KINDS:
        kind = a.ConnectionKind[s.keyword]
        assert kind.value == s.keyword
        assert CONNECTION_LISTS[kind] == s.list_kind and s.list_kind in LISTS
        assert s.list_kind in CREDENTIAL_LISTS
        assert lookup("iceberg_catalog", s.option)[0] is not None
        assert lookup("source", s.option)[0] is not None
        assert storage_of(s.example) is s
    assert lookup("iceberg_catalog", "GCS CONNECTION")[0].applies == frozenset({"sql", "rest", "glue", "hive"})  # type: ignore[union-attr]
    assert lookup("iceberg_catalog", "AWS CONNECTION")[0].applies == frozenset({"rest", "s3tables", "glue"})  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("path", "keyword"),
    [
        ("s3://b/p", "AWS"),
        ("S3A://b/p", "AWS"),
        ("gs://b/p", "GCS"),
        ("abfs://c@a.dfs.core.windows.net/", "AZURE"),
        ("abfss://c@a.dfs.core.windows.net/", "AZURE"),
        ("wasb://c@a.blob.core.windows.net/", "AZURE"),
        ("WASBS://c@a.blob.core.windows.net/", "AZURE"),
        ("/data/gs://x", None),
        ("data/", None),
        ("hdfs://nn/p", None),
        ("gcs://b/p", None),
    ],
)
def test_storage_of_a_path(path: str, keyword: str | None) -> None:
    found = storage_of(path)
    assert (found.keyword if found else None) == keyword


def test_other_names_of_storages() -> None:
    assert storage_named("S3") is STORAGE["AWS"]
    assert storage_named("GCP") is STORAGE["GCS"]
    assert storage_named("ADLS") is STORAGE["AZURE"]
    assert storage_named("KAFKA") is None


@pytest.mark.parametrize(
    ("list_kind", "name", "level"),
    [
        ("gcs", "CREDENTIALS", Secrecy.VALUE),
        ("gcs", "CREDENTIALS SECRET", Secrecy.NAME),
        ("gcs", "PROJECT", Secrecy.NONE),
        ("gcs", "ENDPOINT", Secrecy.NONE),
        ("gcs", "KEYFILE", Secrecy.VALUE),  # unknown in a credential list
        ("azure", "ACCOUNT KEY", Secrecy.VALUE),
        ("azure", "SAS TOKEN", Secrecy.VALUE),
        ("azure", "ACCOUNT NAME", Secrecy.NONE),
        ("azure", "ACCOUNT KEY SECRET", Secrecy.NAME),
        ("azure", "KEY", Secrecy.VALUE),
        (None, "ACCOUNT KEY", Secrecy.VALUE),  # the list unknown: any list that hides it
        ("iceberg_catalog", "GCS CONNECTION", Secrecy.NONE),
        ("source", "AZURE CONNECTION", Secrecy.NONE),
    ],
)
def test_secrecy(list_kind: str | None, name: str, level: Secrecy) -> None:
    assert secrecy(list_kind, name) is level


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("CREATE CONNECTION g TO GCS (", "gcs"),
        ("CREATE CONNECTION a TO azure (", "azure"),
        ("CREATE CONNECTION a TO AWS (", "aws"),
        ("CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'x') WITH (", "connection_with"),
        ("CREATE CONNECTION c TO ICEBERG CATALOG (", "iceberg_catalog"),
    ],
)
def test_option_list_kind(text: str, kind: str) -> None:
    toks = significant(tokenize(text))
    words = [t.upper for t in toks if t.kind.name == "WORD"]
    assert option_list_kind(words, toks[:-1]) == kind


# --------------------------------------------------------------------------- secrets hidden

SECRET_VALUE = "hunter2-Zq9x"


@pytest.mark.parametrize(
    "text",
    [
        "CREATE CONNECTION g TO GCS (CREDENTIALS = '{\"private_key\": \"<V>\"}', PROJECT = 5x)",
        "CREATE CONNECTION g TO GCS (CREDENTIALS '{\"private_key\": \"<V>\"}')",
        "CREATE CONNECTION g TO GCS (CREDENTIALS = '<V>' PROJECT = 'p')",
        "CREATE CONNECTION g TO GCS (CREDENTIALS = <V>, PROJECT = 'p'",
        "CREATE CONNECTION g TO GCS (PROJECT = 'p', CREDENTIAL = '<V>') WITH (VALIDATE = maybe 1x)",
        "CREATE CONNECTION g TO GCS (KEY FILE = '<V>', PROJECT = 'p',, )",
        "CREATE CONNECTION g TO GSC (CREDENTIALS = '<V>')",
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = '<V>' SAS TOKEN = '<V>')",
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY '<V>')",
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', SAS TOKEN = '<V>', ENDPOINT = )",
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACOUNT KEY = '<V>') WITH VALIDATE",
        "CREATE CONNECTION a TO AZUR (ACCOUNT NAME = 'acct', ACCOUNT KEY = '<V>')",
        "CREATE CONNECTION a TO AZURE ACCOUNT NAME = 'acct', SAS TOKEN = '<V>')",
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', SAS TOKEN = \"<V>\" ENDPOINT)",
        "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = '<V>'",
    ],
)
def test_secret_values_never_show_in_errors_or_history(text: str) -> None:
    text = text.replace("<V>", SECRET_VALUE)
    err = _error(text)
    rendered = err.render()
    assert "hunter" not in rendered and "Zq9x" not in rendered, rendered
    history = redact_secrets(text)
    assert "hunter" not in history and "Zq9x" not in history, history
    assert SECRET_VALUE not in mask_secrets(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "CREATE CONNECTION g TO GCS (PROJECT = 'p', CREDENTIALS = '{\"private_key\": \"k\"}', ENDPOINT = 'http://e');",
            "CREATE CONNECTION g TO GCS (PROJECT = 'p', CREDENTIALS = '<redacted>', ENDPOINT = 'http://e');",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = 'k1', SAS TOKEN = 'k2')",
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = '<redacted>', SAS TOKEN = '<redacted>')",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = SECRET k, SAS TOKEN SECRET = t)",
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = SECRET k, SAS TOKEN SECRET = t)",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', GCS CONNECTION = g)",
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', GCS CONNECTION = g)",
        ),
        (
            "CREATE SOURCE f FROM FILES 'gs://b/' (FORMAT = 'parquet', GCS CONNECTION = g)",
            "CREATE SOURCE f FROM FILES 'gs://b/' (FORMAT = 'parquet', GCS CONNECTION = g)",
        ),
    ],
)
def test_history_redaction(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


def test_masked_error_keeps_the_caret_right() -> None:
    text = "CREATE CONNECTION a TO AZURE (ACCOUNT KEY = 'abc-secret-key', ACCOUNT NAME = 'acct' 'x')"
    err = _error(text)
    assert err.source is not None and "abc-secret-key" not in err.source
    assert len(err.source) == len(text)
    assert _caret(text, err) == "'x'"
    assert [text[s.start : s.end] for s in find_secrets(text)] == ["'abc-secret-key'"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a statement commented out, or prose, keeps an account key's value hidden too
        (
            "CREATE -- CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = 'k')",
            "CREATE -- CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = '<redacted>')",
        ),
        ("SHOW SINKS; -- ACCOUNT KEY = 'k'", "SHOW SINKS; -- ACCOUNT KEY = '<redacted>'"),
        ("SHOW SINKS; -- ssl key = 'k'", "SHOW SINKS; -- ssl key = '<redacted>'"),
        # a stray '(' made the rest of the list a nested one
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME ( = 'acct', ACCOUNT KEY = 'k')",
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME ( = 'acct', ACCOUNT KEY = '<redacted>')",
        ),
        # pyiceberg's property for an Azure account key, wherever properties are given
        (
            "CREATE SINK s FROM t TO ICEBERG CATALOG c WITH (PROPERTIES = ('adls.account-key' = 'k', 'a' = 'b'))",
            "CREATE SINK s FROM t TO ICEBERG CATALOG c WITH (PROPERTIES = ('adls.account-key' = '<redacted>', 'a' = 'b'))",
        ),
        ("SHOW SINKS -- the key is 'abc'", "SHOW SINKS -- the key is 'abc'"),  # no secret said
    ],
)
def test_keys_that_say_no_secret_word_are_secret(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


def test_secrecy_of_property_keys() -> None:
    assert secrecy("sink", "adls.account-key", key_is_string=True) is Secrecy.VALUE
    assert secrecy("sink", "adls.sas-token.acct", key_is_string=True) is Secrecy.VALUE
    assert secrecy("sink", "gcs.oauth2.token", key_is_string=True) is Secrecy.VALUE
    assert secrecy("sink", "write.format.default", key_is_string=True) is Secrecy.NONE
    assert secrecy("sink", "KEY FORMATT") is Secrecy.NONE  # an unknown sink option that is no key
