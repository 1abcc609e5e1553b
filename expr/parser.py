"""Parsing: the lark grammar of the Jinja expression subset, and template splitting.

jinja2 stays the judge of what is valid Jinja: an expression our grammar rejects is checked
with jinja2's parser, and if Jinja accepts it the expression goes to the slow path instead of
being reported. Mixed templates are split with jinja2's own lexer, so `}}` inside a string
literal, whitespace control (`{{- x -}}`) and escapes behave exactly as in Jinja.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from noetlc.expr.codegen import Unsupported
from noetlc.expr.jinja_expr_parser import Lark, Lark_StandAlone, LarkError, Tree

# The grammar; `jinja_expr_parser.py` is its parser, generated from it once by
# `scripts/gen_expr_parser.py` (a test fails when the committed parser is stale).
GRAMMAR = Path(__file__).with_name("jinja_expr.lark")


class ExpressionSyntaxError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class ExprPiece:
    text: str


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    """The LALR parser of the grammar, from the tables generated at build time (building them
    from the grammar took about 0.3 s per process)."""
    build: Callable[[], Lark] = Lark_StandAlone  # generated code is untyped
    return build()


_JINJA = jinja2.Environment()


def check_jinja_syntax(template: str) -> None:
    """Raise ExpressionSyntaxError with Jinja's message if jinja2 rejects the template."""
    try:
        _JINJA.parse(template)
    except jinja2.TemplateSyntaxError as exc:
        raise ExpressionSyntaxError(exc.message or "invalid template") from None


def parse_expression(text: str) -> Tree[Any]:
    try:
        tree: Tree[Any] = _parser().parse(text)
    except LarkError:
        check_jinja_syntax("{{ " + text + " }}")
        raise Unsupported("syntax outside the compiled subset") from None
    return tree


def split_template(source: str) -> list[str | ExprPiece] | None:
    """Literal text and `{{ expr }}` pieces; None when the template has `{% %}` or comments."""
    try:
        tokens = list(_JINJA.lex(source))
    except jinja2.TemplateSyntaxError as exc:
        raise ExpressionSyntaxError(exc.message or "invalid template") from None
    pieces: list[str | ExprPiece] = []
    current: list[str] | None = None
    for _, kind, value in tokens:
        if kind in ("block_begin", "comment_begin", "linestatement_begin", "raw_begin"):
            return None
        if kind == "variable_begin":
            current = []
        elif kind == "variable_end":
            if current is None:
                raise ExpressionSyntaxError("unexpected '}}'")
            text = "".join(current)
            if not text.strip():
                raise ExpressionSyntaxError("empty expression in '{{ }}'")
            pieces.append(ExprPiece(text))
            current = None
        elif current is not None:
            current.append(value)
        elif kind == "data":
            if pieces and isinstance(pieces[-1], str):
                pieces[-1] += value
            else:
                pieces.append(value)
    if current is not None:
        raise ExpressionSyntaxError("unclosed '{{'")
    return pieces
