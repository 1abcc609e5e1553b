"""Located YAML values: the representation of playbook data inside the compiler.

The loader turns YAML into `YMap` / `YSeq` / `YScalar` trees where every node carries its
`Span`. Spans are excluded from equality, so two trees that differ only in where they came
from compare equal (that is how desugared legacy files are compared with canonical twins).
Desugaring builds new nodes with the span of the source they came from (`synth`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from noetlc.diagnostics.report import NO_SPAN, Span

Scalar = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class YScalar:
    """A located scalar."""

    value: Scalar
    span: Span = field(default=NO_SPAN, compare=False, repr=False)
    # True when the scalar was written quoted or as a block; unquoted scalars are "plain".
    quoted: bool = field(default=False, compare=False, repr=False)

    def to_python(self) -> Scalar:
        return self.value


@dataclass(frozen=True, slots=True)
class YSeq:
    """A located sequence."""

    items: tuple[YNode, ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    def to_python(self) -> list[Any]:
        return [item.to_python() for item in self.items]

    def __iter__(self) -> Iterator[YNode]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True, slots=True)
class YMap:
    """A located mapping (keys in the order written)."""

    items: tuple[tuple[YScalar, YNode], ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    def to_python(self) -> dict[str, Any]:
        return {str(k.value): v.to_python() for k, v in self.items}

    def get(self, key: str) -> YNode | None:
        for k, v in self.items:
            if k.value == key:
                return v
        return None

    def key_node(self, key: str) -> YScalar | None:
        for k, _ in self.items:
            if k.value == key:
                return k
        return None

    def keys(self) -> list[str]:
        return [str(k.value) for k, _ in self.items]

    def __contains__(self, key: object) -> bool:
        return any(k.value == key for k, _ in self.items)

    def __len__(self) -> int:
        return len(self.items)

    def without(self, *keys: str) -> YMap:
        return YMap(tuple((k, v) for k, v in self.items if k.value not in keys), self.span)

    def with_item(self, key: str, value: YNode, key_span: Span | None = None) -> YMap:
        """Replace `key` in place (keeping order) or append it."""
        new_key = YScalar(key, key_span or value.span)
        out: list[tuple[YScalar, YNode]] = []
        replaced = False
        for k, v in self.items:
            if k.value == key:
                out.append((k, value))
                replaced = True
            else:
                out.append((k, v))
        if not replaced:
            out.append((new_key, value))
        return YMap(tuple(out), self.span)


YNode: TypeAlias = YScalar | YSeq | YMap


def from_python(value: Any, span: Span = NO_SPAN) -> YNode:
    """Build nodes from plain data; every node gets `span` (the source it was derived from)."""
    if isinstance(value, YScalar | YSeq | YMap):
        return value
    if isinstance(value, dict):
        return YMap(
            tuple((YScalar(str(k), span), from_python(v, span)) for k, v in value.items()), span
        )
    if isinstance(value, list | tuple):
        return YSeq(tuple(from_python(v, span) for v in value), span)
    if value is None or isinstance(value, str | int | float | bool):
        return YScalar(value, span)
    return YScalar(str(value), span)


def walk_scalars(
    node: YNode, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], YScalar]]:
    """Every scalar value (not keys) with its path below `node`."""
    if isinstance(node, YScalar):
        yield path, node
    elif isinstance(node, YSeq):
        for i, item in enumerate(node.items):
            yield from walk_scalars(item, (*path, i))
    else:
        for k, v in node.items:
            yield from walk_scalars(v, (*path, str(k.value)))


def node_at(root: YNode, path: tuple[str | int, ...]) -> tuple[YNode | None, YScalar | None]:
    """The node at `path` and, when the last step is a mapping key, that key's node.

    Used to map pydantic error locations back to YAML positions; returns the deepest node
    that exists when the path runs past the tree.
    """
    node: YNode = root
    key: YScalar | None = None
    for step in path:
        if isinstance(node, YMap) and isinstance(step, str):
            key = node.key_node(step)
            child = node.get(step)
            if child is None:
                return node, None
            node = child
        elif isinstance(node, YSeq) and isinstance(step, int) and 0 <= step < len(node.items):
            key = None
            node = node.items[step]
        else:
            return node, None
    return node, key
