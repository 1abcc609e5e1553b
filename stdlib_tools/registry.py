"""The tool registry: `call_tool(kind, args, spec, context)` runs one tool call and returns its
outcome envelope (status, result, error, meta); it never raises.

The kind's record (`kinds.lookup`: built in, or from a `noetlc.tools` plugin) gives its
argument schema — the same the compiler's `tools` pass checks statically — and its executor
module. The arguments are validated before the tool runs; a mismatch is a `ToolArgumentError`
outcome (the schema, and pydantic with it, is imported on the first validation: `noop` calls
never load it). A kind known by name only (it needs a plugin that is not installed) is a
`ToolUnavailable` outcome naming the plugin. Executor modules are imported on first use, so a
playbook that only runs python never loads httpx or asyncpg. Every outcome gets `meta.duration_ms` and `meta.kind`; the error and
meta parts are redacted with the keychain (they are meant for people and logs), the result is
not (later tasks need the values; the runtime redacts events with `Keychain.redact`).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from noetlc.diagnostics.extras import missing_extra
from noetlc.stdlib_tools.context import RunPlaybook, ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain, KeychainError
from noetlc.stdlib_tools.kinds import ToolKind, lookup, runner

__all__ = ["RunPlaybook", "ToolContext", "call_tool", "default_keychain"]


_default: Keychain | None = None
_default_lock = threading.Lock()


def default_keychain() -> Keychain:
    """The keychain used when the caller gives none: environment and the default file."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Keychain()
        return _default


