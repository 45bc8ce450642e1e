"""Encryption of secret values at rest.

The key is derived from a passphrase (``ICESQL_SECRET_KEY``) with scrypt and a per-store
random salt kept in the ``meta`` table, and used as a Fernet key (AES-128-CBC + HMAC-SHA256,
authenticated, from the ``cryptography`` package). The derivation uses the standard library's
``hashlib.scrypt``; only Fernet needs ``cryptography``, which is imported lazily so a store
without a key never needs it.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from .errors import StoreError

ENCODING = "fernet-scrypt-v1"
PLAIN = "plain"
# scrypt cost: ~16 MiB and a few tens of ms, paid once per store object.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**14, 8, 1

INSTALL_HINT = ".venv/bin/pip install 'cryptography>=42'   (or: pip install 'icesql[engine]')"


class Passphrase:
    """Holds the passphrase; never shows it in repr/str and refuses to be pickled."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Passphrase('********')"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a secret key cannot be pickled")


def _fernet_class() -> Any:
    try:
        from cryptography.fernet import Fernet
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise StoreError(
            "encrypting secrets at rest (ICESQL_SECRET_KEY is set) needs the 'cryptography' package",
            hint=f"install it: {INSTALL_HINT}",
        ) from exc
    return Fernet


class SecretCipher:
    """Fernet keyed by scrypt(passphrase, salt)."""

    def __init__(self, passphrase: Passphrase, salt: bytes) -> None:
        fernet = _fernet_class()
        raw = hashlib.scrypt(
            passphrase.reveal().encode("utf-8"),
            salt=salt,
            n=_SCRYPT_N,
            r=_SCRYPT_R,
            p=_SCRYPT_P,
            dklen=32,
        )
        self._fernet = fernet(base64.urlsafe_b64encode(raw))

    def encrypt(self, value: str) -> str:
        token: bytes = self._fernet.encrypt(value.encode("utf-8"))
        return token.decode("ascii")

    def decrypt(self, token: str) -> str | None:
        """The plaintext, or None when the token was made with another key (or altered)."""
        from cryptography.fernet import InvalidToken

        try:
            plain: bytes = self._fernet.decrypt(token.encode("ascii"))
        except (InvalidToken, ValueError):
            return None
        return plain.decode("utf-8")

    def __repr__(self) -> str:
        return "SecretCipher(<key hidden>)"
