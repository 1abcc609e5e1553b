"""The `secrets` tool: read a keychain entry; the value is the result and is registered for
redaction (`Keychain.redact` then masks it in events, logs and error messages).

`key:` (or `secret:`/`entry:`) names the entry; without it the task's own name does, as the
NoETL corpus writes `{kind: secrets, name: TEST_SECRET}`. `provider: env` first reads the plain
environment variable of that name, then the keychain's providers.
"""

from __future__ import annotations

import os
from typing import Any

from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import SecretsArgs


def run(
    args: SecretsArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    key = args.key or ctx.task
    if not key:
        return error("ToolArgumentError", "the secrets tool needs `key:` (the keychain entry)")
    if args.provider == "env":
        raw = os.environ.get(key)
        if raw is not None:
            keychain.register(raw)
            return ok(raw)
    return ok(keychain.resolve(key))
