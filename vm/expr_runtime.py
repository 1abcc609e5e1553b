"""The runtime of compiled expressions: what generated code calls, and the pool loader.

The compiler (`noetlc.compiler.expressions`) turns every playbook expression into the source
of one Python function `def _e(s): return ...` over a scope `s` (a plain dict of namespaces).
`load_pool` compiles each entry once, at load time; evaluation then costs a function call and
a few dict lookups. Semantics are Jinja's (jinja2's own `ChainableUndefined`, filters and
tests are reused, so the results are identical), with a stricter sandbox: no attribute or key
starting with `_`, no method calls, bounded `range`.

Expressions outside the compiled subset are evaluated by jinja2's
`ImmutableSandboxedEnvironment`, compiled once per process and cached.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import jinja2
from jinja2 import ChainableUndefined, Undefined
from jinja2 import filters as jf
from jinja2 import tests as jt
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.nodes import EvalContext
from jinja2.sandbox import ImmutableSandboxedEnvironment

Scope = dict[str, Any]
Evaluator = Callable[[Scope], Any]

MAX_RANGE = 100_000  # the same bound as jinja2's sandbox
MAX_POWER_EXPONENT = 10_000
# Namespaces that live at the root of every scope; other bare names fall back through these.
BARE_NAME_ORDER = ("args", "ctx", "iter", "workload")

__all__ = [
    "MAX_RANGE",
    "ExpressionError",
    "SecurityError",
    "UndefinedError",
    "fallback_environment",
    "load_pool",
    "render_value",
]


class ExpressionError(Exception):
    """An expression failed at run time; names the expression and where it was written."""

    def __init__(self, message: str, source: str, where: str, cause: BaseException) -> None:
        self.source = source
        self.where = where
        self.cause = cause
        self.error_type = type(cause).__name__
        super().__init__(f"{where}: {message} in `{source}`")


# --------------------------------------------------------------------------- undefined values


def lookup_name(s: Scope, name: str) -> Any:
    """A bare name: the scope root, then args -> ctx -> iter -> workload (DESIGN §2.3)."""
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


def getattr_(obj: Any, name: str) -> Any:
    """`obj.name`: a mapping's key first (no methods are reachable), else a data attribute."""
    if type(obj) is dict:
        value = obj.get(name, _MISSING)
        return value if value is not _MISSING else ChainableUndefined(obj=obj, name=name)
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


def getitem_(obj: Any, key: Any) -> Any:
    """`obj[key]`: the item, else (for a string key) a data attribute, else undefined."""
    if isinstance(key, str) and key.startswith("_"):
        raise SecurityError(f"access to key {key!r} is not allowed")
    try:
        return obj[key]
    except (TypeError, LookupError):
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


def getslice_(obj: Any, start: Any, stop: Any, step: Any) -> Any:
    return obj[start:stop:step]


def concat(*values: Any) -> str:
    """`a ~ b`: Jinja converts both sides with str(); undefined is ''."""
    return "".join(map(str, values))


def power(base: Any, exponent: Any) -> Any:
    if isinstance(exponent, int) and exponent > MAX_POWER_EXPONENT and isinstance(base, int):
        raise SecurityError(f"exponent {exponent} is too large")
    return base**exponent


def render_value(value: Any) -> str:
    """How a value renders inside mixed text: str(), undefined as ''."""
    return str(value)


# --------------------------------------------------------------------------- filters and tests

_ENV = ImmutableSandboxedEnvironment(undefined=ChainableUndefined)
_EVAL_CTX = EvalContext(_ENV)


def _safe_range(*args: int) -> range:
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise OverflowError(f"range too big, maximum size is {MAX_RANGE}")
    return rng


def lookup(obj: Any, path: Any, default: Any = None) -> Any:
    """`lookup(obj, 'a.b.0.c', default)`: nested keys / list indexes by a dotted path."""
    current = obj
    for part in str(path).split("."):
        if part.startswith("_"):
            raise SecurityError(f"access to key {part!r} is not allowed")
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif (
            isinstance(current, Sequence)
            and not isinstance(current, str)
            and part.lstrip("-").isdigit()
        ):
            index = int(part)
            if -len(current) <= index < len(current):
                current = current[index]
            else:
                return default
        else:
            return default
    return current


