"""The runtime of compiled expressions: what generated code calls, and the pool loader.

The compiler (`noetlc.expr.compile`) turns every playbook expression into the source
of one Python function `def _e(s): ...` over a scope `s`. `build_evaluator` turns generated
code into that function once, at load time (`noetlc.expr.loader` regenerates a stored
pool's code from its sources first: stored code is never run); evaluation then costs a function call and a few dict lookups. Semantics
are Jinja's (jinja2's own `ChainableUndefined`, filters and tests are reused, so the results
are identical), with a stricter sandbox: no attribute or key starting with `_`, no method
calls, no string formatting, bounded `range` and `**`.

The scope (`Scope`) is a plain dict built by the VM per evaluation (docs/expressions.md):

* the namespaces `workload`, `ctx`, `iter`, `args`, `event`, `outcome`, `output`, `_prev`,
  `_task`, `_attempt`, `keychain`, `execution_id` — each present or absent, never required;
* every finished step or task bound by name to its result, and any other names the VM wants
  to provide (the legacy `result`, `response`, `error`, `this` of `case` rules);
* optionally `"$resolve"` (`RESOLVER_KEY`): a callable that turns the body of a reference
  `{"$ref": {store, key, size, checksum}}` into its value. Reading a field or an item of a
  reference (`fetch.rows`, `outcome.result[0]`) resolves it; the reference itself stays a
  value that passes through unchanged. `$` cannot be written in an expression, so neither the
  resolver nor `$ref` bodies are reachable by name.

A bare name resolves at the scope root, then in `args` -> `ctx` -> `iter` -> `workload`.
An evaluation that fails raises `ExpressionError`, which names the expression, where it was
written, and the original error (`.cause`).

Expressions outside the compiled subset are evaluated by `PlaybookSandbox`, jinja2's
`ImmutableSandboxedEnvironment` with the same refusals, compiled once per process and cached.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from noetlc.expr import limits, undefined
from noetlc.expr.access import (
    FORMAT_METHODS,
    MAPPING_METHODS,
    REF_ATTRIBUTES,
    REF_KEY,
    RESOLVER_KEY,
    Evaluator,
    Resolver,
    Scope,
    call_method,
    getattr_,
    getitem_,
    getslice_,
    lookup_name,
    reference_of,
)
from noetlc.expr.library import (
    CHARGED_FILTERS,
    FILTERS,
    GLOBALS,
    MAX_RANGE,
    TESTS,
)
from noetlc.expr.limits import ExpressionLimit

# jinja2's class once it is loaded (`noetlc.expr.undefined` rebinds it)
Undefined: Any = undefined.Undefined
undefined.track(globals(), Undefined="Undefined")

__all__ = [
    "FILTERS",
    "FORMAT_METHODS",
    "GLOBALS",
    "MAPPING_METHODS",
    "MAX_RANGE",
    "REF_ATTRIBUTES",
    "REF_KEY",
    "RESOLVER_KEY",
    "TESTS",
    "Evaluator",
    "ExpressionError",
    "ExpressionLimit",
    "Resolver",
    "Scope",
    "build_evaluator",
    "call_method",
    "compile_entry",
    "getattr_",
    "getitem_",
    "lookup_name",
    "reference_of",
    "render_value",
    "to_json_value",
]


class ExpressionError(Exception):
    """An expression failed at run time; names the expression and where it was written."""

    def __init__(self, source: str, where: str, cause: BaseException) -> None:
        self.source = source
        self.where = where
        self.cause = cause
        self.error_type = type(cause).__name__
        super().__init__(f"{where}: {self.error_type}: {cause} in `{source}`")

    @property
    def code(self) -> str:
        """NOE311 for a resource limit (`noetlc.expr.limits`), else NOE310."""
        return "NOE311" if isinstance(self.cause, ExpressionLimit) else "NOE310"


def _failure(source: str, where: str) -> Callable[[BaseException], ExpressionError]:
    def fail(cause: BaseException) -> ExpressionError:
        return ExpressionError(source, where, cause)

    return fail


def render_value(value: Any) -> str:
    """How a value renders inside mixed text: str(), undefined as '' (bounded)."""
    return limits.text(value)


# The names generated code refers to; `build_evaluator` puts them in each function's globals.
RUNTIME: dict[str, Any] = {
    "__builtins__": {},
    "type": type,  # only for the inlined `type(x) is dict` (attribute) and `is int` (`+`) checks
    "int": int,
    "Exception": Exception,  # only for the `except` that wraps failures in ExpressionError
    "dict": dict,
    "_name": lookup_name,
    "_attr": getattr_,
    "_item": getitem_,
    "_slice": getslice_,
    "_method": call_method,
    "_pow": limits.power,
    "_mul": limits.multiply,
    "_mod": limits.modulo,
    "_add": limits.add,
    "_sized": limits.sized,
    "_concat": limits.concat,
    "_text": limits.text,
    "_SC": limits.SCALARS,
    "_FB": CHARGED_FILTERS,
    "_F": FILTERS,
    "_T": TESTS,
    "_G": GLOBALS,
    "_U": undefined.ChainableUndefined,
    # one shared undefined value, jinja2's ChainableUndefined (in place) once jinja2 loads
    "_UN": undefined.SHARED,
    "_str": render_value,
}
undefined.track(RUNTIME, _U="ChainableUndefined")


# --------------------------------------------------------------------------- the slow path


def slow_expression(text: str) -> Evaluator:
    """An expression outside the compiled subset, evaluated by jinja2 (`noetlc.expr.sandbox`)."""
    from noetlc.expr import sandbox  # jinja2: only for a program that has such expressions

    return sandbox.slow_expression(text)


def slow_template(text: str, guard: bool = False) -> Evaluator:
    """A template outside the compiled subset, rendered by jinja2 (`noetlc.expr.sandbox`)."""
    from noetlc.expr import sandbox

    return sandbox.slow_template(text, guard)


def __getattr__(name: str) -> Any:
    """jinja2's exceptions and the slow path's environment, importing jinja2 when asked."""
    if name in ("SecurityError", "UndefinedError"):
        undefined.load()
        return getattr(undefined, name)
    if name in ("PlaybookSandbox", "fallback_environment"):
        from noetlc.expr import sandbox

        return getattr(sandbox, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- loading the pool


def _guarded(fn: Evaluator, fail: Callable[[BaseException], ExpressionError]) -> Evaluator:
    def evaluate(s: Scope) -> Any:
        try:
            return fn(s)
        except Exception as exc:
            raise fail(exc) from exc

    return evaluate


def compile_entry(entry: Mapping[str, Any]) -> Evaluator:
    """The callable of an in-process entry (`CompiledExpression.to_entry()`, just generated).

    Stored pools never come here: `noetlc.expr.loader.load_pool` compiles their sources again
    and calls `build_evaluator` with the generated code."""
    return build_evaluator(
        entry["kind"],
        str(entry.get("source", "")),
        code=entry.get("code"),
        value=entry.get("value"),
        jinja=entry.get("jinja"),
        where=entry.get("where"),
        guard=entry.get("mode") == "guard",
    )


def build_evaluator(
    kind: str,
    source: str,
    *,
    code: str | None = None,
    value: Any = None,
    jinja: str | None = None,
    where: str | None = None,
    guard: bool = False,
) -> Evaluator:
    """One callable. Kinds: `code` (generated source of `def _e(s)`, run with `RUNTIME` as its
    only globals; only ever code this process's code generator made), `const` (a value),
    `jinja_expression` / `jinja_template` (the slow path). `where` ("file:line:col" of the
    first use) goes into `ExpressionError`; `guard`: a `when:` (a slow-path template then
    yields the value it printed, see `_guard_value`)."""
    fail = _failure(source, where or "<expr>")
    if kind == "code":
        if code is None:
            raise ValueError("a code entry without code")
        namespace: dict[str, Any] = dict(RUNTIME)
        namespace["_fail"] = fail
        exec(code_object(code, source), namespace)
        # Popped, not read: left in its own globals the function would be a reference cycle
        # (namespace -> _e -> __globals__), garbage for the collector once the entry is dropped.
        fn: Evaluator = namespace.pop("_e")
        return fn
    if kind == "const":
        return lambda s: value
    if kind == "jinja_expression" and jinja is not None:
        return _guarded(slow_expression(jinja), fail)
    if kind == "jinja_template" and jinja is not None:
        return _guarded(slow_template(jinja, guard), fail)
    raise ValueError(f"unknown expression entry kind {kind!r}")


@functools.lru_cache(maxsize=16384)
def code_object(code: str, source: str) -> Any:
    """Byte-compiled generated code, shared by every load of the same expression."""
    return compile(code, f"<expr {source!r}>", "exec")


def to_json_value(value: Any) -> Any:
    """Make an expression result JSON-compatible (undefined -> None, tuples -> lists)."""
    if isinstance(value, Undefined):
        return None
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.loads(json.dumps(value, default=str))
