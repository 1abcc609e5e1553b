"""Credential values encrypted at rest with AES-GCM (`cryptography`, imported when a cipher
is made).

The key is 32 bytes, from `NOETL_CREDENTIAL_KEY` (base64, or 64 hex digits) or from a key file
(`--credential-key-file FILE`, the same text). `noetl-vm serve` refuses to start without one
(NOE874) rather than store plain text; a `noetl-vm worker` with the key in its environment
resolves keychain entries from the store (`StoreCredentials`). A stored value is `nonce (12 bytes) || ciphertext`, the
credential's name bound as associated data, so a row copied under another name does not
decrypt.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
from pathlib import Path
from typing import Any

from noetlc.diagnostics.errors import ErrorKind, UserError

KEY_ENV = "NOETL_CREDENTIAL_KEY"


class CredentialKeyError(UserError):
    """No usable credential key (NOE874)."""

    kind = ErrorKind.USAGE


def new_key() -> str:
    """A fresh key as the environment variable takes it (base64)."""
    return base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def parse_key(text: str, where: str) -> bytes:
    text = text.strip()
    raw: bytes | None = None
    if len(text) == 64:
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raw = None
    if raw is None:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != 32:
        raise CredentialKeyError(
            "NOE874",
            f"the credential key in {where} is not 32 bytes of base64 or hex",
            'make one with `python -c "import base64,os;print(base64.b64encode(os.urandom(32)).decode())"`',
        )
    return raw


def load_key(key_file: str | None = None, env: dict[str, str] | None = None) -> bytes:
    """The key from `key_file` or `$NOETL_CREDENTIAL_KEY`; NOE874 when neither gives one."""
    environ = os.environ if env is None else env
    if key_file:
        try:
            text = Path(key_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CredentialKeyError(
                "NOE874", f"cannot read the credential key file {key_file}: {exc}", None
            ) from None
        return parse_key(text, key_file)
    value = environ.get(KEY_ENV)
    if value:
        return parse_key(value, f"${KEY_ENV}")
    raise CredentialKeyError(
        "NOE874",
        "no credential key: the service will not store credentials in plain text",
        f"set {KEY_ENV} to 32 random bytes in base64 (or pass --credential-key-file FILE)",
    )


class Cipher:
    def __init__(self, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)

    def seal(self, name: str, data: Any) -> bytes:
        nonce = secrets.token_bytes(12)
        plain = json.dumps(data, default=str).encode("utf-8")
        return nonce + self._aead.encrypt(nonce, plain, name.encode("utf-8"))

    def open(self, name: str, sealed: bytes) -> Any:
        plain = self._aead.decrypt(sealed[:12], sealed[12:], name.encode("utf-8"))
        return json.loads(plain)


class StoreCredentials:
    """Keychain entries from the credential store: the decrypted data of the credential with
    the entry's name, each read recorded (who, which execution, when)."""

    def __init__(self, catalog: Any, cipher: Cipher, source: str = f"${KEY_ENV}") -> None:
        self.catalog = catalog
        self.cipher = cipher
        self.source = source  # where the key came from, for NOE874

    def get(self, name: str, who: str, execution_id: str | None) -> Any:
        found = self.catalog.credential(name)
        if found is None:
            return None
        self.catalog.record_read(found, who, execution_id)
        try:
            return self.cipher.open(found["name"], found["data"])
        except Exception as exc:  # cryptography's InvalidTag: another key sealed it
            raise CredentialKeyError(
                "NOE874",
                f"credential '{found['name']}' cannot be decrypted with the credential key from"
                f" {self.source} ({type(exc).__name__}): it was stored under another key",
                "give this process the key the credential was stored with, or store it again",
            ) from None

    def provider(self, who: str, execution_id: str | None) -> Any:
        """`Keychain(provider=...)` for one execution."""
        return lambda name: self.get(name, who, execution_id)
