"""Batches sent to PostgreSQL as array literals (`{"a","b",NULL}`), one text parameter each.

The hot statements (a server's round, a worker's finish) pass a batch as parallel arrays, one
per column. asyncpg encodes a Python list for an array parameter element by element, asking
each element whether it is itself a sequence (abstract-base-class checks: the largest single
cost of a server's round in Python). Sent as the array's text form instead, the list is one
`str.join` and PostgreSQL's array input parses it in C; the query casts the parameter back
(`$2::text::text[]`). bench/test_bench_pg_queue.py measures both encodings.

The text form: each text element double-quoted with `\\` and `"` escaped by a backslash (so
commas, braces, quotes, newlines and the word NULL inside a value stay data); `NULL` for None;
numbers in Python's round-trip spelling.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# A batch is escaped and quoted as one string: the values joined by a separator holding a NUL
# character, which no value can hold (PostgreSQL's text cannot), None as a NUL marker of its
# own; three passes in C instead of a Python call per value (the server's round sends about
# ten text columns of ~500 values each).
_SEPARATOR = "\x00,"
_NULL_MARK = "\x00N"


def text_array(values: Iterable[str | None]) -> str:
    """A text[] (or uuid[]) literal."""
    items = original = list(values)
    if not items:
        return "{}"
    nulls = items.count(None)
    if nulls == len(items):
        return "{" + ",".join(["NULL"] * nulls) + "}"
    if nulls:
        items = [_NULL_MARK if v is None else v for v in items]
    joined = _SEPARATOR.join(items)  # type: ignore[arg-type]
    if joined.count("\x00") != len(items) - 1 + nulls:
        # a value holds a NUL itself (PostgreSQL refuses it): quoted one by one
        return "{" + ",".join(["NULL" if v is None else _quoted(v) for v in original]) + "}"
    if "\\" in joined:
        joined = joined.replace("\\", "\\\\")
    if '"' in joined:
        joined = joined.replace('"', '\\"')
    literal = '{"' + joined.replace(_SEPARATOR, '","') + '"}'
    return literal.replace('"' + _NULL_MARK + '"', "NULL") if nulls else literal


def number_array(values: Iterable[int | float | None]) -> str:
    """An integer[] or float8[] literal."""
    items = list(values)
    if None in items:
        return "{" + ",".join(["NULL" if v is None else repr(v) for v in items]) + "}"
    return "{" + ",".join(map(repr, items)) + "}"


# the envelope columns (vm/protocol.py ENVELOPE, the order of eventlog._row) that are numbers:
# ts, iteration, attempt, pc
ENVELOPE_NUMBERS = frozenset({1, 7, 8, 11})


def column_arrays(rows: list[tuple[Any, ...]], width: int, numbers: frozenset[int]) -> list[str]:
    """`rows` (tuples of `width` values) as one array literal per column; the columns at
    `numbers` hold numbers, the others text."""
    if not rows:
        return ["{}"] * width
    return [
        number_array(column) if i in numbers else text_array(column)
        for i, column in enumerate(zip(*rows, strict=True))
    ]


def envelope_arrays(rows: list[tuple[Any, ...]]) -> list[str]:
    """Event rows (eventlog._row: the 13 envelope columns) as 13 array literals."""
    return column_arrays(rows, 13, ENVELOPE_NUMBERS)
