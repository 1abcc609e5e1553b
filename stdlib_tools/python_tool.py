"""The `python` tool: run task code in this process, or in a child process with a timeout.

The code binds its `input:` (or `args:`) mapping as locals and as `input_data`; it either
defines `main(...)` (called with the inputs it names), assigns `result`, or — as NoETL runs task
code as a function body — `return`s a value at the top level. `libs: {alias: module}` (or `{alias:
{from: module, import: name}}`) imports modules first; `auth: {alias: keychain entry}` binds the resolved values as the local `auth`;
`assert: {expects, returns}` checks inputs before and result keys after. An exception is an
error outcome with `py.exception_type`.

`spec.isolation: subprocess` runs the same code in `python -c` (JSON in on stdin, the outcome as
JSON on stdout; what the code prints goes to the child's stderr, returned as `py.stderr`), so
`spec.timeout` can stop it: the child is killed and the outcome is a `Timeout` error. In-process
code cannot be interrupted, so there `spec.timeout` does not apply.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.python_exec import execute
from noetlc.stdlib_tools.schemas import PythonArgs
from noetlc.stdlib_tools.script_source import ScriptError, load

STDERR_TAIL = 4000
_CHILD = (
    "import sys; from noetlc.stdlib_tools.python_exec import child_main; sys.exit(child_main())"
)


def run(
    args: PythonArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    code = args.code
    if code is None and args.script is not None:
        try:
            code = load(args.script, ctx)
        except ScriptError as exc:
            return error("ScriptError", str(exc))
    request = {
        "code": code,
        "locals": _locals(args),
        "libs": _libs(args),
        "auth": _auth(args.auth, keychain),
        "expects": args.assert_.expects if args.assert_ else [],
        "returns": args.assert_.returns if args.assert_ else [],
    }
    if spec.get("isolation") == "subprocess":
        return _in_subprocess(request, spec.get("timeout"), ctx)
    return execute(request)


def _libs(args: PythonArgs) -> dict[str, Any] | list[str] | None:
    """JSON for the executor: `{alias: module}` or `{alias: {from, import}}`."""
    if not isinstance(args.libs, dict):
        return args.libs
    return {
        alias: spec if isinstance(spec, str) else spec.model_dump(by_alias=True)
        for alias, spec in args.libs.items()
    }


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
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=payload,
            capture_output=True,
            text=True,
            timeout=seconds,
            cwd=ctx.workdir,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    except subprocess.TimeoutExpired as exc:
        outcome = error(
            "Timeout",
            f"the python task did not finish within {seconds:g} s; its process was killed",
            retryable=True,
        )
        outcome["py"] = {"exception_type": "Timeout", "stderr": _tail(exc.stderr)}
        return outcome
    try:
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        outcome = error(
            "SubprocessError",
            f"the python task's process exited with code {done.returncode} without an outcome",
        )
    if not isinstance(outcome, dict) or "status" not in outcome:
        outcome = error("SubprocessError", "the python task's process wrote no outcome")
    outcome.setdefault("py", {})["stderr"] = _tail(done.stderr)
    outcome["py"]["exit_code"] = done.returncode
    return outcome


def _tail(text: str | bytes | None) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text[-STDERR_TAIL:]
