"""The `python` tool: run task code in this process, or in a child process with a timeout.

The code sees the globals NoETL provides (`context`: every name a template reads bare, stored
results loaded on access; `ctx`: the execution's ctx over the workload; `workload`;
`execution_id`; the loop iterator by its name), then binds its `input:` (or `args:`) mapping
as locals and as `input_data` (unless an input is itself named `input_data`). Templates inside
the code are rendered into its text first, over the scope and the inputs, as NoETL does (the
compiler warns about it, NOE608); code whose braces are no valid template runs as written; it either
defines `main(...)` (called with the inputs it names), assigns `result`, or — as NoETL runs task
code as a function body — `return`s a value at the top level. `libs: {alias: module}` (or `{alias:
{from: module, import: name}}`) imports modules first; `auth: {alias: keychain entry}` binds the resolved values as the local `auth`;
`assert: {expects, returns}` checks inputs before and result keys after. An exception is an
error outcome with `py.exception_type`.

In the service, its servers and workers (isolation mode `process`, stdlib_tools/isolation.py),
and wherever a task says `spec.isolation: subprocess`, the code runs in a warm runner process
with a clean environment and resource limits; what it prints is captured (`py.stdout`,
`py.stderr`, and the runtime's task log), `spec.timeout` can stop it: the runner is killed and
the outcome is a `Timeout` error; a cancel of the action (or a worker shutting down) kills it
too (a `Cancelled` error). In-process code (`noetl-vm run`) cannot be interrupted, so there
neither applies.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from noetlc.expr.runtime import REF_KEY, RESOLVER_KEY
from noetlc.stdlib_tools.capture import captured
from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.python_exec import execute
from noetlc.stdlib_tools.script_source import ScriptError, load

if TYPE_CHECKING:  # the executor takes pydantic models or `shape_check.Args`
    from noetlc.stdlib_tools.schemas import PythonArgs


def run(
    args: PythonArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    code = args.code
    if code is None and args.script is not None:
        try:
            code = load(args.script, ctx)
        except ScriptError as exc:
            return error("ScriptError", str(exc))
    if code is not None and ("{{" in code or "{%" in code):
        try:
            code = render_code(code, ctx.scope, _locals(args))
        except Exception as exc:  # a template error is the task's error, as in NoETL
            return error("TemplateError", f"cannot render the templates in the code: {exc}")
    request = {
        "globals": scope_globals(ctx.scope),
        "code": code,
        "locals": _locals(args),
        "libs": _libs(args),
        "auth": _auth(args.auth, keychain),
        "expects": args.assert_.expects if args.assert_ else [],
        "returns": args.assert_.returns if args.assert_ else [],
    }
    from noetlc.stdlib_tools.registry import isolating

    if isolating(spec):
        return _in_subprocess(request, spec.get("timeout"), ctx, keychain)
    with captured(ctx.log):  # the task's prints go to its log, not this process's output
        return execute(request)


class ScopeView(Mapping[str, Any]):
    """The python tool's `context`: every name a template could read bare (the scope's root —
    step and task results, `workload`, `ctx`, `iter`, `execution_id`... — then the keys of
    `args`, `ctx`, `iter` and `workload`), read-only, with stored results loaded on access."""

    def __init__(self, scope: Mapping[str, Any]) -> None:
        self._scope = scope
        self._flat: dict[str, Any] | None = None

    def _names(self) -> dict[str, Any]:
        if self._flat is None:
            flat: dict[str, Any] = {}
            for ns in ("workload", "iter", "ctx", "args"):
                space = self._scope.get(ns)
                if isinstance(space, dict):
                    flat.update(space)
            flat.update(self._scope)
            flat.pop(RESOLVER_KEY, None)
            self._flat = flat
        return self._flat

    def __getitem__(self, key: str) -> Any:
        return resolved(self._names()[key], self._scope)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def get(self, key: str, default: Any = None) -> Any:
        names = self._names()
        return resolved(names[key], self._scope) if key in names else default


def resolved(value: Any, scope: Mapping[str, Any]) -> Any:
    """A reference-first result `{"$ref": ...}` loaded through the scope's resolver."""
    if isinstance(value, dict) and REF_KEY in value and len(value) == 1:
        resolver = scope.get(RESOLVER_KEY)
        if resolver is not None:
            return resolver(value[REF_KEY])
    return value


def scope_globals(scope: Mapping[str, Any] | None) -> dict[str, Any]:
    """The globals NoETL gives task code: `context` (every name a template reads bare),
    `ctx` (the execution's ctx over the workload, as NoETL seeds it), `workload`,
    `execution_id`, and the loop iterator (and other `iter` values) by name. The task's own
    inputs are bound after these and win."""
    if scope is None:
        return {}
    raw_workload, raw_ctx = scope.get("workload"), scope.get("ctx")
    workload: dict[str, Any] = raw_workload if isinstance(raw_workload, dict) else {}
    ctx: dict[str, Any] = raw_ctx if isinstance(raw_ctx, dict) else {}
    out: dict[str, Any] = {
        "context": ScopeView(scope),
        "ctx": {**workload, **ctx},
        "workload": dict(workload),
        "execution_id": scope.get("execution_id"),
    }
    for name, value in (scope.get("iter") or {}).items():
        if name != "index" and isinstance(name, str) and name.isidentifier():
            out[name] = resolved(value, scope)
    return out


def render_code(code: str, scope: Mapping[str, Any] | None, inputs: dict[str, Any]) -> str:
    """NoETL renders `{{ }}` inside python code before it runs (the compiler warns, NOE608):
    with the sandboxed template engine, over the scope and the task's own inputs."""
    from noetlc.expr.runtime import slow_template

    template = slow_template(code)  # imports jinja2
    from jinja2 import TemplateSyntaxError

    render_scope: dict[str, Any] = dict(scope or {})
    render_scope.update(inputs)
    try:
        return str(template(render_scope))
    except TemplateSyntaxError:
        # braces that are no template (`{{ vars.* }}` in a comment): the code runs as written
        return code


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


def _in_subprocess(
    request: dict[str, Any], timeout: Any, ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    """The request run in a warm runner process (stdlib_tools/isolation.py); one that carries
    a keychain value (its `auth:`, or a template that put one in its code or inputs) gets a
    runner of its own."""
    from noetlc.stdlib_tools import isolation

    seconds = float(timeout) if isinstance(timeout, int | float) else None
    code = request.get("code")
    request = {**request, "globals": _materialized(request.get("globals") or {}, code)}
    return isolation.run_python(
        request,
        secret=bool(request.get("auth")) or keychain.mentions(request),
        timeout=seconds,
        cancelled=ctx.cancelled,
        log=getattr(ctx, "log", None),
        cwd=str(ctx.workdir),
    )


def _materialized(globals_: dict[str, Any], code: Any) -> dict[str, Any]:
    """The globals as plain JSON-able values for the child process (stored results loaded).

    The keychain namespace never goes (a task receives the values its own `auth:` and
    templates name, nothing else); `context` goes only to code that names it (loading every
    stored result for each task would make a long chain quadratic)."""
    out = dict(globals_)
    context = out.get("context")
    if isinstance(context, ScopeView):
        if isinstance(code, str) and "context" in code:
            out["context"] = {
                k: context[k] for k in context if isinstance(k, str) and k not in HIDDEN
            }
        else:
            out["context"] = {}
    return out


# scope names task code in a child process does not receive
HIDDEN = frozenset({"keychain"})
