"""The python tool's executor: runs task code, here or as the body of the isolated child.

Kept free of pydantic, httpx and the keychain, so a task runner process
(stdlib_tools/task_runner.py) starts fast. `request` is plain JSON: `globals` (what NoETL gives
task code: `context`, `ctx`, the loop iterator...), `code`, `locals`, `libs`, `auth` (already
resolved), `expects` and `returns` (the `assert:` contract).
"""

from __future__ import annotations

import importlib
import inspect
import json
from functools import lru_cache
from types import CodeType
from typing import Any

from noetlc.stdlib_tools.envelope import error, ok


def execute(request: dict[str, Any]) -> dict[str, Any]:
    """Run the code of `request` here (also the child process's body)."""
    local: dict[str, Any] = request["locals"]
    missing = [name for name in request["expects"] if local.get(name) is None]
    if missing:
        return error(
            "AssertionError",
            f"the task expects input {', '.join(f'`{m}`' for m in missing)}, which is not set",
        )
    namespace: dict[str, Any] = {"__name__": "__noetl_task__"}
    namespace.update(request.get("globals") or {})
    libs = request["libs"]
    try:
        if isinstance(libs, dict):
            for alias, module in libs.items():
                namespace[str(alias)] = _import(module)
        elif isinstance(libs, list):
            for module in libs:
                namespace[str(module).split(".")[0]] = importlib.import_module(str(module))
        namespace.update(local)
        if "input_data" not in local:  # the NoETL corpus reads its input as `input_data`
            namespace["input_data"] = dict(local)
        if request["auth"] is not None:
            namespace["auth"] = request["auth"]
        result = _run_code(request["code"], namespace, local)
    except Exception as exc:
        line = _code_line(exc)
        text = _line_text(request["code"], line)
        frames = _user_frames(exc, request["code"])
        outcome = error(type(exc).__name__, str(exc), line=line, code_line=text)
        if frames:
            outcome["error"]["traceback"] = frames
        outcome["py"] = {"exception_type": type(exc).__name__}
        return outcome
    try:  # results are stored as JSON; the stores' encoders do no cycle bookkeeping
        json.dumps(result, default=str)
    except (ValueError, RecursionError):
        return error(
            "TypeError",
            "the task's result is not JSON data: it contains itself (a reference cycle)",
        )
    absent = [k for k in request["returns"] if not isinstance(result, dict) or k not in result]
    if absent:
        return error(
            "AssertionError",
            f"the task's result lacks {', '.join(f'`{k}`' for k in absent)}",
            result=result,
        )
    return ok(result)


_MODULE = "<python task>"
_BODY = "<python task body>"  # the code wrapped as a function body: one line further down


def _code_line(exc: BaseException) -> int | None:
    """The line of the task's code where `exc` was raised (the innermost frame in it)."""
    if isinstance(exc, SyntaxError) and exc.filename in (_MODULE, _BODY):
        return (exc.lineno or 1) - (1 if exc.filename == _BODY else 0)
    line = None
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name == _MODULE:
            line = tb.tb_lineno
        elif name == _BODY:
            line = tb.tb_lineno - 1
        tb = tb.tb_next
    return line


def _user_frames(exc: BaseException, code: Any) -> list[dict[str, Any]]:
    """The traceback limited to the task's own code: `{line, function, text}` per frame,
    outermost first (library frames in between are left out; at most the last 20)."""
    frames: list[dict[str, Any]] = []
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name in (_MODULE, _BODY):
            line = tb.tb_lineno - (1 if name == _BODY else 0)
            function = tb.tb_frame.f_code.co_name
            frames.append(
                {
                    "line": line,
                    "function": "<task>" if function in ("<module>", "__task_body__") else function,
                    "text": _line_text(code, line),
                }
            )
        tb = tb.tb_next
    return frames[-20:]


def _line_text(code: Any, line: int | None) -> str | None:
    if not isinstance(code, str) or not line:
        return None
    lines = code.splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else None


def _import(spec: Any) -> Any:
    """`"json"` -> the module; `{from: "datetime", import: "datetime"}` -> `from X import Y`
    (an attribute of the module, else its submodule)."""
    if not isinstance(spec, dict):
        return importlib.import_module(str(spec))
    module, name = str(spec["from"]), str(spec["import"])
    parent = importlib.import_module(module)
    if hasattr(parent, name):
        return getattr(parent, name)
    return importlib.import_module(f"{module}.{name}")


@lru_cache(maxsize=256)
def _compiled(code: str) -> tuple[CodeType, bool]:
    """(code object, whether it is the function-body form); the same task code runs again
    and again (every iteration of a loop, every execution of a playbook), and compiling it
    is a fifth of a small task's cost. Code objects are immutable: sharing them is safe."""
    try:
        return compile(code, _MODULE, "exec"), False
    except SyntaxError as exc:
        if "outside function" not in str(exc):
            raise
        # NoETL runs task code as a function body: a top-level `return` gives the result
        body = "".join(f"    {line}\n" for line in code.splitlines()) or "    pass\n"
        return compile(f"def __task_body__():\n{body}", _BODY, "exec"), True


def _run_code(code: str, namespace: dict[str, Any], local: dict[str, Any]) -> Any:
    compiled, as_body = _compiled(code)
    if as_body:
        exec(compiled, namespace)
        returned = namespace["__task_body__"]()
        return returned if returned is not None else namespace.get("result")
    exec(compiled, namespace)  # the tool runs user code by design
    main = namespace.get("main")
    if callable(main):
        params = inspect.signature(main).parameters
        accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        kwargs = local if accepts_any else {k: v for k, v in local.items() if k in params}
        return main(**kwargs)
    return namespace.get("result")
