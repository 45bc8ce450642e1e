"""Secrets: values only in the secrets table, hidden inline secrets, encryption at rest, redaction."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from catalog_store import CatalogStore, ObjectExistsError, ObjectNotFoundError, StoreError

VALUE = "s3cr3t-Value-7f3a9c"
KEY = "correct horse battery staple"


def _raw_bytes(path: Path) -> bytes:
    """The database file and its WAL / shared-memory companions, as stored on disk."""
    data = b""
    for suffix in ("", "-wal", "-shm"):
        candidate = Path(f"{path}{suffix}")
        if candidate.exists():
            data += candidate.read_bytes()
    return data


def test_create_get_alter_drop(store: CatalogStore) -> None:
    assert store.create_secret("pw", VALUE) is True
    assert store.get_secret("pw") == VALUE
    obj = store.get_object("secret", "pw")
    assert obj is not None
    assert obj.sql == "CREATE SECRET pw AS '********'"
    assert obj.definition == {} and VALUE not in repr(obj)
    assert store.create_secret("pw", "other", if_not_exists=True) is False
    assert store.get_secret("pw") == VALUE
    with pytest.raises(ObjectExistsError):
        store.create_secret("pw", "other")
    store.alter_secret("pw", "new-value")
    assert store.get_secret("pw") == "new-value"
    assert store.drop_object("secret", "pw") == [("secret", "pw")]
    with pytest.raises(ObjectNotFoundError) as info:
        store.get_secret("pw")
    assert info.value.message == 'secret "pw" does not exist'
    with pytest.raises(ObjectNotFoundError):
        store.alter_secret("pw", "x")


def test_quoted_name_in_sql(store: CatalogStore) -> None:
    store.create_secret('My "Key"', VALUE)
    assert store.get_object("secret", 'My "Key"').sql == 'CREATE SECRET "My ""Key""" AS \'********\''  # type: ignore[union-attr]


def test_value_lives_only_in_the_secrets_table(store: CatalogStore) -> None:
    store.create_secret("pw", VALUE)
    conn = store._connection()  # white-box: nothing but `secrets` may hold the value
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        if table == "secrets":
            continue
        for row in conn.execute(f"SELECT * FROM {table}"):
            assert VALUE not in repr(row), table


def test_hidden_secrets(store: CatalogStore) -> None:
    store.create_secret("__inline_cat_password", VALUE, hidden=True)
    store.create_secret("visible", "v")
    assert [o.name for o in store.list_objects()] == ["visible"]
    assert [o.name for o in store.list_objects("secret", include_hidden=True)] == [
        "__inline_cat_password",
        "visible",
    ]
    assert store.find_object("__inline_cat_password") is None
    found = store.find_object("__inline_cat_password", include_hidden=True)
    assert found is not None and found.hidden
    hidden = store.get_object("secret", "__inline_cat_password")
    assert hidden is not None and hidden.hidden
    assert store.get_secret("__inline_cat_password") == VALUE


def test_hidden_secrets_are_dropped_with_their_last_user(store: CatalogStore) -> None:
    store.create_secret("__inline_a", "a", hidden=True)
    store.create_secret("__inline_b", "b", hidden=True)
    store.create_secret("shared", "s")
    store.create_object(
        "connection",
        "cat",
        "c",
        {},
        [("secret", "__inline_a"), ("secret", "__inline_b"), ("secret", "shared")],
    )
    store.create_object("connection", "cat2", "c", {}, [("secret", "__inline_b")])
    # ALTER that stops using an inline secret drops it.
    store.replace_object("connection", "cat", "c", {}, [("secret", "__inline_b"), ("secret", "shared")])
    assert store.get_object("secret", "__inline_a") is None
    # DROP drops the inline secrets nothing else uses, after the object; named secrets stay.
    assert store.drop_object("connection", "cat") == [("connection", "cat")]
    assert store.get_secret("__inline_b") == "b"
    # Internal objects are not reported as dropped.
    assert store.drop_object("connection", "cat2") == [("connection", "cat2")]
    assert store.get_object("secret", "__inline_b") is None
    assert store.get_secret("shared") == "s"
    assert store._connection().execute("SELECT count(*) FROM secrets").fetchone()[0] == 1


