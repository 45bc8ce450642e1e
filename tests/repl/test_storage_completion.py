"""The shell knows GCS and AZURE connections: keywords, option names and values, the
connections a clause names, and secret values kept out of the history."""

from __future__ import annotations

import pytest

from icesql.repl import vocabulary as vocab
from icesql.repl.completion import Suggestion, suggest
from icesql.repl.redact import REDACTED, redact_secrets


def kinds(text: str, grammar: bool = False) -> dict[str, Suggestion]:
    kw = {} if grammar else {"expected_tokens": lambda t: set()}
    return {s.kind: s for s in suggest(text, **kw)}  # type: ignore[arg-type]


def keywords(text: str) -> set[str]:
    return {v for s in suggest(text) if s.kind == "keyword" for v in s.values}


def test_keywords_from_the_grammar() -> None:
    assert {"AWS", "GCS", "AZURE", "ICEBERG", "KAFKA"} <= keywords("CREATE CONNECTION c TO ")
    assert keywords("CREATE SINK s FROM r TO ICEBERG CATALOG c USING ") == {"AWS", "GCS", "AZURE"}
    assert "CONNECTION" in keywords("CREATE SINK s FROM r TO ICEBERG CATALOG c USING GCS ")
    assert {"GCS", "AZURE"} <= vocab.keywords()  # coloured as keywords


def test_option_names_of_gcs_and_azure_connections() -> None:
    gcs = kinds("CREATE CONNECTION g TO GCS (")["option"].values
    assert set(gcs) >= {"PROJECT", "CREDENTIALS", "ENDPOINT", "CREDENTIALS SECRET"}
    assert "REGION" not in gcs and "ACCOUNT KEY" not in gcs
    azure = kinds("CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ")["option"].values
    assert {"ACCOUNT KEY", "SAS TOKEN", "ENDPOINT"} <= set(azure) and "ACCOUNT NAME" not in azure
    s = kinds("CREATE CONNECTION a TO AZURE (SAS T")["option"]
    assert s.prefix == "SAS T" and "SAS TOKEN" in s.values


def test_secret_options_offer_secret() -> None:
    assert kinds("CREATE CONNECTION g TO GCS (CREDENTIALS = ")["keyword"].values == ("SECRET",)
    assert kinds("CREATE CONNECTION a TO AZURE (ACCOUNT KEY = ")["keyword"].values == ("SECRET",)
    assert kinds("CREATE CONNECTION a TO AZURE (SAS TOKEN = SECRET ")["object"].values == ("secret",)
    assert kinds("CREATE CONNECTION a TO AZURE (SAS TOKEN SECRET = ")["object"].values == ("secret",)


@pytest.mark.parametrize(
    "text",
    [
        "CREATE SINK s FROM r TO ICEBERG CATALOG c USING GCS CONNECTION ",
        "CREATE SINK s FROM r INTO ICEBERG CATALOG CONNECTION c (TABLE = 't') USING AZURE CONNECTION ",
        "CREATE SINK s FROM r TO ICEBERG CATALOG c USING AZURE CONNECTION bl",
        "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', GCS CONNECTION = ",
        "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', AZURE CONNECTION = ",
        "CREATE SOURCE f FROM FILES 'gs://b/' (FORMAT = 'parquet', GCS CONNECTION = ",
    ],
)
def test_connections_where_a_storage_connection_is_named(text: str) -> None:
    assert kinds(text)["object"].values == ("connection",)


def test_catalog_and_source_options_narrow_to_where_they_apply() -> None:
    rest = kinds("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', ")["option"].values
    assert {"AWS CONNECTION", "GCS CONNECTION", "AZURE CONNECTION"} <= set(rest)
    hive = kinds("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'hive', ")["option"].values
    assert {"GCS CONNECTION", "AZURE CONNECTION"} <= set(hive) and "AWS CONNECTION" not in hive
    local = kinds("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'local', ")["option"].values
    assert "GCS CONNECTION" not in local and "AZURE CONNECTION" not in local
    s3tables = kinds("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3tables', ")["option"].values
    assert "AWS CONNECTION" in s3tables and "GCS CONNECTION" not in s3tables
    files = kinds("CREATE SOURCE f FROM FILES 'gs://b/' (")["option"].values
    assert {"AWS CONNECTION", "GCS CONNECTION", "AZURE CONNECTION"} <= set(files)
    gen = kinds("CREATE SOURCE g FROM GENERATOR (")["option"].values
    assert "GCS CONNECTION" not in gen


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "CREATE CONNECTION g TO GCS (PROJECT = 'p', CREDENTIALS = '{\"private_key\": \"k\"}');",
            f"CREATE CONNECTION g TO GCS (PROJECT = 'p', CREDENTIALS = {REDACTED});",
        ),
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = 'k', ENDPOINT = 'http://e')",
            f"CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = {REDACTED}, ENDPOINT = 'http://e')",
        ),
        (
            "create connection a to azure (account name = 'acct', sas token = 'sv=1&sig=x')",
            f"create connection a to azure (account name = 'acct', sas token = {REDACTED})",
        ),
        # unknown options of a storage connection may be credentials mistyped: hidden
        (
            "CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACOUNT KEY = 'k')",
            f"CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACOUNT KEY = {REDACTED})",
        ),
        (
            "CREATE CONNECTION g TO GCS (KEYFILE = 'k', PROJECT = 'p')",
            f"CREATE CONNECTION g TO GCS (KEYFILE = {REDACTED}, PROJECT = 'p')",
        ),
        # the kind misspelled: still a connection's options
        (
            "CREATE CONNECTION a TO AZUR (ACCOUNT NAME = 'acct', ACCOUNT KEY = 'k')",
            f"CREATE CONNECTION a TO AZUR (ACCOUNT NAME = 'acct', ACCOUNT KEY = {REDACTED})",
        ),
        # secret names stay
        (
            "CREATE CONNECTION g TO GCS (CREDENTIALS = SECRET sa)",
            "CREATE CONNECTION g TO GCS (CREDENTIALS = SECRET sa)",
        ),
    ],
)
def test_history_never_holds_a_storage_credential(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected
