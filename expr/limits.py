"""Resource limits of one expression evaluation (docs/expressions.md, "Limits").

Playbook expressions are untrusted: a guard must not pin a process at 100% CPU or allocate a
gigabyte. Every operation whose cost is not bounded by the size of its inputs is checked
before it runs, and a value over a limit raises `ExpressionLimit` (reported as NOE311; the
guard or task that evaluated it fails, the process goes on):

* integers: at most `MAX_INT_BITS` bits (about 4,200 decimal digits), checked before `**`
  and `*` compute a result (so `(10 ** 9999) ** 9999` is refused at once);
* sizes: a string or sequence made by `~`, `+`, `*`, `%`-formatting, `join`, `replace`,
  `center`, `indent`, `format`, `batch`, `tojson(indent=...)`, `sum` or `range`, the text of
  a printed structure and the text a slow-path template renders have at most `MAX_SIZE`
  characters or items (a repeated sequence counts its nested items: `[[x] * 1000] * 1000`);
* what one evaluation builds in all: at most `MAX_BUILT` units (a meter: generated code
  keeps its own, the slow path one per thread);
* work: the jinja2 slow path (`{% for %}` loops) runs under a budget of `MAX_STEPS` traced
  Python line events per evaluation, and `MAX_INPUT_STEPS` for all those one input event of
  a control VM causes; the compiled subset has no loops, and its filters are linear in their
  (bounded) input;
* printing: a function, class, method or object without a text of its own is refused
  (`check_opaque`: its text is a memory address);
* nesting: at most `MAX_NESTING` levels of brackets in one expression (checked by the
  compiler, before any parser recurses), and a parse tree at most `MAX_DEPTH` levels high
  (operators, filters, tests, item accesses, calls, signs and `if`/`else` links count one,
  an attribute access `.x` and a bracket four: the code generator, `ast.unparse` and
  Python's compiler recurse on them).

The limits are counts, never clock time, so an evaluation fails or succeeds the same way on
replay.
"""

from __future__ import annotations

import math
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from noetlc.expr import undefined

# jinja2's classes once it is loaded (`noetlc.expr.undefined`)
Undefined: Any = undefined.Undefined
SecurityError: Any = undefined.SecurityError
undefined.track(globals(), Undefined="Undefined", SecurityError="SecurityError")

MAX_INT_BITS = 14_000  # about 4,214 decimal digits (Python prints at most 4,300)
MAX_SIZE = 1_000_000  # characters of a string, items of a sequence
# What one evaluation may build in all, in units: a character is one, an item of a list,
# tuple or mapping four (its pointer and, often, a new object: `range(100000) | list` makes
# 100,000 ints). 8,000,000 units: at most about 64 MB.
MAX_BUILT = 8_000_000
ITEM = 4  # units of one item of a sequence or mapping
MAX_STEPS = 2_000_000  # traced line events of one slow-path evaluation
# ... and of all the slow-path evaluations one input event of a control VM causes (its guards,
# templates, case rules): so a step with sixty heavy guards cannot hold a server's thread
# sixty times as long (`begin_input`). Counted per input event, so a replay, which feeds the
# same events one by one, fails or succeeds the same way.
MAX_INPUT_STEPS = MAX_STEPS
MAX_NESTING = 32  # bracket levels in one expression
MAX_DEPTH = 128  # levels of the parse tree (see the module doc)
MAX_RANGE = 100_000  # elements of one `range(...)` (the same bound as jinja2's sandbox)


class ExpressionLimit(OverflowError):
    """An evaluation went over one of the limits of this module (NOE311)."""


# One evaluation's meter: one cell counting the characters and items it has built. Generated
# code makes its own (`_m = [0]`) and passes it to the helpers below; the slow path's is
# per thread (jinja2 calls our helpers without it; an evaluation never yields to another).
Meter = list[int]
_SLOW = threading.local()


def begin_slow() -> None:
    _SLOW.meter = [0]


def end_slow() -> None:
    _SLOW.meter = None


def begin_input() -> None:
    """The VM is about to decide one input event: its evaluations share `MAX_INPUT_STEPS`."""
    _SLOW.pool = MAX_INPUT_STEPS


def end_input() -> None:
    _SLOW.pool = None


def slow_meter() -> Meter | None:
    meter: Meter | None = getattr(_SLOW, "meter", None)
    return meter


def charge(meter: Meter | None, size: int) -> None:
    """Count `size` characters or items built; past `MAX_BUILT` the evaluation stops. A call
    outside an evaluation (no meter) has only the limits of each value."""
    if meter is None:
        return
    meter[0] += size
    if meter[0] > MAX_BUILT:
        raise ExpressionLimit(
            f"the evaluation built more than {MAX_BUILT:,} units in all (a character is one, "
            f"an item of a list or mapping {ITEM})"
        )


