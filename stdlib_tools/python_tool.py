"""The `python` tool: run task code in this process, or in a child process with a timeout.

The code binds its `input:` (or `args:`) mapping as locals and as `input_data`; it either
defines `main(...)` (called with the inputs it names), assigns `result`, or — as NoETL runs task
code as a function body — `return`s a value at the top level. `libs: {alias: module}` imports
modules first; `auth: {alias: keychain entry}` binds the resolved values as the local `auth`;
`assert: {expects, returns}` checks inputs before and result keys after. An exception is an
error outcome with `py.exception_type`.

`spec.isolation: subprocess` runs the same code in `python -c` (JSON in on stdin, the outcome as
JSON on stdout; what the code prints goes to the child's stderr, returned as `py.stderr`), so
`spec.timeout` can stop it: the child is killed and the outcome is a `Timeout` error; a cancel of
the action (or a worker shutting down) kills it too (a `Cancelled` error). In-process code
cannot be interrupted, so there neither applies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.python_exec import execute
from noetlc.stdlib_tools.schemas import PythonArgs

STDERR_TAIL = 4000
_CHILD = (
    "import sys; from noetlc.stdlib_tools.python_exec import child_main; sys.exit(child_main())"
)


def run(
    args: PythonArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    request = {
        "code": args.code,
        "locals": _locals(args),
        "libs": args.libs,
        "auth": _auth(args.auth, keychain),
        "expects": args.assert_.expects if args.assert_ else [],
        "returns": args.assert_.returns if args.assert_ else [],
    }
    if spec.get("isolation") == "subprocess":
        return _in_subprocess(request, spec.get("timeout"), ctx)
    return execute(request)


def _locals(args: PythonArgs) -> dict[str, Any]:
    bound = args.input if args.input is not None else args.args
    return dict(bound) if bound else {}


def _auth(auth: dict[str, Any] | str | None, keychain: Keychain) -> dict[str, Any] | None:
    if isinstance(auth, str):
        return {auth: keychain.resolve(auth)}
    if not auth:
        return None
    return {
        str(alias): keychain.resolve(ref) if isinstance(ref, str) else ref
        for alias, ref in auth.items()
    }


# --------------------------------------------------------------------------- isolation


def _in_subprocess(request: dict[str, Any], timeout: Any, ctx: ToolContext) -> dict[str, Any]:
    seconds = float(timeout) if isinstance(timeout, int | float) else None
    try:
        payload = json.dumps(request, default=str)
    except (TypeError, ValueError) as exc:
        return error("ToolArgumentError", f"the task's input is not JSON: {exc}")
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ctx.workdir,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = None if seconds is None else time.monotonic() + seconds
    sent: str | None = payload
    while True:
        # a cancelled action (or a worker shutting down) kills the child at once
        step = CANCEL_POLL if ctx.cancelled is not None else None
        if deadline is not None:
            left = max(0.0, deadline - time.monotonic())
            step = left if step is None else min(step, left)
        try:
            out, err = child.communicate(sent, timeout=step)
            break
        except subprocess.TimeoutExpired:
            sent = None  # written already: communicate() keeps it
            if deadline is not None and time.monotonic() >= deadline:
                return _killed(child, "Timeout", f"did not finish within {seconds:g} s")
            if ctx.cancelled is not None and ctx.cancelled():
                return _killed(child, "Cancelled", "was cancelled")
    outcome: Any
    try:
        outcome = json.loads(out.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        outcome = error(
            "SubprocessError",
            f"the python task's process exited with code {child.returncode} without an outcome",
        )
    if not isinstance(outcome, dict) or "status" not in outcome:
        outcome = error("SubprocessError", "the python task's process wrote no outcome")
    outcome.setdefault("py", {})["stderr"] = _tail(err)
    outcome["py"]["exit_code"] = child.returncode
    result: dict[str, Any] = outcome
    return result


CANCEL_POLL = 0.1  # seconds between looks at the cancel flag


def _killed(child: subprocess.Popen[str], kind: str, why: str) -> dict[str, Any]:
    child.kill()
    _, err = child.communicate()
    outcome = error(
        kind, f"the python task {why}; its process was killed", retryable=kind == "Timeout"
    )
    outcome["py"] = {"exception_type": kind, "stderr": _tail(err)}
    return outcome


def _tail(text: str | bytes | None) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text[-STDERR_TAIL:]
