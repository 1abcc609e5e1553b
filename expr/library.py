"""The whitelisted filters, tests and globals of playbook expressions (docs/expressions.md).

jinja2's own filter and test functions are reused wherever they exist, so compiled code and
jinja2 agree on every value. Both the generated code (`_F`, `_T`, `_G` in
`noetlc.expr.runtime.RUNTIME`) and the compiler's code generator (which refuses names
outside `FILTER_NAMES` / `TEST_NAMES` / `GLOBALS`) read them from here. The filter and test
tables are filled from `noetlc.expr.filters` (which imports jinja2) the first time generated
code reads one of them (`noetlc.expr.undefined`: a run that calls no filter loads no jinja2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from noetlc.expr import limits, undefined
from noetlc.expr.limits import MAX_RANGE

__all__ = [
    "BUILDING_FILTERS",
    "CHARGED_FILTERS",
    "FILTERS",
    "FILTER_NAMES",
    "GLOBALS",
    "MAX_RANGE",
    "NONDETERMINISTIC_CALLS",
    "NONDETERMINISTIC_FILTERS",
    "TESTS",
    "TEST_NAMES",
    "fill",
    "lookup",
]

SecurityError: Any = undefined.SecurityError
undefined.track(globals(), SecurityError="SecurityError")


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


# The names of the whitelisted filters and tests (`noetlc.expr.filters` has their functions;
# a test checks the two agree).
FILTER_NAMES = frozenset(
    {
        "default",
        "d",
        "int",
        "float",
        "string",
        "bool",
        "length",
        "count",
        "lower",
        "upper",
        "trim",
        "capitalize",
        "title",
        "replace",
        "join",
        "list",
        "first",
        "last",
        "min",
        "max",
        "sum",
        "sort",
        "unique",
        "round",
        "abs",
        "tojson",
        "map",
        "select",
        "reject",
        "selectattr",
        "rejectattr",
        "reverse",
        "items",
        "dictsort",
    }
)
TEST_NAMES = frozenset(
    {
        "defined",
        "undefined",
        "none",
        "number",
        "string",
        "mapping",
        "sequence",
        "iterable",
        "boolean",
        "integer",
        "float",
        "true",
        "false",
        "odd",
        "even",
        "divisibleby",
        "lower",
        "upper",
        "in",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "sameas",
    }
)


class _Table(dict[str, Any]):
    """A table of jinja2-backed functions, filled on the first read of a missing name."""

    __slots__ = ()

    def __missing__(self, name: str) -> Any:
        if self:  # filled already: the name is not in it
            raise KeyError(name)
        fill()
        return dict.__getitem__(self, name)


FILTERS: dict[str, Callable[..., Any]] = _Table()
TESTS: dict[str, Callable[..., bool]] = _Table()
# What generated code calls for a building filter: `_FB[name](_m, value, *args)`.
CHARGED_FILTERS: dict[str, Callable[..., Any]] = _Table()


def fill() -> None:
    """The filter and test tables from `noetlc.expr.filters` (imports jinja2)."""
    if FILTERS and TESTS and CHARGED_FILTERS:
        return
    from noetlc.expr import filters  # jinja2

    filters.fill(FILTERS, TESTS, CHARGED_FILTERS, BUILDING_FILTERS)


# The filters that return a new string or sequence as long as their input (or longer): one
# evaluation's budget (`limits.MAX_BUILT`) counts what they build (generated code charges
# their results, the slow path wraps them). The others return a number, a truth value or one
# of their input's items.
BUILDING_FILTERS = FILTER_NAMES - {
    "default",
    "d",
    "int",
    "float",
    "bool",
    "length",
    "count",
    "first",
    "last",
    "min",
    "max",
    "round",
    "abs",
}


# Non-deterministic filters and functions: a replay of the log would take another branch.
# Refused at compile time (`noetlc.expr.parser.check_jinja_syntax`), not recorded: a value a
# playbook needs at random or from the clock comes from the workload or a python task, whose
# result the log keeps (docs/expressions.md, "Determinism").
NONDETERMINISTIC_FILTERS = frozenset({"random", "shuffle"})
NONDETERMINISTIC_CALLS = frozenset(
    {"now", "utcnow", "today", "time", "uuid", "uuid4", "random", "randint", "shuffle", "lipsum"}
)

GLOBALS: dict[str, Callable[..., Any]] = {
    "range": limits.bounded_range,
    "dict": dict,
    "lookup": lookup,
}