def built(value: Any, meter: Meter | None) -> Any:
    """Charge a value a filter or function just built: its length and, one level down, the
    length of the strings and containers in it (`[x] | map('upper')` builds a string)."""
    if isinstance(value, str):
        charge(meter, len(value))
    elif isinstance(value, list | tuple | dict):
        size = ITEM * len(value)
        for item in value.values() if isinstance(value, dict) else value:
            if isinstance(item, str):
                size += len(item)
            elif isinstance(item, list | tuple | dict):
                size += ITEM * len(item)
        charge(meter, size)
    return value


def _units(value: str | list[Any] | tuple[Any, ...]) -> int:
    return len(value) if isinstance(value, str) else ITEM * len(value)


def _refuse(what: str, limit: int, unit: str) -> ExpressionLimit:
    return ExpressionLimit(f"{what} would exceed the limit of {limit:,} {unit}")


def check_int(value: Any) -> Any:
    if type(value) is int and value.bit_length() > MAX_INT_BITS:
        raise _refuse("an integer", MAX_INT_BITS, "bits")
    return value


def deep_size(value: Any, budget: int = MAX_SIZE, printed: bool = False) -> int:
    """Characters and items of `value`, nested items included, a shared part counted as often
    as it appears (as str() and JSON print it); stops counting past `budget`. Each distinct
    container is walked once, so a structure that shares itself (`[a, a]` nested 40 times)
    costs its number of distinct parts, and measuring anything costs at most `budget` steps.
    `printed`: the value is about to be printed, and an object in it is refused (`opaque`)."""
    if isinstance(value, str):
        return len(value)
    if not isinstance(value, list | tuple | dict):
        if printed:
            check_opaque(value)
        return 1
    sizes: dict[int, int] = {}  # id -> size of the containers measured (all alive: in value)
    open_ids: set[int] = set()  # the containers being measured (a cycle counts as too big)
    stack: list[tuple[Any, Iterator[Any], int]] = [(value, _items(value), len(value))]
    open_ids.add(id(value))
    while stack:
        node, items, total = stack.pop()
        for item in items:
            if isinstance(item, str):
                total += len(item)
            elif isinstance(item, list | tuple | dict):
                known = sizes.get(id(item))
                if known is None:
                    if id(item) in open_ids:
                        return budget + 1
                    stack.append((node, items, total))
                    stack.append((item, _items(item), len(item)))
                    open_ids.add(id(item))
                    break
                total += known
            else:
                if printed and type(item) not in _SCALARS:
                    check_opaque(item)
                total += 1
            if total > budget:
                return total
        else:
            open_ids.discard(id(node))
            sizes[id(node)] = total
            if not stack:
                return total
            parent, parent_items, parent_total = stack.pop()
            parent_total += total
            if parent_total > budget:
                return parent_total
            stack.append((parent, parent_items, parent_total))
    return budget + 1  # not reached


def _items(value: Any) -> Iterator[Any]:
    return iter(value.values()) if isinstance(value, dict) else iter(value)


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
        and exponent * math.log2(abs(base)) > MAX_INT_BITS
    ):
        # log2, not bit_length() - 1: 3 ** 14000 has 22,190 bits, not 14,000
        raise _refuse(f"{_short(base)} ** {exponent}", MAX_INT_BITS, "bits")
    return base**exponent


def multiply(left: Any, right: Any, meter: Meter | None = None) -> Any:
    """`left * right`: integer size and repeated strings/sequences are bounded."""
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
            raise _refuse("an integer product", MAX_INT_BITS, "bits")
        return left * right
    if isinstance(right, int) and isinstance(left, str | list | tuple):
        _check_repeat(left, right)
        charge(meter, _units(left) * max(right, 0))
    elif isinstance(left, int) and isinstance(right, str | list | tuple):
        _check_repeat(right, left)
        charge(meter, _units(right) * max(left, 0))
    return left * right


def add(left: Any, right: Any, meter: Meter | None = None) -> Any:
    """`left + right`: concatenated strings and sequences are bounded; integers too."""
    if type(left) is int and type(right) is int:
        return check_int(left + right)
    if isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
        size = len(left) + len(right)
        _check_size(size, "a concatenated string or sequence")
        charge(meter, size if isinstance(left, str) else ITEM * size)
    return left + right


def concat(meter: Meter | None, *values: Any) -> str:
    """`a ~ b ~ ...` and mixed text: str() of each value (undefined is ''), the total checked
    before the text is joined."""
    parts = []
    size = 0
    for value in values:  # a loop, not a comprehension: this is on the hot path
        if type(value) is not str:
            value = text(value)
        size += len(value)
        parts.append(value)
    _check_size(size, "a concatenated string")
    charge(meter, size)
    return "".join(parts)


def sized(meter: Meter | None, text: str) -> str:
    """The text generated code joined from parts already bounded (`codegen.joined`): its
    size checked and charged."""
    size = len(text)
    if size > MAX_SIZE:
        raise _refuse("a concatenated string", MAX_SIZE, "characters or items")
    if meter is not None:
        meter[0] += size
        if meter[0] > MAX_BUILT:
            charge(meter, 0)  # raises, with the message
    return text


def slow_concat(*values: Any) -> str:
    return concat(slow_meter(), *values)


