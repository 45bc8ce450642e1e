"""Secret values as the ``secrets`` table stores them: in clear, or encrypted under one key.

``SecretCodec`` holds a store's passphrase (``ICESQL_SECRET_KEY``) and turns a value into the
``(value, encoding)`` pair stored, and back. Once a key has been used, a value written without
one is refused rather than stored in clear next to encrypted ones (the one an attacker would
read), and a second key is refused: a known token in ``meta`` (``secret_key_check``) is checked
before the first value is encrypted.
"""

from __future__ import annotations

import sqlite3

from . import crypto
from .errors import StoreError, describe

_KEY_HINT = "export ICESQL_SECRET_KEY with the passphrase the store was written with"


def check_value(name: str, value: object) -> None:
    """``StoreError`` unless a secret's value is a string (the message never shows it)."""
    if not isinstance(value, str):
        raise StoreError(
            f"the value of {describe('secret', name)} must be a string, not {type(value).__name__}"
        )


class SecretCodec:
    """Encodes and decodes one store's secret values; ``secret_key`` None: no encryption."""

    def __init__(self, secret_key: str | None) -> None:
        self._passphrase = crypto.Passphrase(secret_key) if secret_key else None
        self._cipher: crypto.SecretCipher | None = None
        self._key_checked = False

    @property
    def encrypted(self) -> bool:
        """True when a secret key is set, so new values are encrypted."""
        return self._passphrase is not None

    def encode(self, conn: sqlite3.Connection, value: str) -> tuple[str, str]:
        """``(stored value, encoding)`` for a new value, inside the caller's write transaction."""
        if self._passphrase is None:
            # the key check is written with the first encrypted value (same transaction)
            encrypted = conn.execute("SELECT 1 FROM meta WHERE key = 'secret_key_check'").fetchone()
            if encrypted is not None:
                # once a key was used, a value stored in clear beside encrypted ones would be
                # the one an attacker reads
                raise StoreError(
                    "this catalog store encrypts secret values; set ICESQL_SECRET_KEY to store one",
                    hint=_KEY_HINT,
                )
            return value, crypto.PLAIN
        cipher = self._secret_cipher(conn)
        if not self._key_checked:
            # A known token, so values are never encrypted under two different keys.
            row = conn.execute("SELECT value FROM meta WHERE key = 'secret_key_check'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('secret_key_check', ?)",
                    (cipher.encrypt("icesql-catalog-store"),),
                )  # verified next time: this transaction may still roll back
            elif cipher.decrypt(str(row[0])) is None:
                raise StoreError(
                    "ICESQL_SECRET_KEY is not the key this store's secrets are encrypted with",
                    hint="use the original passphrase",
                )
            else:
                self._key_checked = True
        return cipher.encrypt(value), crypto.ENCODING

    def decode(self, conn: sqlite3.Connection, name: str, stored: str, encoding: str) -> str:
        """The value of secret ``name`` from its stored form; ``StoreError`` when it is
        encrypted and no key (or another key) is set."""
        if encoding == crypto.PLAIN:
            return stored
        if encoding != crypto.ENCODING:
            raise StoreError(f"{describe('secret', name)} uses an unknown encoding {encoding!r}")
        if self._passphrase is None:
            raise StoreError(f"{describe('secret', name)} is encrypted; set ICESQL_SECRET_KEY", hint=_KEY_HINT)
        plain = self._secret_cipher(conn).decrypt(stored)
        if plain is None:
            raise StoreError(
                f"{describe('secret', name)} cannot be decrypted: ICESQL_SECRET_KEY is not the key "
                "it was encrypted with"
            )
        return plain

    def _secret_cipher(self, conn: sqlite3.Connection) -> crypto.SecretCipher:
        assert self._passphrase is not None
        if self._cipher is None:
            row = conn.execute("SELECT value FROM meta WHERE key = 'secret_salt'").fetchone()
            if row is None:
                raise StoreError("the catalog store has no encryption salt; it was not fully migrated")
            self._cipher = crypto.SecretCipher(self._passphrase, bytes.fromhex(str(row[0])))
        return self._cipher