def _f_tojson(value: Any, indent: Any = None) -> str:
    # Jinja's tojson HTML-escapes <, >, &, '; playbooks render into SQL/JSON, not HTML, so we
    # keep Jinja's exact output for compatibility of existing playbooks.
    return str(jf.do_tojson(_EVAL_CTX, value, indent))


def _f_map(value: Any, *args: Any, **kwargs: Any) -> list[Any]:
    if args and not kwargs:
        name = args[0]
        if name not in FILTERS:
            raise jinja2.TemplateRuntimeError(f"No filter named {name!r}.")
        fn = FILTERS[name]
        return [fn(item, *args[1:]) for item in value]
    attribute = kwargs.get("attribute")
    if attribute is not None and str(attribute).startswith("_"):
        raise SecurityError(f"access to attribute {attribute!r} is not allowed")
    return list(jf.do_map(_context(), value, *args, **kwargs))


def _select(value: Any, args: tuple[Any, ...], attr: bool, keep: bool) -> list[Any]:
    if attr:
        if not args:
            raise jinja2.exceptions.FilterArgumentError("Missing parameter for attribute name")
        attribute, rest = args[0], args[1:]
        if str(attribute).startswith("_"):
            raise SecurityError(f"access to attribute {attribute!r} is not allowed")
        getter = jf.make_attrgetter(_ENV, attribute)
    else:
        rest = args

        def getter(x: Any) -> Any:
            return x

    if rest:
        name, params = rest[0], rest[1:]
        if name not in TESTS:
            raise jinja2.TemplateRuntimeError(f"No test named {name!r}.")
        test = TESTS[name]

        def check(item: Any) -> bool:
            return bool(test(getter(item), *params))

    else:

        def check(item: Any) -> bool:
            return bool(getter(item))

    return [item for item in value if check(item) == keep]


@functools.lru_cache(maxsize=1)
def _context() -> Any:
    return _ENV.from_string("").new_context()


def _f_list(value: Any) -> list[Any]:
    return list(value)


FILTERS: dict[str, Callable[..., Any]] = {
    "default": jf.do_default,
    "d": jf.do_default,
    "int": jf.do_int,
    "float": jf.do_float,
    "string": jf.FILTERS["string"],
    "bool": lambda v: bool(v),
    "length": len,
    "count": len,
    "lower": jf.do_lower,
    "upper": jf.do_upper,
    "trim": jf.do_trim,
    "capitalize": jf.do_capitalize,
    "title": jf.do_title,
    "replace": lambda v, old, new, count=None: jf.do_replace(_EVAL_CTX, v, old, new, count),
    "join": lambda v, d="", attribute=None: jf.sync_do_join(_EVAL_CTX, v, d, attribute),
    "list": _f_list,
    "first": lambda v: jf.sync_do_first(_ENV, v),
    "last": lambda v: jf.do_last(_ENV, v),
    "min": lambda v, case_sensitive=False, attribute=None: jf.do_min(
        _ENV, v, case_sensitive, attribute
    ),
    "max": lambda v, case_sensitive=False, attribute=None: jf.do_max(
        _ENV, v, case_sensitive, attribute
    ),
    "sum": lambda v, attribute=None, start=0: jf.sync_do_sum(_ENV, v, attribute, start),
    "sort": lambda v, reverse=False, case_sensitive=False, attribute=None: jf.do_sort(
        _ENV, v, reverse, case_sensitive, attribute
    ),
    "unique": lambda v, case_sensitive=False, attribute=None: list(
        jf.do_unique(_ENV, v, case_sensitive, attribute)
    ),
    "round": jf.do_round,
    "abs": abs,
    "tojson": _f_tojson,
    "map": _f_map,
    "select": lambda v, *a: _select(v, a, attr=False, keep=True),
    "reject": lambda v, *a: _select(v, a, attr=False, keep=False),
    "selectattr": lambda v, *a: _select(v, a, attr=True, keep=True),
    "rejectattr": lambda v, *a: _select(v, a, attr=True, keep=False),
    "reverse": jf.do_reverse,
    "items": lambda v: list(jf.do_items(v)),
    "dictsort": jf.do_dictsort,
}