def text(value: Any) -> str:
    """str() of a value, refused first when it would be huge: a structure that shares itself
    (`[a, a]` nested 40 times, made in a slow-path loop) prints 2 ** 40 items."""
    if type(value) in _SCALARS:
        return str(value)
    check_printable(value)
    return str(value)


# The types whose text is no longer than themselves (an int of 14,000 bits prints 4,215 digits)
SCALARS = _SCALARS = frozenset({str, int, float, bool, type(None)})
_CONTAINERS = (list, tuple, dict)


def check_printable(value: Any) -> Any:
    """`value`, refused before it is printed (or stored as the value of an evaluation) when
    its text would be huge or would show an object (`check_opaque`)."""
    if isinstance(value, _CONTAINERS):
        size = deep_size(value, MAX_SIZE, printed=True)
        _check_size(size, "the text of a structure")
    elif type(value) not in _SCALARS:
        check_opaque(value)
    return value


def check_opaque(value: Any) -> None:
    """Refuse to print a function, a class, a method or an object without a text of its own:
    its text is a memory address (`<function lookup at 0x7f…>`), which differs from run to
    run (a replay would diverge) and tells about the process. Refused like calling it."""
    if isinstance(value, Undefined | str | int | float):  # a Markup is a str
        return
    kind = type(value)
    default_text = kind.__str__ is object.__str__ and kind.__repr__ is object.__repr__  # type: ignore[comparison-overlap]
    if callable(value) or default_text:
        raise SecurityError(f"printing a {kind.__name__} object is not allowed (it is not data)")


def bounded_join(parts: Iterable[Any]) -> str:
    """The text a slow-path template renders (and `{% set %}` blocks, macros): counted while
    it is produced, so a `{% for %}` that renders gigabytes stops at `MAX_SIZE`."""
    out: list[str] = []
    size = 0
    for part in parts:
        size += len(part)
        _check_size(size, "the rendered text")
        out.append(part)
    charge(slow_meter(), size)
    return "".join(out)


def _check_repeat(seq: Any, times: int) -> None:
    if times <= 1 or not seq:
        return
    unit = len(seq) if isinstance(seq, str) else deep_size(seq, MAX_SIZE // times + 1)
    _check_size(unit * times, "a repeated string or sequence")


# One printf conversion: flags, width, precision (`*` reads them from the arguments).
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?")


def modulo(left: Any, right: Any, meter: Meter | None = None) -> Any:
    """`left % right`: printf-style formatting of a string is bounded in width and result."""
    if isinstance(left, str):
        check_format(left)
        for arg in right if isinstance(right, tuple) else (right,):
            check_printable(arg)
        result = left % right
        _check_size(len(result), "a formatted string")
        charge(meter, len(result))
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

    def pprint(value: Any, *args: Any, **kwargs: Any) -> None:
        check_printable(value)

    wrap("pprint", pprint)
    wrap("center", center)
    wrap("indent", indent)
    wrap("format", fmt)
    wrap("batch", batch)
    wrap("slice", slice_)
    return out


def charged_filters(
    filters: Mapping[str, Callable[..., Any]], skip: Iterable[str] = ()
) -> dict[str, Callable[..., Any]]:
    """jinja2's filters (the slow path's) with what they build charged to the evaluation's
    budget; `skip` are filters already charged (the compiled path's own)."""
    out: dict[str, Callable[..., Any]] = {}
    skipped = frozenset(skip)
    for name, inner in filters.items():
        if name in skipped:
            continue
        out[name] = _charging(inner)
    return out


def _charging(inner: Callable[..., Any]) -> Callable[..., Any]:
    def charged(*args: Any, **kwargs: Any) -> Any:
        return built(inner(*args, **kwargs), slow_meter())

    for attr in ("jinja_pass_arg",):  # keep jinja2's context-passing marker
        if hasattr(inner, attr):
            setattr(charged, attr, getattr(inner, attr))
    return charged


class StepBudget:
    """A trace function that counts line events and stops the evaluation past `limit`.

    Used around jinja2's slow path only (its templates have loops); restores whatever tracer
    was installed before (a debugger, coverage)."""

    __slots__ = ("limit", "message", "steps")

    def __init__(self, limit: int = MAX_STEPS) -> None:
        pool = getattr(_SLOW, "pool", None)
        self.steps = 0
        if pool is not None and pool < limit:  # what this input event's evaluations left
            self.limit = max(pool, 0)
            self.message = (
                f"the expressions one event of the execution caused took more than "
                f"{MAX_INPUT_STEPS:,} steps in all"
            )
        else:
            self.limit = limit
            self.message = (
                f"the evaluation took more than {limit:,} steps (a loop that never ends?)"
            )

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        self.steps += 1
        if self.steps > self.limit:
            raise ExpressionLimit(self.message)
        return self

    def run(self, fn: Callable[[], Any]) -> Any:
        previous = sys.gettrace()
        sys.settrace(self)
        try:
            return fn()
        finally:
            sys.settrace(previous)
            pool = getattr(_SLOW, "pool", None)
            if pool is not None:
                _SLOW.pool = pool - self.steps
