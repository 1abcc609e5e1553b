"""Sandboxed access of compiled expressions: names, attributes, items and mapping methods.

What generated code calls to read the scope (`noetlc.expr.runtime.RUNTIME` binds these
functions), shared with the slow path (`noetlc.expr.sandbox`), which applies the same
refusals: no attribute or key starting with `_`, no method but a mapping's read-only ones;
references resolve through the scope's resolver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from noetlc.expr import limits, undefined
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

Resolver = Callable[[Any], Any]

Undefined: Any = undefined.Undefined
ChainableUndefined: Any = undefined.ChainableUndefined
_SecurityError: Any = undefined.SecurityError
undefined.track(
    globals(),
    Undefined="Undefined",
    ChainableUndefined="ChainableUndefined",
    _SecurityError="SecurityError",
)


# --------------------------------------------------------------------------- undefined values


def lookup_name(s: Scope, name: str) -> Any:
    """A bare name: the scope root, then args -> ctx -> iter -> workload (so `{{ city }}` finds a loop iterator)."""
    value = s.get(name, MISSING)
    if value is not MISSING:
        return value
    for ns in BARE_NAME_ORDER:
        space = s.get(ns)
        if type(space) is dict and name in space:
            return space[name]
    return ChainableUndefined(name=name)


MISSING = object()  # no such key (a key may hold None)


# --------------------------------------------------------------------------- sandboxed access


def _resolved(obj: dict[Any, Any], s: Scope | None) -> Any:
    """The value of a reference when the scope has a resolver; else `MISSING`."""
    if REF_KEY not in obj or s is None:
        return MISSING
    resolver = s.get(RESOLVER_KEY)
    return MISSING if resolver is None else resolver(obj[REF_KEY])


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
        value = obj.get(name, MISSING)
        if value is not MISSING:
            return value
        target = _resolved(obj, s)
        if target is not MISSING:
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
            if target is not MISSING:
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
        if target is not MISSING:
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
