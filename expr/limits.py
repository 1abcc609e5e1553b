"""Resource limits of one expression evaluation (docs/expressions.md, "Limits").

Playbook expressions are untrusted: a guard must not pin a process at 100% CPU or allocate a
gigabyte. Every operation whose cost is not bounded by the size of its inputs is checked
before it runs, and a value over a limit raises `ExpressionLimit` (reported as NOE311; the
guard or task that evaluated it fails, the process goes on):

* integers: at most `MAX_INT_BITS` bits (about 4,200 decimal digits), checked before `**`
  and `*` compute a result (so `(10 ** 9999) ** 9999` is refused at once);
* sizes: a string or sequence made by `*`, `%`-formatting, `join`, `replace`, `center`,
  `indent`, `format`, `batch`, `tojson(indent=...)`, `sum` or `range` has at most `MAX_SIZE`
  characters or items (a repeated sequence counts its nested items: `[[x] * 1000] * 1000`);
* work: the jinja2 slow path (`{% for %}` loops) runs under a budget of `MAX_STEPS` traced
  Python line events per evaluation; the compiled subset has no loops, and its filters are
  linear in their (bounded) input;
* nesting: at most `MAX_NESTING` levels of brackets in one expression (checked by the
  compiler, before any parser recurses), and a parse tree at most `MAX_DEPTH` levels high
  (operators, filters, tests, item accesses, calls, signs and `if`/`else` links count one,
  an attribute access `.x` and a bracket four: the code generator, `ast.unparse` and
  Python's compiler recurse on them).

The limits are counts, never clock time, so an evaluation fails or succeeds the same way on
replay.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

MAX_INT_BITS = 14_000  # about 4,214 decimal digits (Python prints at most 4,300)
MAX_SIZE = 1_000_000  # characters of a string, items of a sequence
MAX_STEPS = 2_000_000  # traced line events of one slow-path evaluation
MAX_NESTING = 32  # bracket levels in one expression
MAX_DEPTH = 128  # levels of the parse tree (see the module doc)
MAX_RANGE = 100_000  # elements of one `range(...)` (the same bound as jinja2's sandbox)


class ExpressionLimit(OverflowError):
    """An evaluation went over one of the limits of this module (NOE311)."""


def _refuse(what: str, limit: int, unit: str) -> ExpressionLimit:
    return ExpressionLimit(f"{what} would exceed the limit of {limit:,} {unit}")


def check_int(value: Any) -> Any:
    if type(value) is int and value.bit_length() > MAX_INT_BITS:
        raise _refuse("an integer", MAX_INT_BITS, "bits")
    return value


def deep_size(value: Any, budget: int = MAX_SIZE) -> int:
    """Characters and items of `value`, nested items included; stops counting past `budget`
    (so measuring a huge shared structure costs at most `budget` steps)."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, list | tuple):
            total += len(item)
            stack.extend(item)
        elif isinstance(item, dict):
            total += len(item)
            stack.extend(item.values())
        else:
            total += 1
        if total > budget:
            return total
    return total


def _check_size(size: int, what: str) -> None:
    if size > MAX_SIZE:
        raise _refuse(what, MAX_SIZE, "characters or items")


