"""The parse tree of an expression: `Tree` nodes and `Token` leaves.

The shapes are the ones Lark builds from `jinja_expr.lark` (rule or alias name in `data`, the
kept tokens and subtrees in `children`, `None` for an absent optional `[...]` part), so the
grammar file documents the tree and the differential tests compare the two parsers node for
node. `codegen`, `facts` and the analyzer's guard evaluation walk these trees.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Token(str):
    """A kept terminal: the text itself, its terminal name (`NAME`, `INT`, `ADDOP`, …) and
    its offset in the expression."""

    __slots__ = ("start_pos", "type")

    type: str
    start_pos: int

    def __new__(cls, type_: str, value: str, start_pos: int = 0) -> Token:
        token = super().__new__(cls, value)
        token.type = type_
        token.start_pos = start_pos
        return token

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {str(self)!r})"


class Tree:
    """A grammar rule's node: `data` is the rule (or alias) name, `children` its parts."""

    __slots__ = ("children", "data")

    def __init__(self, data: str, children: list[Any]) -> None:
        self.data = data
        self.children = children

    def iter_subtrees(self) -> Iterator[Tree]:
        """Every subtree, this one included (no recursion: trees may be deep)."""
        stack: list[Tree] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(c for c in node.children if isinstance(c, Tree))

    def __repr__(self) -> str:
        return f"Tree({self.data!r}, {self.children!r})"
