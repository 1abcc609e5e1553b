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
from noetlc.expr.library import (
    CHARGED_FILTERS,
    FILTERS,
    GLOBALS,
    MAX_RANGE,
    TESTS,
)
from noetlc.expr.limits import ExpressionLimit
from noetlc.expr.namespaces import BARE_NAME_ORDER

# jinja2's classes once it is loaded (`noetlc.expr.undefined`); the names generated code and
# the helpers below use are rebound then, so the hot paths keep plain global lookups.
Undefined: Any = undefined.Undefined
ChainableUndefined: Any = undefined.ChainableUndefined
_SecurityError: Any = undefined.SecurityError
undefined.track(
    globals(),
    Undefined="Undefined",
    ChainableUndefined="ChainableUndefined",
    _SecurityError="SecurityError",
)

Scope = dict[str, Any]
Evaluator = Callable[[Scope], Any]

REF_KEY = "$ref"  # a reference-first result: {"$ref": {store, key, size, checksum}}
# NoETL's spellings for a result stored by reference: `result._ref` is its reference,
# `result._store` the store holding it and `result._preview` the preview kept with it (noetlc
# keeps none: it is undefined, as NoETL's is when no preview was made); all three are
# undefined for a result kept inline. The only names starting with `_` that expressions read.
REF_ATTRIBUTES = frozenset({"_ref", "_store", "_preview"})
RESOLVER_KEY = "$resolve"  # the scope entry holding the reference resolver, if any
# String formatting reaches attributes through the format spec (`'{0.__class__}'.format(x)`).
FORMAT_METHODS = frozenset({"format", "format_map"})

__all__ = [
    "FILTERS",
    "GLOBALS",
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
    "compile_entry",
    "render_value",
    "to_json_value",
]

Resolver = Callable[[Any], Any]


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


# --------------------------------------------------------------------------- undefined values


def lookup_name(s: Scope, name: str) -> Any:
    """A bare name: the scope root, then args -> ctx -> iter -> workload (so `{{ city }}` finds a loop iterator)."""
    value = s.get(name, _MISSING)
    if value is not _MISSING:
        return value
    for ns in BARE_NAME_ORDER:
        space = s.get(ns)
        if type(space) is dict and name in space:
            return space[name]
    return ChainableUndefined(name=name)


_MISSING = object()


# --------------------------------------------------------------------------- sandboxed access


def _resolved(obj: dict[Any, Any], s: Scope | None) -> Any:
    """The value of a reference when the scope has a resolver; else `_MISSING`."""
    if REF_KEY not in obj or s is None:
        return _MISSING
    resolver = s.get(RESOLVER_KEY)
    return _MISSING if resolver is None else resolver(obj[REF_KEY])


def reference_of(obj: Any, name: str) -> Any:
    """`obj._ref` (the reference), `obj._store` (its store) or `obj._preview` (the preview
    the reference carries, if any) of a result stored by reference; undefined otherwise."""
    ref = obj.get(REF_KEY) if type(obj) is dict else None
    if type(ref) is dict:
        if name == "_ref":
            return ref
        field = "store" if name == "_store" else "preview"
        if ref.get(field) is not None:
            return ref[field]
    return ChainableUndefined(obj=obj, name=name)


