"""SHA-256 digests without loading OpenSSL when that costs more than it saves.

Importing `hashlib` loads OpenSSL's libcrypto, which costs a cold command (a cached `noetl-vm
run`, `noetlc check`) more than hashing what it hashes: a compile-cache key, an `.nbc` payload,
expression code, action ids. Until something has imported `hashlib` (then OpenSSL is loaded
and faster), an input up to `SMALL` bytes is hashed by CPython's built-in SHA-256 module
(`_sha2` since 3.12, `_sha256` before); a larger one by `hashlib`. The digest is the same
either way; only the speed differs (the built-in one is a few times slower on large inputs,
hence the bound).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hashlib import _Hash

_builtin: Any
try:
    from _sha2 import sha256 as _builtin  # type: ignore[import-not-found,no-redef,unused-ignore]
except ImportError:  # Python 3.11
    try:
        from _sha256 import sha256 as _builtin  # type: ignore[import-not-found,no-redef,unused-ignore]
    except ImportError:  # a build without it
        _builtin = None

SMALL = 1 << 20  # bytes: about where the import of hashlib pays for its faster hashing


def sha256(data: bytes = b"") -> _Hash:
    """A SHA-256 hash object (`update`, `hexdigest`...) started with `data`."""
    if _builtin is not None and len(data) <= SMALL and "hashlib" not in sys.modules:
        return _builtin(data)  # type: ignore[no-any-return]
    import hashlib

    return hashlib.sha256(data)


def sha256_hex(data: bytes) -> str:
    """The hex SHA-256 digest of `data`."""
    return sha256(data).hexdigest()
