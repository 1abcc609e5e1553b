"""Static facts about an expression, for the analyzer: event names tested, constant folding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from noetlc.expr.codegen import unquote
from noetlc.expr.tree import Tree

NOT_CONSTANT: Any = type("NotConstant", (), {"__repr__": lambda self: "NOT_CONSTANT"})()


@dataclass(frozen=True, slots=True)
class Facts:
    """Static facts about one expression."""

    event_names: tuple[str, ...]
    # Root names the expression itself expects may be missing: the subject of `| default`
    # or of `is defined` / `is undefined` (`spec.x | default(1)` makes `spec` optional).
    optional_names: tuple[str, ...] = ()


_DEFAULT_FILTERS = frozenset({"default", "d"})
_DEFINED_TESTS = frozenset({"defined", "undefined"})
_ACCESS = frozenset({"getattr", "getattr_int", "getitem", "getslice"})


def analyze(tree: Tree, names: set[str]) -> Facts:
    found: set[str] = set()
    optional: set[str] = set()
    for node in tree.iter_subtrees():
        if _tolerates_undefined(node):
            optional.update(_root_name(node.children[0]))
        elif "event" in names and node.data == "compare" and len(node.children) == 3:
            left, op, right = node.children
            op_text = "".join(str(t) for t in op.children)
            for a, b in ((left, right), (right, left)):
                if is_event_name(a):
                    found.update(_string_values(b, op_text))
    return Facts(tuple(sorted(found)), tuple(sorted(optional)))


def _tolerates_undefined(node: Tree) -> bool:
    if node.data == "filter":
        return str(node.children[1]) in _DEFAULT_FILTERS
    return node.data in ("test", "test_not") and _test_name(node) in _DEFINED_TESTS


def _test_name(node: Tree) -> str:
    name = node.children[1]
    return "".join(str(t) for t in name.children) if isinstance(name, Tree) else str(name)


def _root_name(node: Any) -> list[str]:
    """The name an access chain starts from (`a` of `a.b[0].c`), if it starts from one."""
    node = unwrap(node)
    while isinstance(node, Tree) and node.data in _ACCESS:
        node = unwrap(node.children[0])
    if isinstance(node, Tree) and node.data == "name":
        return [str(node.children[0])]
    return []


def unwrap(node: Any) -> Any:
    while isinstance(node, Tree) and len(node.children) == 1 and node.data in (
        "or_", "and_", "compare", "binop", "concat", "power"
    ):  # fmt: skip
        node = node.children[0]
    return node


def is_event_name(node: Any) -> bool:
    node = unwrap(node)
    if not (isinstance(node, Tree) and node.data == "getattr"):
        return False
    base, attr = node.children
    base = unwrap(base)
    return (
        str(attr) == "name"
        and isinstance(base, Tree)
        and base.data == "name"
        and str(base.children[0]) == "event"
    )


def _string_values(node: Any, op: str) -> list[str]:
    node = unwrap(node)
    if op == "==" and isinstance(node, Tree) and node.data == "strings":
        return ["".join(_unquote(t) for t in node.children)]
    if op == "in" and isinstance(node, Tree) and node.data in ("list_", "tuple_many"):
        out: list[str] = []
        for item in node.children:
            out.extend(_string_values(item, "=="))
        return out
    return []


def _unquote(token: Any) -> str:
    return unquote(str(token))


def fold(code: str) -> Any:
    """Evaluate an expression without free names once, at compile time."""
    from noetlc.expr.runtime import compile_entry

    try:
        value = compile_entry({"kind": "code", "code": code, "source": "<const>"})({})
    except Exception:
        return NOT_CONSTANT
    return value
