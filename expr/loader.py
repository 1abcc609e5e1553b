"""Loading a stored expression pool without running stored code.

A program's pool stores, per expression, its source text, its mode and the SHA-256 of what
the code generator made from it (the Python source of `def _e(s)`, or the jinja2 text of the
slow path); `const` entries store their value, which stays data. Loading compiles each source
again with this process's code generator (`compile_expression`, cached per process), checks
the hash, and only then turns the freshly generated code into a function. Nothing the stored
bytes contain is ever executed: an entry whose hash differs (the pool was edited, or the
program was compiled by a code generator that generates different code) is refused with
`PoolMismatch` (the loaders report it as NOE705).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from noetlc.expr.runtime import Evaluator, build_evaluator


class PoolMismatch(Exception):
    """A stored expression does not match what its source compiles to."""

    def __init__(self, index: int, source: str, reason: str) -> None:
        self.index = index
        self.source = source
        self.reason = reason
        super().__init__(f"expression e{index} {source!r}: {reason}")


def load_pool(entries: Iterable[Mapping[str, Any]]) -> list[Evaluator]:
    """Every stored entry (`ExpressionPool.to_data()`) as a callable, by pool index."""
    return [
        load_expression(
            i,
            str(e.get("kind")),
            e.get("source"),
            str(e.get("mode")),
            e.get("sha256"),
            e.get("value"),
            e.get("where"),
        )
        for i, e in enumerate(entries)
    ]


def load_expression(
    index: int,
    kind: str,
    source: Any,
    mode: str,
    sha256: str | None,
    value: Any = None,
    where: str | None = None,
) -> Evaluator:
    """The callable of one stored entry, rebuilt from its source (see the module doc)."""
    if kind == "const":
        return build_evaluator("const", str(source), value=value, where=where)
    if not isinstance(source, str) or mode not in ("guard", "template"):
        raise PoolMismatch(index, str(source), f"a {kind} entry needs a text source and a mode")
    # the parser and the code generator only for a program that has expressions to rebuild
    from noetlc.expr.compile import ExpressionUnsafe, compile_expression
    from noetlc.expr.parser import ExpressionSyntaxError

    try:
        compiled = compile_expression(source, mode="guard" if mode == "guard" else "template")
    except (ExpressionSyntaxError, ExpressionUnsafe) as exc:
        raise PoolMismatch(index, source, f"the source does not compile ({exc})") from None
    if compiled.kind != kind:
        raise PoolMismatch(
            index, source, f"stored as {kind}, the source compiles to {compiled.kind}"
        )
    if compiled.code_sha256 != sha256:
        raise PoolMismatch(index, source, "the stored code hash differs from the generated code")
    return build_evaluator(
        kind, source, code=compiled.code, jinja=compiled.jinja, where=where, guard=mode == "guard"
    )