def test_encryption_at_rest(store_path: Path) -> None:
    with CatalogStore(store_path, secret_key=KEY) as s:
        assert s.encrypted
        s.create_secret("pw", VALUE)
        s.create_secret("pw2", VALUE + "-2")
        s.alter_secret("pw2", VALUE + "-3")
        assert s.get_secret("pw") == VALUE
        assert s.get_secret("pw2") == VALUE + "-3"
        raw = _raw_bytes(store_path)  # while the WAL still holds the pages
        assert VALUE.encode() not in raw
        assert KEY.encode() not in raw
    assert VALUE.encode() not in _raw_bytes(store_path)
    # Another process with the key reads it back (the salt is in the store).
    with CatalogStore(store_path, secret_key=KEY) as s:
        assert s.get_secret("pw") == VALUE


def test_encrypted_without_key_fails_clearly(store_path: Path) -> None:
    with CatalogStore(store_path, secret_key=KEY) as s:
        s.create_secret("pw", VALUE)
    with CatalogStore(store_path) as s:
        assert not s.encrypted
        with pytest.raises(StoreError) as info:
            s.get_secret("pw")
        assert info.value.message == 'secret "pw" is encrypted; set ICESQL_SECRET_KEY'
        assert s.get_object("secret", "pw") is not None  # metadata stays readable


def test_wrong_key_fails_clearly(store_path: Path) -> None:
    with CatalogStore(store_path, secret_key=KEY) as s:
        s.create_secret("pw", VALUE)
    with CatalogStore(store_path, secret_key="wrong key") as s:
        with pytest.raises(StoreError, match='secret "pw" cannot be decrypted'):
            s.get_secret("pw")
        with pytest.raises(StoreError, match="not the key"):
            s.create_secret("other", "x")  # never mix two keys in one store
        assert s.get_object("secret", "other") is None


def test_key_from_environment(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICESQL_SECRET_KEY", KEY)
    with CatalogStore(store_path) as s:
        assert s.encrypted
        s.create_secret("pw", VALUE)
    assert VALUE.encode() not in _raw_bytes(store_path)
    with CatalogStore(store_path, secret_key=KEY) as s:
        assert s.get_secret("pw") == VALUE


def test_encrypt_plain_secrets(store_path: Path) -> None:
    with CatalogStore(store_path) as s:
        s.create_secret("pw", VALUE)
        with pytest.raises(StoreError, match="no secret key"):
            s.encrypt_plain_secrets()
    with CatalogStore(store_path, secret_key=KEY) as s:
        assert s.get_secret("pw") == VALUE  # values stored before the key still read
        assert s.encrypt_plain_secrets() == 1
        assert s.get_secret("pw") == VALUE
        s._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    # secure_delete overwrote the old plaintext page content.
    assert VALUE.encode() not in _raw_bytes(store_path)
    with CatalogStore(store_path) as s, pytest.raises(StoreError, match="encrypted"):
        s.get_secret("pw")


def test_missing_cryptography_names_the_pip_command(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.fernet", None)  # makes the import fail
    with CatalogStore(store_path, secret_key=KEY) as s:
        with pytest.raises(StoreError) as info:
            s.create_secret("pw", VALUE)
        assert "cryptography" in info.value.message
        assert info.value.hint is not None and "pip install" in info.value.hint
        assert s.get_object("secret", "pw") is None


def test_redaction(store_path: Path) -> None:
    with CatalogStore(store_path, secret_key=KEY) as s:
        s.create_secret("pw", VALUE)
        s.create_secret("__inline", VALUE, hidden=True)
        s.create_object("connection", "cat", "CREATE CONNECTION cat ... SECRET pw", {}, [("secret", "pw")])
        texts = [repr(s), str(s), repr(s.__dict__)]
        texts += [repr(o) for o in s.list_objects(include_hidden=True)]
        texts += [repr(s.find_object("pw")), repr(s.get_object("secret", "__inline"))]
        errors: list[BaseException] = []
        for action in (
            lambda: s.create_secret("pw", VALUE),
            lambda: s.drop_object("secret", "pw"),
            lambda: s.alter_secret("missing", VALUE),
            lambda: s.create_secret("bad", VALUE.encode()),  # type: ignore[arg-type]
            lambda: s.create_object("source", "x", "s", {"v": VALUE.encode()}),
        ):
            with pytest.raises(StoreError) as info:
                action()
            errors.append(info.value)
        for error in errors:
            texts += [str(error), repr(error), repr(error.args), str(getattr(error, "hint", ""))]
            assert error.__cause__ is None or VALUE not in repr(error.__cause__)
        for text in texts:
            assert VALUE not in text
            assert KEY not in text
    with CatalogStore(store_path) as s:
        with pytest.raises(StoreError) as info:
            s.get_secret("pw")
        assert VALUE not in repr(info.value)