def getattr_(obj: Any, name: str, s: Scope | None = None) -> Any:
    """`obj.name`: a mapping's key first (no methods are reachable), else a data attribute.

    `x.data` of a mapping that has no `data` key is `x` itself, as NoETL's template proxy
    for results reads it (noetl/noetl `noetl/core/dsl/render.py`, `TaskResultProxy`): a
    playbook reads `response.data.rows` or `step.data.field` whether or not the result wraps
    its value in `data`."""
    if name in REF_ATTRIBUTES:
        return reference_of(obj, name)
    if type(obj) is dict:
        value = obj.get(name, _MISSING)
        if value is not _MISSING:
            return value
        target = _resolved(obj, s)
        if target is not _MISSING:
            return getattr_(target, name, s)
        if name == "data":
            return obj  # NoETL's result proxy: `x.data` of a mapping without `data` is `x`
        return ChainableUndefined(obj=obj, name=name)
    if isinstance(obj, Undefined):
        return obj.__getattr__(name) if isinstance(obj, ChainableUndefined) else obj
    if name.startswith("_"):
        raise _SecurityError(f"access to attribute {name!r} is not allowed")
    if isinstance(obj, Mapping):
        return obj[name] if name in obj else ChainableUndefined(obj=obj, name=name)
    try:
        value = getattr(obj, name)
    except AttributeError:
        try:
            return obj[name]
        except (TypeError, LookupError):
            return ChainableUndefined(obj=obj, name=name)
    if callable(value):
        raise _SecurityError(f"access to method {type(obj).__name__}.{name} is not allowed")
    return value


def getitem_(obj: Any, key: Any, s: Scope | None = None) -> Any:
    """`obj[key]`: the item, else (for a string key) a data attribute, else undefined."""
    if isinstance(key, str) and key.startswith("_"):
        raise _SecurityError(f"access to key {key!r} is not allowed")
    try:
        return obj[key]
    except (TypeError, LookupError):
        if type(obj) is dict:
            target = _resolved(obj, s)
            if target is not _MISSING:
                return getitem_(target, key, s)
        if isinstance(obj, Undefined):
            if isinstance(obj, ChainableUndefined):
                return obj
            obj._fail_with_undefined_error()
        if isinstance(key, str) and not isinstance(obj, Mapping):
            try:
                value = getattr(obj, key)
            except AttributeError:
                pass
            else:
                if callable(value):
                    raise _SecurityError(f"access to method {key!r} is not allowed") from None
                return value
    return ChainableUndefined(obj=obj, name=key)


# The read-only mapping methods templates may call (NoETL renders with jinja2's unsandboxed
# `Environment`, noetl/core/dsl/engine/executor/base.py, where every method is reachable; its
# playbooks call these). Anything else stays refused.
MAPPING_METHODS = frozenset({"get", "keys", "values", "items"})


def call_method(
    meter: limits.Meter | None, obj: Any, name: str, args: tuple[Any, ...], s: Scope | None
) -> Any:
    """`m.get(key[, default])`, `m.keys()`, `m.values()`, `m.items()` of a mapping, as Python
    has them (the views as lists; what they build is charged to the evaluation's budget).
    A key starting with `_` is refused as `m[key]` refuses it; a method of anything other than
    a mapping is refused, undefined fails as reading undefined does."""
    if type(obj) is dict:
        target = _resolved(obj, s)
        if target is not _MISSING:
            obj = target
    if isinstance(obj, Undefined):
        obj._fail_with_undefined_error()
    if not isinstance(obj, Mapping):
        raise _SecurityError(
            f"`.{name}()` is called on {type(obj).__name__}: only a mapping's "
            f"{', '.join(sorted(MAPPING_METHODS))} methods are allowed"
        )
    if name == "get":
        if not 1 <= len(args) <= 2:
            raise TypeError(f"`.get()` takes a key and an optional default, got {len(args)}")
        key = args[0]
        if isinstance(key, str) and key.startswith("_"):
            raise _SecurityError(f"access to key {key!r} is not allowed")
        default = args[1] if len(args) == 2 else None
        try:
            return obj.get(key, default)
        except TypeError:  # an unhashable key is in no mapping
            return default
    if args:
        raise TypeError(f"`.{name}()` takes no arguments, got {len(args)}")
    if name == "keys":
        return limits.built(list(obj.keys()), meter)
    if name == "values":
        return limits.built(list(obj.values()), meter)
    return limits.built(list(obj.items()), meter)


def getslice_(obj: Any, start: Any, stop: Any, step: Any) -> Any:
    return obj[start:stop:step]


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
    "_U": ChainableUndefined,
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
        exec(_code_object(code, source), namespace)
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
def _code_object(code: str, source: str) -> Any:
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
