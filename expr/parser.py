"""Parsing: the grammar of the Jinja expression subset, and template splitting.

`jinja_expr.lark` is the grammar; `grammar_parser.py` is its hand-written parser (proved
against Lark by the tests), so no process builds parser tables or imports `lark`.

jinja2 stays the judge of what is valid Jinja: an expression our grammar rejects is checked
with jinja2's parser, and if Jinja accepts it the expression goes to the slow path instead of
being reported. Mixed templates are split with jinja2's own lexer, so `}}` inside a string
literal, whitespace control (`{{- x -}}`) and escapes behave exactly as in Jinja.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from noetlc.expr import grammar_parser, undefined
from noetlc.expr.codegen import Unsafe, Unsupported
from noetlc.expr.library import NONDETERMINISTIC_CALLS, NONDETERMINISTIC_FILTERS
from noetlc.expr.tree import Tree

# The grammar, the language's reference (`grammar_parser.parse` implements it).
GRAMMAR = Path(__file__).with_name("jinja_expr.lark")


class ExpressionSyntaxError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class ExprPiece:
    """One piece of a template: literal text or an expression."""

    text: str


@cache
def _jinja() -> Any:
    """jinja2's default environment (its parser and lexer), made on first use."""
    undefined.load()
    import jinja2

    return jinja2.Environment()


NONDETERMINISTIC_HINT = (
    "pass the value in through the workload, or compute it in a python task: its result is "
    "recorded in the log and a replay reads it back"
)


class Nondeterministic(Unsafe):
    """A filter or function whose value changes from run to run."""

    hint = NONDETERMINISTIC_HINT


def check_jinja_syntax(template: str) -> None:
    """Raise ExpressionSyntaxError with Jinja's message if jinja2 rejects the template, and
    `Nondeterministic` if it uses a filter or function of `NONDETERMINISTIC_*`."""
    env = _jinja()
    import jinja2
    from jinja2 import nodes

    try:
        tree = env.parse(template)
    except jinja2.TemplateSyntaxError as exc:
        raise ExpressionSyntaxError(exc.message or "invalid template") from None
    for node in tree.find_all((nodes.Filter, nodes.Call)):
        if isinstance(node, nodes.Filter):
            name, what = node.name, "the filter"
            if name not in NONDETERMINISTIC_FILTERS:
                continue
        else:
            callee = getattr(node, "node", None)  # a Call's callee
            if not (isinstance(callee, nodes.Name) and callee.name in NONDETERMINISTIC_CALLS):
                continue
            name, what = f"{callee.name}()", "the function"
        raise Nondeterministic(
            f"{what} `{name}` is not deterministic: replaying the execution's log could "
            "take another branch"
        )


def parse_expression(text: str) -> Tree:
    """The tree of one expression. Text outside the grammar is reported with jinja2's message
    when jinja2 rejects it too (ExpressionSyntaxError), else it is valid Jinja outside the
    compiled subset (Unsupported: the slow path); too deep is a syntax error."""
    try:
        return grammar_parser.parse(text)
    except grammar_parser.TooDeep as exc:
        raise ExpressionSyntaxError(str(exc)) from None
    except grammar_parser.ParseError:
        check_jinja_syntax("{{ " + text + " }}")
        raise Unsupported("syntax outside the compiled subset") from None


def split_template(source: str) -> list[str | ExprPiece] | None:
    """Literal text and `{{ expr }}` pieces; None when the template has `{% %}` or comments."""
    pieces = _split_plain(source)
    return _split_jinja(source) if pieces is None else pieces


def _split_jinja(source: str) -> list[str | ExprPiece] | None:
    """`split_template` by jinja2's lexer."""
    import jinja2

    try:
        tokens = list(_jinja().lex(source))
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


# What jinja2's lexer reads between `{{` and `}}` exactly as the text up to the next `}}`:
# names, numbers, blanks and operators; no quote (a `}}` in a string literal), no brace (a
# dict literal's `}}`), no `-`/`+` next to the braces (whitespace control), nothing jinja2's
# lexer refuses (its message would name a position in the whole template).
_PLAIN_EXPR = re.compile(r"[A-Za-z0-9_ .|()\[\],+\-*/%<>=~:\t\n]+")


def _balanced(text: str) -> bool:
    """Brackets closed in order: jinja2's lexer ends the expression at the same `}}`."""
    if "(" not in text and "[" not in text and ")" not in text and "]" not in text:
        return True
    stack: list[str] = []
    for ch in text:
        if ch in "([":
            stack.append(")" if ch == "(" else "]")
        elif ch in ")]" and (not stack or stack.pop() != ch):
            return False
    return not stack


def _split_plain(source: str) -> list[str | ExprPiece] | None:
    """`split_template` without jinja2 for the common templates (`"{{ workload.name }}"`,
    `"s3://{{ bucket }}/{{ key }}"`) — the pieces jinja2's lexer gives, or None (ask it):
    no `{%`, `{#`, carriage return or final newline (which jinja2 treats specially)."""
    if "{%" in source or "{#" in source or "\r" in source or source.endswith("\n"):
        return None
    pieces: list[str | ExprPiece] = []
    pos = 0
    while True:
        start = source.find("{{", pos)
        if start < 0:
            break
        end = source.find("}}", start + 2)
        if end < 0:
            return None
        text = source[start + 2 : end]
        if not _PLAIN_EXPR.fullmatch(text) or text[0] in "+-" or text[-1] == "-":
            return None
        if not text.strip() or not _balanced(text):
            return None
        if start > pos:
            pieces.append(source[pos:start])
        pieces.append(ExprPiece(text))
        pos = end + 2
    if pos < len(source):
        pieces.append(source[pos:])
    return pieces