TESTS: dict[str, Callable[..., bool]] = {
    "defined": jt.test_defined,
    "undefined": jt.test_undefined,
    "none": jt.test_none,
    "number": jt.test_number,
    "string": jt.test_string,
    "mapping": jt.test_mapping,
    "sequence": jt.test_sequence,
    "iterable": jt.test_iterable,
    "boolean": jt.test_boolean,
    "integer": jt.test_integer,
    "float": jt.test_float,
    "true": jt.test_true,
    "false": jt.test_false,
    "odd": jt.test_odd,
    "even": jt.test_even,
    "divisibleby": jt.test_divisibleby,
    "lower": jt.test_lower,
    "upper": jt.test_upper,
    "in": jt.test_in,
    "eq": lambda a, b: bool(a == b),
    "ne": lambda a, b: bool(a != b),
    "lt": lambda a, b: bool(a < b),
    "le": lambda a, b: bool(a <= b),
    "gt": lambda a, b: bool(a > b),
    "ge": lambda a, b: bool(a >= b),
    "sameas": jt.test_sameas,
}

GLOBALS: dict[str, Callable[..., Any]] = {
    "range": _safe_range,
    "dict": dict,
    "lookup": lookup,
}

# The names generated code refers to; `load_pool` puts them in each function's globals.
RUNTIME: dict[str, Any] = {
    "__builtins__": {},
    "type": type,  # only for the inlined `type(x) is dict` check of attribute access
    "dict": dict,
    "_name": lookup_name,
    "_attr": getattr_,
    "_item": getitem_,
    "_slice": getslice_,
    "_concat": concat,
    "_pow": power,
    "_F": FILTERS,
    "_T": TESTS,
    "_G": GLOBALS,
    "_U": ChainableUndefined,
    "_UN": ChainableUndefined(),
    "_str": render_value,
}


# --------------------------------------------------------------------------- the slow path


@functools.lru_cache(maxsize=1)
def fallback_environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(undefined=ChainableUndefined)
    env.globals["lookup"] = lookup
    env.globals["dict"] = dict
    env.filters["bool"] = FILTERS["bool"]  # our extension, so both paths agree
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
    return flat


def slow_expression(text: str) -> Evaluator:
    def evaluate(s: Scope) -> Any:
        return _fallback_compiled(text, "expression")(**_flatten(s))

    return evaluate


def slow_template(text: str) -> Evaluator:
    def evaluate(s: Scope) -> Any:
        return _fallback_compiled(text, "template").render(**_flatten(s))

    return evaluate


# --------------------------------------------------------------------------- loading the pool


def compile_entry(entry: Mapping[str, Any]) -> Evaluator:
    """Rebuild one pool entry (see `noetlc.compiler.expressions.ExpressionPool.to_data`)."""
    kind = entry["kind"]
    if kind == "code":
        namespace: dict[str, Any] = dict(RUNTIME)
        exec(compile(entry["code"], f"<expr {entry['source']!r}>", "exec"), namespace)
        fn: Evaluator = namespace["_e"]
        return fn
    if kind == "const":
        value = entry["value"]
        return lambda s: value
    if kind == "jinja_expression":
        return slow_expression(entry["jinja"])
    if kind == "jinja_template":
        return slow_template(entry["jinja"])
    raise ValueError(f"unknown expression entry kind {kind!r}")


def load_pool(entries: Iterable[Mapping[str, Any]]) -> list[Evaluator]:
    """Compile every entry once; the VM keeps the list and indexes it by pool index."""
    return [compile_entry(e) for e in entries]


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
