"""Encryption of credentials at rest: the secret store key and `SecretBox`.

Why: the catalog is persisted (as JSON, in every checkpoint) with the values of
`CREATE SECRET` and every credential WITH option (engine/catalog/credentials.py) of
sources, sinks, connections and Iceberg tables. They are written sealed with AES-256-GCM
(`swell-enc:v1:<base64url(nonce || ciphertext)>`), so a copied data directory, a backup of
the state store or a stray log of the catalog blob does not reveal them.

The key, as RisingWave's `RW_SECRET_STORE_PRIVATE_KEY_HEX`:
* `SWELL_SECRET_STORE_PRIVATE_KEY_HEX` (16, 24 or 32 bytes in hex) when set: the key
  never touches the disk;
* otherwise (the playground) `<data_dir>/secret.key`, created on first start with 32
  random bytes (mode 0600) and read afterwards. It lives beside the state, never inside
  it: a copy of `<data_dir>/state` alone holds only sealed values.
The catalog records a check value of the key (`key_check`, an HMAC of a constant, which
reveals nothing about the key); opening a catalog sealed with another key fails with a
message saying which key is needed, instead of handing connectors garbage.

Lifecycle: `open_secret_box(data_dir, create=...)` once per database open, before the
catalog is read (`create` is False when the stored catalog is sealed already); the box is
then attached to the catalog (`Catalog.box`) and used by its serialisation on every
checkpoint. Sealing caches the ciphertext of each value so the catalog blob stays stable
between checkpoints and costs no encryption.
"""

from __future__ import annotations

import base64
import hmac
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from engine.errors import ObjectNotInPrerequisiteState

KEY_ENV = "SWELL_SECRET_STORE_PRIVATE_KEY_HEX"
KEY_FILE = "secret.key"
PREFIX = "swell-enc:v1:"
_AAD = b"swell catalog credential"


class SecretKeyError(ObjectNotInPrerequisiteState):
    """The key cannot open what the catalog holds (or is malformed)."""


class SecretBox:
    """Seals and opens credential strings with one AES-GCM key."""

    def __init__(self, key: bytes, source: str) -> None:
        if len(key) not in (16, 24, 32):
            raise SecretKeyError(
                f"the secret store key must be 16, 24 or 32 bytes, got {len(key)} ({source})"
            )
        self._aead = AESGCM(key)
        self.source = source  # "environment" or the key file's path, for messages
        self.key_check = hmac.digest(key, b"swell secret store key check", "sha256").hex()[:32]
        self._sealed: dict[str, str] = {}

    def seal(self, value: str) -> str:
        if value.startswith(PREFIX):
            return value
        cached = self._sealed.get(value)
        if cached is not None:
            return cached
        nonce = secrets.token_bytes(12)
        data = nonce + self._aead.encrypt(nonce, value.encode(), _AAD)
        out = PREFIX + base64.urlsafe_b64encode(data).decode()
        if len(self._sealed) < 10_000:
            self._sealed[value] = out
        return out

    def open(self, value: str) -> str:
        if not value.startswith(PREFIX):
            return value  # written before encryption existed: plain
        data = base64.urlsafe_b64decode(value[len(PREFIX) :])
        try:
            plain = self._aead.decrypt(data[:12], data[12:], _AAD).decode()
        except InvalidTag:
            raise mismatch(self.source) from None
        self._sealed.setdefault(plain, value)
        return plain

    def __repr__(self) -> str:  # never print the key
        return f"SecretBox({self.source})"


def is_sealed(value: object) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def mismatch(source: str) -> SecretKeyError:
    return SecretKeyError(
        f"the catalog's credentials were encrypted with another secret store key "
        f"than the one in use ({source})",
        hint=f"Start the server with the key used when they were stored: set {KEY_ENV}, "
        f"or restore the data directory's {KEY_FILE}.",
    )


def open_secret_box(data_dir: Path, *, create: bool = True) -> SecretBox:
    """The box for this server: the key from the environment, else the data directory's
    key file, created when missing if `create` (False when the catalog is already sealed:
    a new key could not open it, so the missing key is reported instead)."""
    env = os.environ.get(KEY_ENV, "").strip()
    if env:
        try:
            key = bytes.fromhex(env)
        except ValueError:
            raise SecretKeyError(f"{KEY_ENV} is not hexadecimal") from None
        return SecretBox(key, f"from {KEY_ENV}")
    path = Path(data_dir) / KEY_FILE
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        if not create:
            raise SecretKeyError(
                f"the catalog's credentials are encrypted but the secret store key is "
                f"missing: {path} does not exist and {KEY_ENV} is not set",
                hint=f"Set {KEY_ENV} to the key used when they were stored, or restore {path}.",
            ) from None
        text = _create_key_file(path)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise SecretKeyError(f"{path} does not hold a hexadecimal key") from None
    return SecretBox(key, f"key file {path}")


def _create_key_file(path: Path) -> str:
    text = secrets.token_bytes(32).hex()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it meanwhile
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())
    return text
