"""A plugin tool's call inside a task runner (stdlib_tools/task_runner.py), for the kinds that
ask for isolation (`ToolKind(..., isolated=True)`; docs/tools.md, "Plugins").

The parent (`registry.call_tool`) has validated the arguments and resolved the keychain
entries the kind's `credentials` arguments name; the call arrives as plain JSON:
`{kind, args, spec, context, keychain}`. Here the kind's record is found again (the plugin is
installed where the runner's python finds it: the same interpreter and PYTHONPATH), its
arguments validated with its schema, and its `run(args, spec, context, keychain)` called with a
`ToolContext` of the call's ids and working folder and a keychain holding only those entries:
no environment, no keychain file, no other credential. What it prints is captured by the
runner; an exception is an error outcome named after its class, as in the parent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from noetlc.stdlib_tools.envelope import error

CONTEXT_FIELDS = ("execution_id", "action_id", "step", "task", "attempt")


def run_call(call: dict[str, Any]) -> dict[str, Any]:
    from noetlc.stdlib_tools.context import ToolContext
    from noetlc.stdlib_tools.keychain import Keychain, KeychainError
    from noetlc.stdlib_tools.kinds import lookup, runner
    from noetlc.stdlib_tools.registry import validate_args

    kind = str(call.get("kind"))
    record = lookup(kind)
    if record is None or record.module is None or not record.isolated:
        return error(
            "ToolUnavailable",
            f"the `{kind}` tool is not installed where its isolated process runs",
            hint="install the plugin for the interpreter the service runs (or on its PYTHONPATH)",
        )
    values = call.get("keychain") or {}
    keychain = Keychain.only(values)
    context = call.get("context") or {}
    ctx = ToolContext(
        **{k: context[k] for k in CONTEXT_FIELDS if k in context},
        keychain=keychain,
        workdir=Path.cwd(),
    )
    try:
        args = validate_args(record.schema, call.get("args") or {})
        run = runner(record)
        assert run is not None
        outcome: dict[str, Any] = run(args, call.get("spec") or {}, ctx, keychain)
    except KeychainError as exc:
        return error("KeychainError", str(exc), code=exc.code, hint=exc.hint)
    except Exception as exc:  # a plugin bug: still an outcome, as `call_tool` makes it
        outcome = error(type(exc).__name__, str(exc))
    if keychain.has_secrets:  # the parent redacts too; here so nothing leaves unmasked
        outcome["error"] = keychain.redact(outcome.get("error"))
    return outcome
