"""Secrets at rest: MultiFernet (first key encrypts, all decrypt) behind column types.

The keyring is process-wide because SQLAlchemy column types cannot receive request state;
`configure_keys()` is called once by the app lifespan and by the CLI.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from app.config import Settings
from app.security.redact import register_secret, register_secrets

_KEY_FILE = "secret.key"
_keyring: MultiFernet | None = None


class SecretsUnavailable(RuntimeError):
    """No key configured, or the stored value was written under a key we no longer have."""


def configure_keys(keys: list[str]) -> None:
    global _keyring
    _keyring = MultiFernet([Fernet(k) for k in keys]) if keys else None


def resolve_keys(settings: Settings) -> list[str]:
    """Keys from QUIVER_SECRET_KEYS, else a key file under the data dir (created 0600)."""
    if settings.secret_keys:
        return [k.get_secret_value() for k in settings.secret_keys]
    path = settings.data_dir / _KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "w") as fh:
            fh.write(Fernet.generate_key().decode())
    return [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]


def configure_from_settings(settings: Settings) -> None:
    configure_keys(resolve_keys(settings))


def _ring() -> MultiFernet:
    if _keyring is None:
        raise SecretsUnavailable("no secret keys configured (QUIVER_SECRET_KEYS)")
    return _keyring


def encrypt(plaintext: str) -> str:
    return _ring().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _ring().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise SecretsUnavailable(
            "stored secret cannot be decrypted with the configured keys"
        ) from exc


def rotate(token: str) -> str:
    """Re-encrypt a stored token under the first key."""
    return _ring().rotate(token.encode()).decode()


class EncryptedStr(TypeDecorator[str]):
    """A string stored as a Fernet token."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        register_secret(value)
        return encrypt(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        plain = decrypt(value)
        register_secret(plain)
        return plain


class EncryptedJSON(TypeDecorator[Any]):
    """A JSON value stored as a Fernet token."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        if value is None:
            return None
        register_secrets(value)
        return encrypt(json.dumps(value, separators=(",", ":")))

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        plain = json.loads(decrypt(value))
        register_secrets(plain)
        return plain
