"""Parse the text form of a net (`ir/net.py: dump`) back into a `Net`.

So passes and the verifier can be tested from IR text, without YAML:

    net = parse(text)
    problems = verify(net)

A test helper: lark, which it needs, is in the `dev` extra only (no command imports this).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, cast

from lark import Lark, Token, Tree
from lark.exceptions import LarkError

from noetlc.ir.net import (
    Decision,
    Guard,
    Join,
    JoinKind,
    Net,
    Place,
    PlaceKind,
    Transition,
    TransitionKind,
)


class NetSyntaxError(Exception):
    pass


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    grammar = Path(__file__).with_name("net_text.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="earley", lexer="dynamic")


def parse(text: str) -> Net:
    try:
        tree = _parser().parse(text)
    except LarkError as exc:
        raise NetSyntaxError(str(exc).splitlines()[0]) from None
    header = cast(Tree[Token], tree.children[0])
    name, entry = (str(t) for t in header.children)
    places: list[Place] = []
    transitions: list[Transition] = []
    joins: list[Join] = []
    decisions: list[Decision] = []
    for item in tree.children[1:]:
        assert isinstance(item, Tree)
        if item.data == "place":
            places.append(_place(item.children))
        elif item.data == "trans":
            transitions.append(_trans(item.children))
        elif item.data == "decision":
            decisions.append(_decision(item.children))
        else:
            joins.append(_join(item.children))
    return Net(name, entry, tuple(places), tuple(transitions), tuple(joins), tuple(decisions))


def _decision(children: list[Any]) -> Decision:
    place, guards = children
    return Decision(str(place), tuple(int(str(t)[1:]) for t in guards.children if t is not None))


def _place(children: list[Any]) -> Place:
    pid, kind, *rest = children
    step = next((str(t) for t in rest if t.type == "NAME"), None)
    capacity = next((int(t) for t in rest if t.type == "INT"), None)
    return Place(str(pid), cast(PlaceKind, str(kind)), step, capacity)


def _ids(node: Any) -> tuple[str, ...]:
    return tuple(str(t) for t in node.children if t is not None)


def _trans(children: list[Any]) -> Transition:
    tid, kind, consume, produce, *rest = children
    events: tuple[str, ...] = ()
    guard = Guard()
    target = None
    args = writes = None
    for part in rest:
        if not isinstance(part, Tree):
            continue
        if part.data == "on":
            events = tuple(str(t) for t in part.children)
        elif part.data == "guard":
            expr = None
            negated: list[int] = []
            earlier = 0
            for lit in part.children:
                if lit.data == "earlier_lit":
                    earlier = int(str(lit.children[0]))
                    continue
                index = int(str(lit.children[0])[1:])
                if lit.data == "neg_lit":
                    negated.append(index)
                else:
                    expr = index
            guard = Guard(expr, tuple(negated), earlier)
        elif part.data == "target":
            target = str(part.children[0])
        elif part.data == "args":
            args = int(str(part.children[0])[1:])
        elif part.data == "writes":
            writes = int(str(part.children[0])[1:])
    return Transition(
        str(tid), cast(TransitionKind, str(kind)), _step_of(str(tid)), _ids(consume), _ids(produce),
        guard=guard, events=events, args=args, writes=writes, target=target,
    )  # fmt: skip


def _step_of(tid: str) -> str | None:
    head = tid.split("->")[0].split(".")[0]
    return head or None


def _join(children: list[Any]) -> Join:
    step, kind, *rest = children
    fork = str(rest[0]) if len(rest) == 2 else None
    branches = rest[-1]
    return Join(
        str(step),
        cast(JoinKind, str(kind)),
        fork,
        tuple(str(t) for t in branches.children if t is not None),
    )