def power(base: Any, exponent: Any) -> Any:
    """`base ** exponent`, refused when the integer result would be too large."""
    if (
        type(exponent) is int
        and exponent > 1
        and isinstance(base, int)
        and abs(base) > 1
        and (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS
    ):
        raise _refuse(f"{_short(base)} ** {exponent}", MAX_INT_BITS, "bits")
    return base**exponent


def multiply(left: Any, right: Any) -> Any:
    """`left * right`: integer size and repeated strings/sequences are bounded."""
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
            raise _refuse("an integer product", MAX_INT_BITS, "bits")
        return left * right
    if isinstance(right, int) and isinstance(left, str | list | tuple):
        _check_repeat(left, right)
    elif isinstance(left, int) and isinstance(right, str | list | tuple):
        _check_repeat(right, left)
    return left * right


def _check_repeat(seq: Any, times: int) -> None:
    if times <= 1 or not seq:
        return
    unit = len(seq) if isinstance(seq, str) else deep_size(seq, MAX_SIZE // times + 1)
    _check_size(unit * times, "a repeated string or sequence")


# One printf conversion: flags, width, precision (`*` reads them from the arguments).
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?")


def modulo(left: Any, right: Any) -> Any:
    """`left % right`: printf-style formatting of a string is bounded in width and result."""
    if isinstance(left, str):
        check_format(left)
        result = left % right
        _check_size(len(result), "a formatted string")
        return result
    return left % right


def check_format(text: str) -> None:
    for match in _PRINTF.finditer(text):
        for number in match.groups():
            if number == "*":
                raise ExpressionLimit("a `*` width or precision in %-formatting is not allowed")
            if number and (len(number) > 7 or int(number) > MAX_SIZE):
                raise _refuse("a %-format width or precision", MAX_SIZE, "characters")


def bounded_range(*args: Any) -> range:
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise ExpressionLimit(f"range too big, maximum size is {MAX_RANGE:,}")
    return rng


def check_width(width: Any, what: str) -> None:
    if isinstance(width, int) and width > MAX_SIZE:
        raise _refuse(f"{what} width {width:,}", MAX_SIZE, "characters")


def check_join(items: Any, separator: Any) -> None:
    if isinstance(items, list | tuple) and isinstance(separator, str) and len(items) > 1:
        _check_size(len(separator) * (len(items) - 1), "a joined string")


def check_replace(value: Any, old: Any, new: Any, count: Any = None) -> None:
    text, old_text, new_text = str(value), str(old), str(new)
    grow = len(new_text) - len(old_text)
    if grow <= 0:
        return
    hits = text.count(old_text) if old_text else len(text) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    _check_size(len(text) + hits * grow, "a replaced string")


def check_sum(values: Any, start: Any) -> None:
    """`sum` of strings or sequences concatenates (quadratic copying): bound the total."""
    if isinstance(start, list | tuple | str) and isinstance(values, list | tuple):
        total = len(start)
        for item in values:
            total += len(item) if isinstance(item, list | tuple | str) else 1
            _check_size(total, "a summed sequence")


def check_batch(values: Any, linecount: Any) -> None:
    if isinstance(linecount, int) and linecount > MAX_SIZE:
        raise _refuse(f"a batch of {linecount:,}", MAX_SIZE, "items")
    if isinstance(values, list | tuple) and isinstance(linecount, int) and linecount > 0:
        _check_size(len(values) + linecount, "a batch")


def _short(value: Any) -> str:
    return str(value) if value.bit_length() < 64 else f"an integer of {value.bit_length()} bits"


def bounded_filters(
    filters: Mapping[str, Callable[..., Any]],
) -> dict[str, Callable[..., Any]]:
    """The padding/formatting filters of jinja2 with their size arguments checked first."""
    out: dict[str, Callable[..., Any]] = {}

    def wrap(name: str, check: Callable[..., None]) -> None:
        inner = filters.get(name)
        if inner is None:
            return

        def bounded(*args: Any, **kwargs: Any) -> Any:
            check(*args, **kwargs)
            return inner(*args, **kwargs)

        for attr in ("jinja_pass_arg",):  # keep jinja2's context-passing marker
            if hasattr(inner, attr):
                setattr(bounded, attr, getattr(inner, attr))
        out[name] = bounded

    def center(value: Any, width: Any = 80) -> None:
        check_width(width, "center")

    def indent(*args: Any, **kwargs: Any) -> None:
        width = kwargs.get("width", args[1] if len(args) > 1 else 4)
        if isinstance(width, str):
            _check_size(len(width), "an indent")
        else:
            check_width(width, "indent")

    def fmt(*args: Any, **kwargs: Any) -> None:
        if args and isinstance(args[0], str):
            check_format(args[0])

    def batch(value: Any, linecount: Any, fill_with: Any = None) -> None:
        check_batch(list(value) if isinstance(value, Iterable) else value, linecount)

    def slice_(value: Any, slices: Any, fill_with: Any = None) -> None:
        if isinstance(slices, int) and slices > MAX_SIZE:
            raise _refuse(f"{slices:,} slices", MAX_SIZE, "items")

    wrap("center", center)
    wrap("indent", indent)
    wrap("format", fmt)
    wrap("batch", batch)
    wrap("slice", slice_)
    return out


class StepBudget:
    """A trace function that counts line events and stops the evaluation past `limit`.

    Used around jinja2's slow path only (its templates have loops); restores whatever tracer
    was installed before (a debugger, coverage)."""

    __slots__ = ("limit", "steps")

    def __init__(self, limit: int = MAX_STEPS) -> None:
        self.limit = limit
        self.steps = 0

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        self.steps += 1
        if self.steps > self.limit:
            raise ExpressionLimit(
                f"the evaluation took more than {self.limit:,} steps (a loop that never ends?)"
            )
        return self

    def run(self, fn: Callable[[], Any]) -> Any:
        previous = sys.gettrace()
        sys.settrace(self)
        try:
            return fn()
        finally:
            sys.settrace(previous)
