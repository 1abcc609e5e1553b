"""The executor of the `hash` kind: `run(args, spec, context, keychain) -> outcome`."""

from __future__ import annotations

import hashlib
from typing import Any

from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc_hash_tool import HashArgs

CHUNK = 1 << 16


def run(
    args: HashArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    digest = hashlib.new(args.algorithm)
    if args.text is not None:
        digest.update(args.text.encode("utf-8"))
        size = len(args.text.encode("utf-8"))
    else:
        path = ctx.workdir / str(args.file)
        try:
            with path.open("rb") as handle:
                size = 0
                while chunk := handle.read(CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
        except OSError as exc:
            return error("FileError", f"cannot read {path}: {exc.strerror or exc}")
    return ok({"algorithm": args.algorithm, "hexdigest": digest.hexdigest(), "bytes": size})
