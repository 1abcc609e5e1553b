"""The value pool: data with templates inside (tool arguments, arc args, ctx/iter writes).

A value is stored as plain msgpack-able data in which every templated string is replaced by
`{"$e": <expression pool index>}`; `{"$lit": {...}}` escapes a mapping that itself has a
`$e` key. The VM evaluates a value by walking it once (`noetlc.vm.values.evaluate`).
"""

from __future__ import annotations

from typing import Any

from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.expr.compile import ExpressionPool

Path = tuple[str | int, ...]


class ValuePool:
    def __init__(self, expressions: ExpressionPool) -> None:
        self.expressions = expressions
        self.values: list[Any] = []
        self._index: dict[str, int] = {}

    def add(self, node: YNode, path: Path) -> int:
        """Encode the value at tree `path` (whose templates the expressions pass compiled)."""
        encoded = self.encode(node, path)
        key = repr(encoded)
        index = self._index.get(key)
        if index is None:
            index = len(self.values)
            self.values.append(encoded)
            self._index[key] = index
        return index

    def encode(self, node: YNode, path: Path) -> Any:
        if isinstance(node, YScalar):
            expr = self.expressions.by_path.get(path)
            if expr is not None:
                return {"$e": expr}
            return node.value
        if isinstance(node, YSeq):
            return [self.encode(item, (*path, i)) for i, item in enumerate(node.items)]
        assert isinstance(node, YMap)
        out = {str(k.value): self.encode(v, (*path, str(k.value))) for k, v in node.items}
        if "$e" in out or "$lit" in out:
            return {"$lit": out}
        return out

    def to_data(self) -> list[Any]:
        return list(self.values)
