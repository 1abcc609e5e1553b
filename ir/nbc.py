"""The `.nbc` bytecode file: header, pools, programs and the debug map, in msgpack.

Layout: 8 magic bytes `\\x89NBC\\r\\n\\x1a\\n` (binary-safe like PNG's), then one msgpack array
`[header, payload]` where `payload` is the msgpack encoding of the program as bytes and the
header is `{"format": FORMAT_VERSION, "compiler": version, "source_sha256": hex,
"payload_sha256": hex}`. Loading checks the magic, the format version and the payload
checksum before decoding anything else; every failure is a `BytecodeError` with a stable code.
Never pickle: msgpack with `strict_map_key` and no extension types. `noetlc.ir.program` wraps
this: `Program.decode` also checks the payload's shape and verifies it.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack

from noetlc.diagnostics.errors import UserError

MAGIC = b"\x89NBC\r\n\x1a\n"


class BytecodeError(UserError):
    """A `.nbc` file (or a stored program) that cannot be used: a stable NOE7xx code and a
    hint; the command lines print it like any `UserError`."""


def encode(
    payload: dict[str, Any], *, format_version: int, compiler_version: str, source_sha256: str
) -> bytes:
    body: bytes = msgpack.packb(payload, use_bin_type=True)
    header = {
        "format": format_version,
        "compiler": compiler_version,
        "source_sha256": source_sha256,
        "payload_sha256": hashlib.sha256(body).hexdigest(),
    }
    container: bytes = msgpack.packb([header, body], use_bin_type=True)
    return MAGIC + container


def decode(data: bytes, *, format_version: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, payload) of a `.nbc` file; raises BytecodeError on anything unexpected."""
    if not data.startswith(MAGIC):
        raise BytecodeError(
            "NOE701",
            "not a noetlc bytecode file (bad magic bytes)",
            "compile the playbook with `noetlc compile FILE.yaml -o FILE.nbc`",
        )
    try:
        outer = msgpack.unpackb(data[len(MAGIC) :], raw=False, strict_map_key=True)
    except Exception as exc:
        raise BytecodeError(
            "NOE702",
            f"the bytecode file is truncated or corrupt ({type(exc).__name__})",
            "recompile the playbook",
        ) from None
    if not (
        isinstance(outer, list)
        and len(outer) == 2
        and isinstance(outer[0], dict)
        and isinstance(outer[1], bytes)
    ):
        raise BytecodeError(
            "NOE702", "the bytecode file is corrupt (bad container)", "recompile the playbook"
        )
    header, body = outer
    version = header.get("format")
    if version != format_version:
        raise BytecodeError(
            "NOE703",
            f"bytecode format {version!r} is not supported (this noetl-vm reads format {format_version})",
            f"recompile the playbook with this version (it was compiled by noetlc {header.get('compiler')!r})",
        )
    if hashlib.sha256(body).hexdigest() != header.get("payload_sha256"):
        raise BytecodeError(
            "NOE702", "the bytecode file is corrupt (checksum mismatch)", "recompile the playbook"
        )
    try:
        payload = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as exc:
        raise BytecodeError(
            "NOE702",
            f"the bytecode payload is corrupt ({type(exc).__name__})",
            "recompile the playbook",
        ) from None
    if not isinstance(payload, dict):
        raise BytecodeError(
            "NOE702", "the bytecode payload is corrupt (not a mapping)", "recompile the playbook"
        )
    return header, payload
