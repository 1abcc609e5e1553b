"""The `playbook` tool: run another playbook as a child execution and wait for it.

The runtime provides `ToolContext.run_playbook(path, workload)`, which starts the child and
returns its summary `{"execution_id", "status", "result", "error"}` (plus `steps` when it has
them); this tool is its client. `path:` (or `playbook:`) is a playbook file relative to this
playbook's folder (`.yaml`/`.yml` may be left out) or, when no such file exists, a catalog path
looked up in the local catalog: the folders of `NOETL_PLAYBOOK_PATH` (separated like `PATH`),
as `FOLDER/PATH[.yaml]` or as the playbook whose `metadata.path` is `PATH` (NoETL's catalog
names); else passed on as written. `args:` (or `workload:`/`input:`) is the child's workload. The result is
the child's result — or, with `return_step:`, that step's result; a child that did not complete
is an error outcome (`PlaybookError`). `meta.child_execution_id` names the child.
`payload:` is NoETL's name for the workload too. `timeout:` (seconds, or a duration `90s`,
`5m`, `1h`, `250ms`) bounds the wait: past it the task fails with a `Timeout` error; the child
execution is not cancelled by that (it is an execution of its own: `noetl-vm cancel` stops it).
"""

from __future__ import annotations

import functools
import os
import re
import threading
from pathlib import Path
from typing import Any

from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import PlaybookArgs

SUCCESS = frozenset({"completed", "ok"})
CATALOG_ENV = "NOETL_PLAYBOOK_PATH"
CATALOG_FILE_LIMIT = 1 << 20
# `metadata:` ... `  path: NAME` (the first indented `path:` after `metadata:`)
_METADATA_PATH = re.compile(r"^metadata:\s*\n(?:[ \t]+.*\n)*?[ \t]+path:[ \t]*(\S+)", re.MULTILINE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def seconds(value: float | str | None) -> float | None:
    """A timeout in seconds from a number or a duration string; None when not given."""
    if value is None or isinstance(value, int | float):
        return None if value is None else float(value)
    match = _DURATION.match(value)
    if match is None:
        raise ValueError(f"`timeout: {value}` is not a duration (write 30, 30s, 5m, 1h or 250ms)")
    return float(match.group(1)) * _UNIT[match.group(2)]


def run(
    args: PlaybookArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    if ctx.run_playbook is None:
        return error(
            "ToolUnavailable", "this runtime cannot start child executions (no run_playbook)"
        )
    try:
        limit = seconds(args.timeout)
    except ValueError as exc:
        return error("ToolArgumentError", str(exc))
    target = _locate(str(args.path), ctx)
    if limit is None:
        summary = ctx.run_playbook(target, dict(args.args or {}))
    else:
        waited = _bounded(ctx, target, dict(args.args or {}), limit)
        if waited is None:
            return error(
                "Timeout",
                f"the child playbook {target} did not finish within {limit:g} s",
                retryable=False,
            )
        summary = waited
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
        # a child that never started (no file, compile errors, a budget across children):
        # its error's code is the step's (NOE858 for a budget)
        code = (
            child_error.get("code") if child_id is None and isinstance(child_error, dict) else None
        )
        outcome = error(
            "PlaybookError",
            f"the child playbook {target} ended {status}" + (f": {reason}" if reason else ""),
            result=result,
            child_error=child_error,
            code=code,
            retryable=False if code == "NOE858" else None,
        )
    outcome["meta"] = {"child_execution_id": child_id, "child_status": status}
    return outcome


def _bounded(
    ctx: ToolContext, target: str, workload: dict[str, Any], limit: float
) -> dict[str, Any] | None:
    """The child's summary, or None when it is not there within `limit` seconds."""
    assert ctx.run_playbook is not None
    run_playbook = ctx.run_playbook
    box: list[dict[str, Any]] = []
    failure: list[BaseException] = []

    def wait() -> None:
        try:
            box.append(run_playbook(target, workload))
        except BaseException as exc:  # handed back to the tool's thread below
            failure.append(exc)

    thread = threading.Thread(target=wait, name="noetl-child-wait", daemon=True)
    thread.start()
    thread.join(limit)
    if failure:
        raise failure[0]
    return box[0] if box else None


def _locate(path: str, ctx: ToolContext) -> str:
    for suffix in ("", ".yaml", ".yml"):
        candidate = ctx.workdir / f"{path}{suffix}"
        if candidate.is_file():
            return str(candidate.resolve())
    found = catalog_lookup(path, os.environ.get(CATALOG_ENV, ""))
    return str(found) if found is not None else path


def catalog_lookup(name: str, roots: str) -> Path | None:
    """A catalog path in the local catalog folders (`NOETL_PLAYBOOK_PATH`, separated like
    PATH): a file `ROOT/NAME[.yaml]`, else the playbook whose `metadata.path` is `NAME`."""
    folders = [Path(p) for p in roots.split(os.pathsep) if p]
    for folder in folders:
        for suffix in ("", ".yaml", ".yml"):
            candidate = folder / f"{name}{suffix}"
            if candidate.is_file():
                return candidate.resolve()
    key = name.removesuffix(".yaml").removesuffix(".yml")
    for folder in folders:
        found = _catalog(str(folder.resolve())).get(key)
        if found is not None:
            return found
    return None


@functools.lru_cache(maxsize=16)
def _catalog(folder: str) -> dict[str, Path]:
    """`metadata.path` -> file for the playbooks under `folder` (read once per process)."""
    out: dict[str, Path] = {}
    for path in sorted(Path(folder).rglob("*.y*ml")):
        try:
            if path.stat().st_size > CATALOG_FILE_LIMIT:
                continue
            head = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        match = _METADATA_PATH.search(head)
        if match is not None:
            out.setdefault(match.group(1).strip("'\""), path.resolve())
    return out
