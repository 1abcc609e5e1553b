"""The `playbook` tool: run another playbook as a child execution and wait for it.

The runtime provides `ToolContext.run_playbook(path, workload)`, which starts the child and
returns its summary `{"execution_id", "status", "result", "error"}` (plus `steps` when it has
them); this tool is its client. `path:` (or `playbook:`) is a playbook file relative to this
playbook's folder (`.yaml`/`.yml` may be left out) or, when no such file exists, a catalog path
passed on as written. `args:` (or `workload:`/`input:`) is the child's workload. The result is
the child's result — or, with `return_step:`, that step's result; a child that did not complete
is an error outcome (`PlaybookError`). `meta.child_execution_id` names the child.
"""

from __future__ import annotations

from typing import Any

from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import PlaybookArgs

SUCCESS = frozenset({"completed", "ok"})


def run(
    args: PlaybookArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    if ctx.run_playbook is None:
        return error(
            "ToolUnavailable", "this runtime cannot start child executions (no run_playbook)"
        )
    target = _locate(str(args.path), ctx)
    summary = ctx.run_playbook(target, dict(args.args or {}))
    child_id = summary.get("execution_id")
    status = summary.get("status")
    result = summary.get("result")
    if args.return_step:
        step = (summary.get("steps") or {}).get(args.return_step)
        if isinstance(step, dict):
            result = step.get("result")
        elif status in SUCCESS:
            outcome = error(
                "PlaybookError",
                f"the child playbook {target} has no finished step `{args.return_step}`",
            )
            outcome["meta"] = {"child_execution_id": child_id}
            return outcome
    if status in SUCCESS:
        outcome = ok(result)
    else:
        child_error = summary.get("error")
        reason = child_error.get("message") if isinstance(child_error, dict) else child_error
        outcome = error(
            "PlaybookError",
            f"the child playbook {target} ended {status}" + (f": {reason}" if reason else ""),
            result=result,
            child_error=child_error,
        )
    outcome["meta"] = {"child_execution_id": child_id, "child_status": status}
    return outcome


def _locate(path: str, ctx: ToolContext) -> str:
    for suffix in ("", ".yaml", ".yml"):
        candidate = ctx.workdir / f"{path}{suffix}"
        if candidate.is_file():
            return str(candidate.resolve())
    return path