def call_tool(
    kind: str,
    args: dict[str, Any] | None,
    spec: dict[str, Any] | None = None,
    context: ToolContext | None = None,
) -> dict[str, Any]:
    started = time.perf_counter()
    ctx = context if context is not None else ToolContext()
    keychain: Keychain | None = ctx.keychain
    try:
        if keychain is None:
            keychain = default_keychain()
        outcome = _dispatch(kind, args or {}, spec or {}, ctx, keychain)
    except KeychainError as exc:
        outcome = error("KeychainError", str(exc), code=exc.code, hint=exc.hint)
    except ImportError as exc:  # the postgres tool without `noetlc[postgres]`, say
        problem = missing_extra(exc)
        if problem is None:
            outcome = error(type(exc).__name__, str(exc))
        else:
            message = f"the `{kind}` tool is not available: {problem}"
            outcome = error("ToolUnavailable", message, code=problem.code, hint=problem.hint)
    except Exception as exc:  # a tool bug or an unexpected library error: still an outcome
        if _is_validation_error(exc):
            outcome = error("ToolArgumentError", _describe(kind, exc))
        else:
            outcome = error(type(exc).__name__, str(exc))
            outcome["py"] = {"exception_type": type(exc).__name__}
    meta = outcome.setdefault("meta", {})
    meta["kind"] = kind
    meta["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
    if keychain is not None and keychain.has_secrets:
        outcome["error"] = keychain.redact(outcome.get("error"))
        outcome["meta"] = keychain.redact(meta)
    return outcome


def _dispatch(
    kind: str, args: dict[str, Any], spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    record = lookup(kind)
    if record is None:
        return error("ToolUnavailable", f"there is no `{kind}` tool")
    if record.plugin is not None:
        return error(
            "ToolUnavailable",
            f"the `{kind}` tool is not installed: it needs {record.plugin}",
            hint="install a plugin that provides it (see docs/tools.md, plugins)",
        )
    if kind == "noop":
        return ok(args.get("result") if args.get("result") is not None else args.get("input"))
    if record.module is None:
        return error("ToolUnavailable", f"`{kind}` tasks are run by the pipeline VM, not as a tool")
    parsed = record.build_args(args)  # valid as they are: no pydantic (`ToolKind.plain_args`)
    if parsed is None:
        parsed = validate_args(record.schema, args)
    if record.isolated and isolating(spec):
        return _isolated(record, args, spec, ctx, keychain)
    run = runner(record)
    assert run is not None
    return run(parsed, spec, ctx, keychain)


def isolating(spec: dict[str, Any]) -> bool:
    """Whether a task runs in a runner process: it asks (`isolation: subprocess`) or this
    process is in `process` mode. Only `isolation.configure` sets that mode, so a process that
    has not imported the module runs task code inline: `noetl-vm run` never imports it (nor
    `subprocess`, `selectors` and `signal` with it)."""
    if spec.get("isolation") == "subprocess":
        return True
    isolation = sys.modules.get("noetlc.stdlib_tools.isolation")
    return isolation is not None and isolation.policy().mode == "process"


def _isolated(
    record: ToolKind,
    args: dict[str, Any],
    spec: dict[str, Any],
    ctx: ToolContext,
    keychain: Keychain,
) -> dict[str, Any]:
    """A plugin's call in a warm runner process (its kind asked: `ToolKind.isolated`), with
    the keychain entries its `credentials` arguments name, resolved here, and nothing else."""
    from noetlc.stdlib_tools import isolation

    names: list[str] = []
    for arg in record.credentials:
        value = args.get(arg)
        refs = value.values() if isinstance(value, dict) else [value]
        names.extend(ref for ref in refs if isinstance(ref, str) and ref not in names)
    call = {
        "kind": record.name,
        "args": args,
        "spec": spec,
        "context": {
            "execution_id": ctx.execution_id,
            "action_id": ctx.action_id,
            "step": ctx.step,
            "task": ctx.task,
            "attempt": ctx.attempt,
        },
        "keychain": {name: keychain.resolve(name) for name in names},
    }
    timeout = spec.get("timeout")
    return isolation.run_tool(
        call,
        secret=keychain.mentions(args),
        timeout=float(timeout) if isinstance(timeout, int | float) else None,
        cancelled=ctx.cancelled,
        log=ctx.log,
        cwd=str(ctx.workdir),
    )


def validate_args(schema: Any, args: dict[str, Any]) -> Any:
    """The arguments validated, keys the kind does not take left out. NoETL's tool models
    accept extra keys and its executors read only theirs (noetl/core/dsl/engine/models/tools.py,
    `ToolSpec`: `extra = "allow"`), so an unknown key is ignored here too; the compiler warns
    about it (NOE601). Every other mismatch is still a `ToolArgumentError`."""
    try:
        return schema.model_validate(args)
    except Exception as exc:
        if not _is_validation_error(exc):
            raise
        unknown = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]  # type: ignore[attr-defined]
        if not unknown:
            raise
        return schema.model_validate(without_keys(args, unknown))


def without_keys(data: Any, paths: list[tuple[Any, ...]]) -> Any:
    """A copy of `data` without the keys at `paths` (pydantic `loc`s: union tags that are not
    keys of the data are skipped on the way down)."""
    drop: dict[Any, Any] = {}
    for loc in paths:
        node: dict[Any, Any] | None = drop
        cursor = data
        for i, step in enumerate(loc):
            if node is None:
                break  # an enclosing key is dropped already
            last = i == len(loc) - 1
            if isinstance(cursor, dict) and step in cursor:
                if last:
                    node[step] = None
                else:
                    node = node.setdefault(step, {})
                    cursor = cursor[step]
            elif isinstance(cursor, list) and isinstance(step, int) and 0 <= step < len(cursor):
                node = node.setdefault(step, {})
                cursor = cursor[step]
    return _prune(data, drop)


def _prune(data: Any, drop: dict[Any, Any]) -> Any:
    if isinstance(data, dict):
        return {
            k: (_prune(v, drop[k]) if drop.get(k) else v)
            for k, v in data.items()
            if not (k in drop and drop[k] is None)
        }
    if isinstance(data, list):
        return [_prune(v, drop[i]) if drop.get(i) else v for i, v in enumerate(data)]
    return data


def _is_validation_error(exc: Exception) -> bool:
    """A pydantic `ValidationError` (arguments that do not fit a schema). pydantic is imported
    only by the schemas, when a kind's arguments are validated: when it is not loaded, nothing
    raised one, and a run of `noop` tasks never loads it."""
    core = sys.modules.get("pydantic_core")
    return core is not None and isinstance(exc, core.ValidationError)


def _describe(kind: str, exc: Any) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(step) for step in err["loc"])
        parts.append(f"{where}: {err['msg']}" if where else str(err["msg"]))
    return f"bad arguments for the {kind} tool: " + "; ".join(parts)
