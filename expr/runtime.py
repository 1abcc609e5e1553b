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

import contextvars
import functools
import json
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from jinja2 import ChainableUndefined, Undefined, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from noetlc.expr import limits
from noetlc.expr.library import (
    BUILDING_FILTERS,
    CHARGED_FILTERS,
    FILTERS,
    GLOBALS,
    MAX_RANGE,
    NONDETERMINISTIC_FILTERS,
    TESTS,
)
from noetlc.expr.limits import ExpressionLimit
from noetlc.expr.namespaces import BARE_NAME_ORDER

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
    "PlaybookSandbox",
    "Resolver",
    "Scope",
    "SecurityError",
    "UndefinedError",
    "build_evaluator",
    "compile_entry",
    "fallback_environment",
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
        raise SecurityError(f"access to attribute {name!r} is not allowed")
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
        raise SecurityError(f"access to method {type(obj).__name__}.{name} is not allowed")
    return value


def getitem_(obj: Any, key: Any, s: Scope | None = None) -> Any:
    """`obj[key]`: the item, else (for a string key) a data attribute, else undefined."""
    if isinstance(key, str) and key.startswith("_"):
        raise SecurityError(f"access to key {key!r} is not allowed")
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
                    raise SecurityError(f"access to method {key!r} is not allowed") from None
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
        raise SecurityError(
            f"`.{name}()` is called on {type(obj).__name__}: only a mapping's "
            f"{', '.join(sorted(MAPPING_METHODS))} methods are allowed"
        )
    if name == "get":
        if not 1 <= len(args) <= 2:
            raise TypeError(f"`.get()` takes a key and an optional default, got {len(args)}")
        key = args[0]
        if isinstance(key, str) and key.startswith("_"):
            raise SecurityError(f"access to key {key!r} is not allowed")
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
    "_UN": ChainableUndefined(),
    "_str": render_value,
}


# --------------------------------------------------------------------------- the slow path

# The resolver of the scope being evaluated on the slow path (jinja2 calls `getattr` and
# `getitem` without the scope).
_SLOW_RESOLVER: contextvars.ContextVar[Resolver | None] = contextvars.ContextVar(
    "noetlc_slow_resolver", default=None
)


class _BoundedCodeGenerator(CodeGenerator):
    """jinja2's code generator with `~` size-checked like the compiled path's (jinja2 joins
    the operands with its own `str_join`, out of the sandbox's reach)."""

    def visit_Call(self, node: nodes.Call, frame: Frame, forward_caller: bool = False) -> None:
        # `m.get(k)`: the method of the mapping even when it has a key `get`, as on the
        # compiled path (and in jinja2, where an attribute wins over a key)
        target = node.node
        if (
            isinstance(target, nodes.Getattr)
            and target.attr in MAPPING_METHODS
            and not node.kwargs
            and node.dyn_args is None
            and node.dyn_kwargs is None
        ):
            self.write("environment.call_method(")
            self.visit(target.node, frame)
            self.write(f", {target.attr!r}")
            self.signature(node, frame)
            self.write(")")
            return
        super().visit_Call(node, frame, forward_caller=forward_caller)

    def _output_child_to_const(self, node: nodes.Expr, frame: Frame, finalize: Any) -> str:
        # Printed values go through `finalize` at run time, constants too (`{{ false }}`):
        # a guard's value is what it printed (`_guard_value`), and `finalize` checks it.
        if not isinstance(node, nodes.TemplateData):
            raise nodes.Impossible()
        return str(super()._output_child_to_const(node, frame, finalize))

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat_values(")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(")")


class PlaybookSandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox with the compiled path's refusals.

    On top of jinja2's own rules: keys (not only attributes) starting with `_` are refused,
    methods are unreachable (`x.items()`, `'a'.upper()` are refused like in compiled code; a
    mapping's key wins over a method of the same name, so `data.items` is the key), `*`, `%`
    and `**` and the padding filters have the limits of `noetlc.expr.limits`, references
    resolve.
    """

    intercepted_binops = frozenset({"*", "%", "**", "+"})
    _BINOPS: ClassVar[dict[str, Callable[[Any, Any, Any], Any]]] = {
        "*": limits.multiply,
        "%": limits.modulo,
        "+": limits.add,
    }
    code_generator_class = _BoundedCodeGenerator
    # The text a template renders, `{% set %}` blocks and macros are joined by `concat`:
    # counted while a `{% for %}` produces it. `~` goes through `concat_values`.
    concat = staticmethod(limits.bounded_join)
    concat_values = staticmethod(limits.slow_concat)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            return limits.power(left, right)
        return self._BINOPS[operator](left, right, limits.slow_meter())

    def call_method(self, obj: Any, name: str, *args: Any) -> Any:
        """`m.get(k)`, `m.keys()`, ... (the generated code's call of a mapping method)."""
        resolver = _SLOW_RESOLVER.get()
        scope = None if resolver is None else {RESOLVER_KEY: resolver}
        return call_method(limits.slow_meter(), obj, name, args, scope)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if callable(value) and not isinstance(obj, LoopContext):
            return False  # no methods (`loop.cycle` aside): the same rule as compiled code
        return bool(super().is_safe_attribute(obj, attr, value))

    def wrap_str_format(self, value: Any) -> None:
        return None  # refused by is_safe_attribute instead

    def getattr(self, obj: Any, attribute: str) -> Any:
        if attribute in REF_ATTRIBUTES:
            return reference_of(obj, attribute)
        if attribute.startswith("_"):
            raise SecurityError(f"access to attribute {attribute!r} is not allowed")
        if type(obj) is dict:
            if attribute in obj:
                return obj[attribute]
            target = self._resolved(obj)
            if target is not _MISSING:
                return self.getattr(target, attribute)
            if attribute == "data":
                return obj  # as `getattr_`: NoETL's `x.data` of a mapping without `data`
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(argument, str) and argument.startswith("_"):
            raise SecurityError(f"access to key {argument!r} is not allowed")
        if type(obj) is dict and argument not in obj:
            target = self._resolved(obj)
            if target is not _MISSING:
                return self.getitem(target, argument)
        return super().getitem(obj, argument)

    @staticmethod
    def _resolved(obj: dict[Any, Any]) -> Any:
        resolver = _SLOW_RESOLVER.get()
        if resolver is None or REF_KEY not in obj:
            return _MISSING
        return resolver(obj[REF_KEY])


@functools.lru_cache(maxsize=1)
def fallback_environment() -> PlaybookSandbox:
    """The slow path's environment: the same globals and filters as compiled code."""
    # `finalize` sees every `{{ value }}` a template prints, before jinja2's str()
    env = PlaybookSandbox(undefined=ChainableUndefined, finalize=_printed)
    # Only the whitelisted globals: no cycler/joiner/lipsum (jinja2's `range` is replaced by
    # ours, which has the same bound). `namespace` stays: `{% set %}` in loops needs it.
    for name in ("cycler", "joiner", "lipsum"):
        env.globals.pop(name, None)
    for name in NONDETERMINISTIC_FILTERS:  # refused at compile time too, with a hint
        env.filters.pop(name, None)
    env.globals.update(GLOBALS)
    ours = ("bool", "join", "replace", "sum", "tojson", "string")  # ours, the size-checked
    for name in ours:
        env.filters[name] = FILTERS[name]
    env.filters.update(limits.bounded_filters(env.filters))
    # what they build is charged to the evaluation's meter (the others return an item)
    env.filters.update(limits.charged_filters(env.filters, skip=set(FILTERS) - BUILDING_FILTERS))
    return env


@functools.lru_cache(maxsize=4096)
def _fallback_compiled(text: str, mode: str) -> Any:
    env = fallback_environment()
    if mode == "expression":
        return env.compile_expression(text, undefined_to_none=False)
    return env.from_string(text)


def _flatten(s: Scope) -> dict[str, Any]:
    """The variables a Jinja template sees: bare names resolve like `lookup_name`."""
    flat: dict[str, Any] = {}
    for ns in reversed(BARE_NAME_ORDER):
        space = s.get(ns)
        if type(space) is dict:
            flat.update(space)
    flat.update(s)
    flat.pop(RESOLVER_KEY, None)
    return flat


# The values a guard's template printed (`_printed` appends them while a guard renders).
_PRINTED = threading.local()


def _printed(value: Any) -> Any:
    """jinja2's `finalize`: every `{{ value }}` a template prints passes here first."""
    limits.check_printable(value)
    printed = getattr(_PRINTED, "values", None)
    if printed is not None:
        printed.append(value)
    return value


def _guard_value(text: str, printed: list[Any]) -> Any:
    """A guard rendered on the slow path is true or false as the fast path judges it: when
    the text is one printed value (blocks that print nothing around it), that value itself —
    so `{% if true %}{% endif %}{{ false }}` is false, not the truthy text "False" —
    else the text (true unless empty, as for a text condition of the fast path)."""
    shown = [v for v in printed if not isinstance(v, Undefined) and str(v) != ""]
    if len(shown) == 1 and text.strip() == str(shown[0]).strip():
        return shown[0]
    if not shown and not text.strip():
        return printed[0] if printed else text  # an undefined value, or nothing at all
    return text


def _slow(text: str, mode: str, guard: bool = False) -> Evaluator:
    def evaluate(s: Scope) -> Any:
        compiled = _fallback_compiled(text, mode)
        token = _SLOW_RESOLVER.set(s.get(RESOLVER_KEY))
        variables = _flatten(s)
        limits.begin_slow()
        try:
            if mode == "expression":
                value = limits.StepBudget().run(lambda: compiled(**variables))
                # its value goes to the log as JSON: bounded like printed text
                return limits.check_printable(value)
            if not guard:
                return limits.StepBudget().run(lambda: compiled.render(**variables))
            printed: list[Any] = []
            _PRINTED.values = printed
            try:
                rendered = limits.StepBudget().run(lambda: compiled.render(**variables))
            finally:
                _PRINTED.values = None
            return _guard_value(rendered, printed)
        finally:
            limits.end_slow()
            _SLOW_RESOLVER.reset(token)

    return evaluate


def slow_expression(text: str) -> Evaluator:
    return _slow(text, "expression")


def slow_template(text: str, guard: bool = False) -> Evaluator:
    return _slow(text, "template", guard)


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
