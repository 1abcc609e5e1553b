"""Guards with three truth values: what is known about a `when` without running anything.

`truth(entry, event)` is True or False when the guard's value is decided statically for a
boundary event: a folded constant, a mixed-text condition (a non-blank rendered string is always
true), or a boolean combination whose undecided parts are `event.name` comparisons. Anything
that depends on data is None ("either way"), which is how the soundness check treats it.

The corpus's legacy event names are aliases at arc level (docs/frontend.md): `call.done` and
`step.exit` mean the step's success event, `call.error` its failure.
"""

from __future__ import annotations

import functools
from typing import Any

from noetlc.expr.codegen import unquote
from noetlc.expr.compile import CompiledExpression
from noetlc.expr.facts import is_event_name, unwrap
from noetlc.expr.parser import ExprPiece, parse_expression, split_template
from noetlc.expr.tree import Token, Tree
from noetlc.ir.events import spellings
from noetlc.ir.net import Guard

Truth = bool | None


def truth(entry: CompiledExpression, event: str | None) -> Truth:
    if entry.is_constant:
        return bool(entry.constant)
    if entry.text_template:
        return True if _has_literal_text(entry.source) else None
    if entry.kind != "code" or not entry.mentions_event or event is None:
        return None
    tree = _parse(entry.normalized)
    if tree is None:
        return None
    value = _eval(tree, spellings(event))
    return value if isinstance(value, bool) else None


def guard_truth(
    guard: Guard,
    entries: list[CompiledExpression],
    event: str | None,
    earlier: Truth = True,
    repeats_earlier: bool = False,
) -> Truth:
    """The net's guard `g ∧ ¬n1 ∧ ¬n2 … ∧ ¬(earlier guards)` under one event.

    `earlier` is the truth of the negated earlier guards of the decision (`guard.earlier` of
    them, see `earlier_truths`), `repeats_earlier` whether `g` is one of them."""
    result: Truth = True
    if guard.expr is not None and (guard.expr in guard.negated or repeats_earlier):
        return False  # an earlier arc has the same condition
    if guard.expr is not None:
        result = truth(entries[guard.expr], event)
        if result is False:
            return False
    for n in guard.negated:
        value = truth(entries[n], event)
        if value is True:
            return False
        if value is None:
            result = None
    if earlier is False:
        return False
    if earlier is None:
        result = None
    return result


def earlier_truths(
    guards: tuple[int, ...], entries: list[CompiledExpression], event: str | None
) -> list[Truth]:
    """For each k, the truth of `¬g0 ∧ … ∧ ¬g(k-1)` over a decision's guards: one pass, so
    every transition of a router of n arcs looks its negations up in O(1)."""
    out: list[Truth] = [True]
    for g in guards:
        last = out[-1]
        value = truth(entries[g], event)
        if last is False or value is True:
            out.append(False)
        elif value is None:
            out.append(None)
        else:
            out.append(last)
    return out


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Tree | None:
    try:
        return parse_expression(text)
    except Exception:  # the expressions pass already reported it; unknown here
        return None


@functools.lru_cache(maxsize=4096)
def _has_literal_text(source: str) -> bool:
    try:
        pieces = split_template(source)
    except Exception:
        return False
    if pieces is None:
        return False
    return any(isinstance(p, str) and p.strip() for p in pieces if not isinstance(p, ExprPiece))


_UNKNOWN = object()


def _eval(node: Any, names: frozenset[str]) -> Any:
    node = unwrap(node)
    if not isinstance(node, Tree):
        return _UNKNOWN
    kind = node.data
    if kind == "true":
        return True
    if kind == "false":
        return False
    if kind in ("or_", "and_"):
        values = [_eval(c, names) for c in node.children]
        short = kind == "or_"  # `or` is decided by a True, `and` by a False
        if any(v is short for v in values):
            return short
        if all(isinstance(v, bool) for v in values):
            return not short
        return _UNKNOWN
    if kind == "not_":
        value = _eval(node.children[0], names)
        return (not value) if isinstance(value, bool) else _UNKNOWN
    if kind == "compare" and len(node.children) == 3:
        left, op, right = node.children
        op_text = " ".join(str(t) for t in op.children)
        for a, b in ((left, right), (right, left)):
            if is_event_name(a):
                return _compare(op_text, b, names, event_first=a is left)
        return _UNKNOWN
    return _UNKNOWN


def _compare(op: str, other: Any, names: frozenset[str], *, event_first: bool) -> Any:
    if op in ("==", "!="):
        literal = _string(other)
        if literal is None:
            return _UNKNOWN
        return (literal in names) == (op == "==")
    if op in ("in", "not in") and event_first:
        items = _string_list(other)
        if items is None:
            return _UNKNOWN
        return bool(names & set(items)) == (op == "in")
    return _UNKNOWN


def _string(node: Any) -> str | None:
    node = unwrap(node)
    if isinstance(node, Tree) and node.data == "strings":
        return "".join(unquote(str(t)) for t in node.children if isinstance(t, Token))
    return None


def _string_list(node: Any) -> list[str] | None:
    node = unwrap(node)
    if not (isinstance(node, Tree) and node.data in ("list_", "tuple_many", "tuple_one")):
        return None
    out: list[str] = []
    for item in node.children:
        value = _string(item)
        if value is None:
            return None
        out.append(value)
    return out
