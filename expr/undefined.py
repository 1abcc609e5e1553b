"""jinja2, loaded the first time an expression needs it.

Compiled expressions only need jinja2 for its undefined values, its filters and tests, its
exceptions and the slow path. A run whose expressions read defined values and call no
filter never needs any of them, and importing jinja2 is a tenth of a cold `noetl-vm run`;
so the expression modules refer to jinja2's classes through stand-ins until `load()`:

* `Undefined` / `ChainableUndefined` start as `Pending`. Calling it loads jinja2 and returns
  jinja2's own object. Its one instance, `SHARED` (generated code's `_UN`: the value of a
  namespace the scope does not have, read on every namespace access), becomes a real
  `ChainableUndefined` in place when jinja2 loads (same object, `__class__` assigned), and
  any use of it before that (an operator, an attribute, a conversion) loads jinja2 first and
  is then answered by jinja2. `isinstance(x, Undefined)` is true for `SHARED` only, which is
  undefined either way.
* `SecurityError` starts as a class whose construction loads jinja2 and returns jinja2's
  exception, so `raise SecurityError(...)` raises jinja2's. Nothing can have raised jinja2's
  before it is loaded.

`track(namespace)` registers a module's globals (or any dict): `load()` rebinds the names it
holds to jinja2's classes, so the hot paths keep plain global lookups. The generated code
and its hashes do not change: only what the names are bound to does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, MutableMapping
from typing import Any

# jinja2's Undefined has exactly these slots; `Pending` has the same so its instance can
# become a ChainableUndefined in place (`__class__` assignment needs the same layout).
_SLOTS = ("_undefined_hint", "_undefined_obj", "_undefined_name", "_undefined_exception")

_LOCK = threading.Lock()
_TRACKED: list[tuple[MutableMapping[str, Any], dict[str, str]]] = []
_HOOKS: list[Callable[[], None]] = []
loaded = False


def load() -> None:
    """Import jinja2 (once) and bind every tracked name to jinja2's class."""
    global loaded, Undefined, ChainableUndefined, SecurityError, UndefinedError
    if loaded:
        return
    with _LOCK:
        if loaded:
            return
        import jinja2
        from jinja2 import exceptions

        SHARED.__class__ = jinja2.ChainableUndefined
        jinja2.Undefined.__init__(SHARED)
        real = {
            "Undefined": jinja2.Undefined,
            "ChainableUndefined": jinja2.ChainableUndefined,
            "SecurityError": exceptions.SecurityError,
            "UndefinedError": exceptions.UndefinedError,
        }
        Undefined = real["Undefined"]
        ChainableUndefined = real["ChainableUndefined"]
        SecurityError = real["SecurityError"]
        UndefinedError = real["UndefinedError"]
        for namespace, names in _TRACKED:
            for local, name in names.items():
                namespace[local] = real[name]
        loaded = True
    for hook in _HOOKS:
        hook()


def track(namespace: MutableMapping[str, Any], **names: str) -> None:
    """Bind `namespace[local]` to jinja2's `name` when it loads (now, if it has)."""
    with _LOCK:
        _TRACKED.append((namespace, names))
        if not loaded:
            return
    for local, name in names.items():
        namespace[local] = globals()[name]


def on_load(hook: Callable[[], None]) -> None:
    """Call `hook` once jinja2 is loaded (now, if it is)."""
    _HOOKS.append(hook)
    if loaded:
        hook()


def _pending_method(name: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        load()  # self is a ChainableUndefined now: jinja2 answers
        return getattr(self, name)(*args, **kwargs)

    method.__name__ = name
    return method


class Pending:
    """The stand-in for jinja2's `ChainableUndefined` until jinja2 is loaded."""

    __slots__ = _SLOTS

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        load()
        return ChainableUndefined(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        load()
        return getattr(self, name)


# Every special method jinja2's Undefined or ChainableUndefined defines, and those Python
# looks up on the type for a copy, a pickle or a format: each loads jinja2 and asks again.
for _name in [
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__div__",
    "__rdiv__",
    "__truediv__",
    "__rtruediv__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__pos__",
    "__neg__",
    "__call__",
    "__getitem__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__int__",
    "__float__",
    "__complex__",
    "__pow__",
    "__rpow__",
    "__eq__",
    "__ne__",
    "__hash__",
    "__str__",
    "__len__",
    "__iter__",
    "__aiter__",
    "__bool__",
    "__repr__",
    "__html__",
    "__format__",
    "__reduce__",
    "__reduce_ex__",
    "__copy__",
    "__deepcopy__",
    "__sizeof__",
    "__dir__",
]:
    setattr(Pending, _name, _pending_method(_name))
del _name

Pending.__name__ = Pending.__qualname__ = "ChainableUndefined"

SHARED: Any = object.__new__(Pending)


class _PendingError(Exception):
    """Stands in for jinja2's SecurityError: constructing it returns jinja2's."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        load()
        return SecurityError(*args, **kwargs)


class _PendingUndefinedError(Exception):
    """Stands in for jinja2's UndefinedError (raised by jinja2 only, after it loaded)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        load()
        return UndefinedError(*args, **kwargs)


Undefined: Any = Pending
ChainableUndefined: Any = Pending
SecurityError: Any = _PendingError
UndefinedError: Any = _PendingUndefinedError
