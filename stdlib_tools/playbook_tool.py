"""The `playbook` tool: start another playbook as a child execution, as NoETL's worker does.

Three ways, by the arguments (NoETL's rule, noetl/noetl `noetl/worker/nats_worker.py`,
`_execute_tool` -> `_execute_playbook`, and `noetl/core/workflow/playbook/executor.py`):
* no `return_step:` — the child is started and the call returns at once with NoETL's
  executor result `{id, status: success, data: {execution_id, status: started},
  execution_id, duration}`; the child runs on by itself and its outcome is not the caller's.
* `return_step:` — the call waits for the child (at most `timeout:`, default 300 s) and gives
  NoETL's status view `{execution_id, current_step, completed_steps, failed, completed,
  completion_inferred, variables, start_time, end_time, duration_seconds, duration_human}`
  (noetl/server/api/core/execution.py, `get_execution_status`), plus noetlc's `child_status`
  and `result`: the named step's result. A failed child is `failed: true`, not a failed
  call; past the timeout the result is `{status: started, execution_id, path, async: false}`.
* `wait: true` (noetlc's, NoETL ignores it) — the call waits for the child and gives its result
  (with `return_step:`, that step's); a child that did not complete fails the call
  (`PlaybookError`); `timeout:` bounds the wait (a `Timeout` error; the child runs on).

A child that cannot start (no such file, compile errors, a budget across children) fails the
call in every way, as NoETL's start request does. The runtime provides
`ToolContext.run_playbook(path, workload, wait)`. `path:` (or `playbook:`) is a playbook file
relative to this playbook's folder (`.yaml`/`.yml` may be left out) or, when no such file
exists, a catalog path looked up in the local catalog: the folders of `NOETL_PLAYBOOK_PATH`
(separated like `PATH`), as `FOLDER/PATH[.yaml]` or as the playbook whose `metadata.path` is
`PATH` (NoETL's catalog names); else passed on as written. `args:` (or
`workload:`/`input:`/`payload:`) is the child's workload. `meta.child_execution_id` names the
child. `timeout:` is seconds or a duration (`90s`, `5m`, `1h`, `250ms`).
"""

from __future__ import annotations

import datetime
import functools
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import PlaybookArgs

SUCCESS = frozenset({"completed", "ok"})
RETURN_STEP_WAIT = 300.0  # NoETL's worker polls a `return_step` child this long by default
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
    workload = dict(args.args or {})
    if args.wait:
        return _waited(args, ctx, target, workload, limit)
    if not args.return_step:
        return _started(ctx, target, workload)
    return _status_view(args, ctx, target, workload, RETURN_STEP_WAIT if limit is None else limit)


def _started(ctx: ToolContext, target: str, workload: dict[str, Any]) -> dict[str, Any]:
    """No `return_step`: NoETL's executor result once the child is started."""
    assert ctx.run_playbook is not None
    began = time.monotonic()
    summary = ctx.run_playbook(target, workload, wait=False)
    child_id = summary.get("execution_id")
    if summary.get("status") != "started":
        return _not_started(target, summary)
    accepted = {"execution_id": child_id, "status": "started"}
    result = {
        "id": str(uuid.uuid4()),
        "status": "success",
        "data": accepted,
        "execution_id": child_id,
        "duration": round(time.monotonic() - began, 3),
    }
    outcome = ok(result)
    outcome["meta"] = {"child_execution_id": child_id, "child_status": "started"}
    return outcome


def _status_view(
    args: PlaybookArgs, ctx: ToolContext, target: str, workload: dict[str, Any], limit: float
) -> dict[str, Any]:
    """`return_step`: wait for the child and give NoETL's status view of it."""
    began = time.time()
    summary = _bounded(ctx, target, workload, limit)
    if summary is None:  # NoETL stops polling and says the child was started
        started: dict[str, Any] = {"status": "started", "execution_id": ctx.child_id}
        started.update(path=args.path, **{"async": False})
        outcome = ok(started)
        outcome["meta"] = {"child_execution_id": ctx.child_id, "child_status": "running"}
        return outcome
    child_id = summary.get("execution_id")
    status = summary.get("status")
    if child_id is None:
        return _not_started(target, summary)
    steps = summary.get("steps") or {}
    ended = time.time()
    step = steps.get(args.return_step)
    view = {
        "execution_id": child_id,
        "current_step": next(reversed(steps), None) if steps else None,
        "completed_steps": [n for n, r in steps.items() if r.get("status") == "done"],
        "failed": status not in SUCCESS and status != "cancelled",
        "completed": status in SUCCESS or status == "cancelled",
        "completion_inferred": False,
        "variables": summary.get("ctx") or {},
        "start_time": _iso(began),
        "end_time": _iso(ended),
        "duration_seconds": round(ended - began, 3),
        "duration_human": _human(ended - began),
        # noetlc's: the child's status and the named step's result
        "child_status": status,
        "result": step.get("result") if isinstance(step, dict) else None,
    }
    outcome = ok(view)
    outcome["meta"] = {"child_execution_id": child_id, "child_status": status}
    return outcome


def _human(total: float) -> str:
    """`1h 2m 5s`, as NoETL's status view writes a duration."""
    minutes, secs = divmod(max(0, round(total)), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m")) if n]
    return " ".join([*parts, f"{secs}s"] if secs or not parts else parts)


def _iso(when: float) -> str:
    return datetime.datetime.fromtimestamp(when, datetime.UTC).isoformat()


def _not_started(target: str, summary: dict[str, Any]) -> dict[str, Any]:
    """A child that could not start: the call fails (NoETL's start request fails)."""
    child_error = summary.get("error")
    reason = child_error.get("message") if isinstance(child_error, dict) else child_error
    code = child_error.get("code") if isinstance(child_error, dict) else None
    outcome = error(
        "PlaybookError",
        f"the child playbook {target} could not start" + (f": {reason}" if reason else ""),
        child_error=child_error,
        code=code,
        retryable=False if code == "NOE858" else None,
    )
    outcome["meta"] = {"child_execution_id": None, "child_status": summary.get("status")}
    return outcome


def _waited(
    args: PlaybookArgs,
    ctx: ToolContext,
    target: str,
    workload: dict[str, Any],
    limit: float | None,
) -> dict[str, Any]:
    """`wait: true`: the child's result; a child that did not complete fails the call."""
    assert ctx.run_playbook is not None
    if limit is None:
        summary = ctx.run_playbook(target, workload)
    else:
        waited = _bounded(ctx, target, workload, limit)
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
