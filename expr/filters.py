"""The jinja2-backed functions of the filter and test tables (`noetlc.expr.library`).

Imported the first time generated code or the slow path reads a filter or a test: it
imports jinja2 (`noetlc.expr.undefined.load`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from noetlc.expr import undefined

undefined.load()

import jinja2  # noqa: E402  (after load(): the stand-ins are rebound first)
from jinja2 import ChainableUndefined  # noqa: E402
from jinja2 import filters as jf  # noqa: E402
from jinja2 import tests as jt  # noqa: E402
from jinja2.exceptions import SecurityError  # noqa: E402
from jinja2.nodes import EvalContext  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

from noetlc.expr import limits  # noqa: E402

_ENV = ImmutableSandboxedEnvironment(undefined=ChainableUndefined)
_EVAL_CTX = EvalContext(_ENV)


def _f_tojson(value: Any, indent: Any = None) -> str:
    # Jinja's tojson HTML-escapes <, >, &, '; playbooks render into SQL/JSON, not HTML, so we
    # keep Jinja's exact output for compatibility of existing playbooks.
    limits.check_width(indent, "tojson indent")
    limits.check_printable(value)
    return str(jf.do_tojson(_EVAL_CTX, value, indent))


def _f_replace(v: Any, old: Any, new: Any, count: Any = None) -> Any:
    limits.check_replace(v, old, new, count)
    return jf.do_replace(_EVAL_CTX, v, old, new, count)


def _f_join(v: Any, d: Any = "", attribute: Any = None) -> str:
    if not isinstance(v, list | tuple):
        v = list(v)
    limits.check_join(v, d)
    if attribute is None:
        limits.check_printable(v)
    return str(jf.sync_do_join(_EVAL_CTX, v, d, attribute))


def _f_sum(v: Any, attribute: Any = None, start: Any = 0) -> Any:
    limits.check_sum(v, start)
    return jf.sync_do_sum(_ENV, v, attribute, start)


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


_STRING = jf.FILTERS["string"]  # jinja2's soft_str (a Markup stays one)


def _f_list(value: Any) -> list[Any]:
    return list(value)


def _charging(fn: Callable[..., Any]) -> Callable[..., Any]:
    def charged(meter: limits.Meter, *args: Any, **kwargs: Any) -> Any:
        return limits.built(fn(*args, **kwargs), meter)

    return charged


# The tables `fill` filled (`noetlc.expr.library`'s: `map` and `select` look names up there).
FILTERS: dict[str, Callable[..., Any]] = {}
TESTS: dict[str, Callable[..., bool]] = {}


def fill(
    filters: dict[str, Callable[..., Any]],
    tests: dict[str, Callable[..., bool]],
    charged: dict[str, Callable[..., Any]],
    building: frozenset[str],
) -> None:
    """Put the functions into the tables (the same dict objects generated code holds)."""
    global FILTERS, TESTS
    FILTERS, TESTS = filters, tests
    table = _filters()
    filters.update(table)
    tests.update(_tests())
    charged.update({name: _charging(table[name]) for name in building})


def _filters() -> dict[str, Callable[..., Any]]:
    return {
        "default": jf.do_default,
        "d": jf.do_default,
        "int": jf.do_int,
        "float": jf.do_float,
        "string": lambda v: v if type(v) is str else _STRING(limits.check_printable(v)),
        "bool": lambda v: bool(v),
        "length": len,
        "count": len,
        "lower": jf.do_lower,
        "upper": jf.do_upper,
        "trim": jf.do_trim,
        "capitalize": jf.do_capitalize,
        "title": jf.do_title,
        "replace": _f_replace,
        "join": _f_join,
        "list": _f_list,
        "first": lambda v: jf.sync_do_first(_ENV, v),
        "last": lambda v: jf.do_last(_ENV, v),
        "min": lambda v, case_sensitive=False, attribute=None: jf.do_min(
            _ENV, v, case_sensitive, attribute
        ),
        "max": lambda v, case_sensitive=False, attribute=None: jf.do_max(
            _ENV, v, case_sensitive, attribute
        ),
        "sum": _f_sum,
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


def _tests() -> dict[str, Callable[..., bool]]:
    return {
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
