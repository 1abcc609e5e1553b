"""The in-process tools: `noop` and `python` (DESIGN §2.3, the outcome envelope).

`noop` returns its `input` (or None): the compiler's generated tasks use that to pass the
previous result through. `python` binds its `input:` (or `args:`) mapping as locals; the code
either defines `main(...)`, called with them, or assigns `result`. `libs: {alias: module}`
imports modules first. An exception is an error outcome with `py.exception_type`.
Tool errors never raise out of `call_tool`.
"""

from __future__ import annotations

import importlib
import inspect
import time
from typing import Any


def call_tool(kind: str, args: dict[str, Any], spec: dict[str, Any] | None) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        if kind == "noop":
            outcome = _ok(args.get("input"))
        elif kind == "python":
            outcome = _python(args)
        else:
            outcome = _error(
                "ToolUnavailable",
                f"the `{kind}` tool is not available in this build (only noop and python run yet)",
            )
    except Exception as exc:
        outcome = _error(type(exc).__name__, str(exc))
        outcome["py"] = {"exception_type": type(exc).__name__}
    outcome["meta"] = {"duration_ms": round((time.perf_counter() - started) * 1000, 3)}
    return outcome


def _python(args: dict[str, Any]) -> dict[str, Any]:
    code = args.get("code")
    if not isinstance(code, str):
        return _error("ToolArgumentError", "the python tool needs `code:`")
    bound = args.get("input")
    if bound is None:
        bound = args.get("args")
    local: dict[str, Any] = dict(bound) if isinstance(bound, dict) else {}
    namespace: dict[str, Any] = {"__name__": "__noetl_task__"}
    libs = args.get("libs")
    if isinstance(libs, dict):
        for alias, module in libs.items():
            namespace[str(alias)] = importlib.import_module(str(module))
    namespace.update(local)
    namespace["input_data"] = dict(local)  # the NoETL corpus reads its input as `input_data`
    try:
        try:
            compiled = compile(code, "<python task>", "exec")
        except SyntaxError as exc:
            if "outside function" not in str(exc):
                raise
            # NoETL runs task code as a function body: a top-level `return` gives the result
            body = "".join(f"    {line}\n" for line in code.splitlines()) or "    pass\n"
            exec(compile(f"def __task_body__():\n{body}", "<python task>", "exec"), namespace)
            returned = namespace["__task_body__"]()
            return _ok(returned if returned is not None else namespace.get("result"))
        exec(compiled, namespace)  # the tool runs user code by design
        main = namespace.get("main")
        if callable(main):
            params = inspect.signature(main).parameters
            accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
            kwargs = local if accepts_any else {k: v for k, v in local.items() if k in params}
            return _ok(main(**kwargs))
        return _ok(namespace.get("result"))
    except Exception as exc:
        outcome = _error(type(exc).__name__, str(exc))
        outcome["py"] = {"exception_type": type(exc).__name__}
        return outcome


def _ok(result: Any) -> dict[str, Any]:
    return {"status": "ok", "result": result, "error": None}


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"status": "error", "result": None, "error": {"type": kind, "message": message}}
