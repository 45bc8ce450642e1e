"""Secret values never reach the history file: lexical redaction of raw (even invalid) SQL."""

from __future__ import annotations

import pytest

from icesql.repl.redact import REDACTED, redact_secrets


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CREATE SECRET pw AS 'hunter2';", f"CREATE SECRET pw AS {REDACTED};"),
        ("create secret if not exists pw as 'x''y'", f"create secret if not exists pw as {REDACTED}"),
        ("ALTER SECRET pw AS 'new-value';", f"ALTER SECRET pw AS {REDACTED};"),
        ("CREATE SECRET pw AS 'unterminated", f"CREATE SECRET pw AS {REDACTED}"),
        ('CREATE SECRET pw AS "double";', f"CREATE SECRET pw AS {REDACTED};"),
        (
            "CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AKIA1', SECRET ACCESS KEY = 'plain', SESSION TOKEN = 'tok');",
            f"CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AKIA1', SECRET ACCESS KEY = {REDACTED}, SESSION TOKEN = {REDACTED});",
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE='rest', USER='u', PASSWORD='p', CREDENTIAL='id:sec', TOKEN='t')",
            f"CREATE CONNECTION c TO ICEBERG CATALOG (TYPE='rest', USER='u', PASSWORD={REDACTED}, CREDENTIAL={REDACTED}, TOKEN={REDACTED})",
        ),
        # a connection's PROPERTIES go to pyiceberg, where credentials hide: every value, as
        # in error messages (one rule)
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (PROPERTIES = ('s3.secret-access-key' = 'k', 'a' = 'b'))",
            f"CREATE CONNECTION c TO ICEBERG CATALOG (PROPERTIES = ('s3.secret-access-key' = {REDACTED}, 'a' = {REDACTED}))",
        ),
        # elsewhere a property key that says secret
        (
            "CREATE SINK s FROM t TO ICEBERG CATALOG c WITH (PROPERTIES = ('x.token' = 'k', 'a' = 'b'))",
            f"CREATE SINK s FROM t TO ICEBERG CATALOG c WITH (PROPERTIES = ('x.token' = {REDACTED}, 'a' = 'b'))",
        ),
    ],
)
def test_redacts(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "CREATE CONNECTION a TO AWS (SECRET ACCESS KEY = SECRET s, REGION = 'eu-west-1');",
        "CREATE CONNECTION c TO ICEBERG CATALOG (USER = 'u', PASSWORD SECRET = pw);",
        "SHOW SECRETS;",
        "DROP SECRET pw;",
        "CREATE SINK s FROM r TO ICEBERG CATALOG c (NAMESPACE = 'n', TABLE = 't');",
        "-- rotate the secret every month, ops says so\nSHOW SINKS;",
    ],
)
def test_leaves_references_and_other_text_alone(text: str) -> None:
    assert redact_secrets(text) == text


def test_a_statement_commented_out_keeps_its_value_hidden() -> None:
    assert redact_secrets("-- CREATE SECRET pw AS 'in a comment'\nSHOW SINKS;") == (
        f"-- CREATE SECRET pw AS {REDACTED}\nSHOW SINKS;"
    )
    assert redact_secrets("/* ALTER SECRET pw AS 'x1' */ SHOW SINKS") == f"/* ALTER SECRET pw AS {REDACTED} */ SHOW SINKS"


def test_several_statements() -> None:
    text = "CREATE SECRET a AS 'one'; SHOW SECRETS; ALTER SECRET a AS 'two';"
    out = redact_secrets(text)
    assert "one" not in out and "two" not in out and "SHOW SECRETS" in out


VALUE = "Zq7vK2mWx9Lp"


@pytest.mark.parametrize(
    "typed",
    [
        f"CREATE SECRET pw '{VALUE}';",
        f"CREATE SECERT pw AS '{VALUE}';",
        f"create secret pw as {VALUE};",
        f"CREATE SECRET p'w AS '{VALUE}';",
        f'CREATE SECRET pw AS "{VALUE}";',
        f"CREATE CONNECTION a TO AWS (SECRET ACCESS KEY '{VALUE}');",
        f"CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', PASSWORD {VALUE});",
        f"CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', PASWORD = '{VALUE}');",
    ],
)
def test_mistyped_secret_statements_are_redacted_too(typed: str) -> None:
    out = redact_secrets(typed)
    assert not any(VALUE[i : i + 5] in out for i in range(len(VALUE) - 4)), out


def test_the_history_file_is_owner_only_and_redacted(tmp_path) -> None:
    import os
    import stat

    from icesql.repl.shell import RedactingFileHistory

    path = tmp_path / "history"
    history = RedactingFileHistory(str(path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    history.store_string(f"CREATE SECERT pw AS '{VALUE}';")
    assert VALUE not in path.read_text()
    os.chmod(path, 0o644)  # an older icesql made it world-readable
    RedactingFileHistory(str(path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_an_unquoted_value_that_starts_like_a_statement_is_masked() -> None:
    """Found by the property test: `= SHOW SECR` is a value (only CREATE or ALTER after a lost
    ')' and ';' start a statement that carries a secret), so every word of it is masked."""
    text = "CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AKIDEXAMPLE', SECRET ACCESS KEY = SHOW SECR, REGION = 'eu-west-1')"
    out = redact_secrets(text)
    assert "SHOW" not in out and "SECR," not in out, out


@pytest.mark.parametrize("value", ["000TOKEN", "1e5SECRET", "12abc", "00 TOKEN", "7 SECRET"])
def test_an_unquoted_value_lexed_as_a_number_and_a_word_is_masked_whole(value: str, tmp_path) -> None:
    """Found by the property test: `PASSWORD = 000TOKEN` lexes as 000 and TOKEN (and `00 TOKEN`
    is two tokens anyway); TOKEN reads like an option's name, but inside a secret's value only
    `NAME =` starts a new option, so neither the redacted text nor the parse error shows any of it."""
    import icesql

    text = (
        "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', USER = 'u', "
        f"PASSWORD = {value})"
    )
    assert value[-4:] not in redact_secrets(text)
    with pytest.raises(icesql.IcesqlError) as err:
        icesql.Session(home=tmp_path).execute(text)
    shown = err.value.render()
    assert value[-4:] not in shown and value[:3] not in shown.split("\n", 1)[1], shown
