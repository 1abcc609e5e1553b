"""The tokens of an expression, by the terminals of `jinja_expr.lark`.

`tokenize(text)` returns `(kind, value, offset)` triples ending with `("$END", "", len)`.
`kind` is `NAME`, `INT`, `FLOAT` or `STRING` for those terminals, and the text itself for a
keyword (`and`, `not`, `true`, …) or an operator (`**`, `//`, `==`, `(`, …). `-` and `+` are
one kind whether they are unary or binary: the parser knows which from where they stand.

The numbers and strings are the grammar's own regular expressions (so `1.x`, `1e` and `x.0.1`
fail the same way). A word is a keyword only when the whole word is one: Lark's contextual
lexer, where a name cannot stand, reads a keyword at the start of a longer word (`a iffy else
b` as `a if fy else b`, `a andb` as `a and b`), which Jinja rejects and so does this lexer.
"""

from __future__ import annotations

import re


class ParseError(Exception):
    """The text is not in the grammar's language (`pos`: the offending offset)."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


KEYWORDS = frozenset(
    {"and", "or", "not", "in", "is", "if", "else", "true", "false", "none", "True", "False", "None"}
)

_FLOAT = r"\d[\d_]*(\.\d[\d_]*)?([eE][+-]?\d[\d_]*)|\d[\d_]*\.\d[\d_]*"
_INT = r"\d[\d_]*(?![\d.eE_])"
_STRING = r"'([^'\\]|\\.)*'|\"([^\"\\]|\\.)*\""
# `%import common.WS`: no vertical tab, no other Unicode space
_WS = r"[ \t\f\r\n]+"
_OPERATORS = r"\*\*|//|==|!=|<=|>=|[-+*/%~|<>=.\[\](){}:,]"
_TOKEN = re.compile(
    f"(?P<ws>{_WS})|(?P<word>[a-zA-Z_][a-zA-Z0-9_]*)|(?P<op>{_OPERATORS})"
    f"|(?P<FLOAT>{_FLOAT})|(?P<INT>{_INT})|(?P<STRING>{_STRING})"
)


def tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens: list[tuple[str, str, int]] = []
    append = tokens.append
    match = _TOKEN.match
    pos = 0
    end = len(text)
    while pos < end:
        m = match(text, pos)
        if m is None:
            raise ParseError(f"unexpected character {text[pos]!r}", pos)
        kind = m.lastgroup or ""
        value = m.group()
        if kind == "word":
            # a keyword is the whole word, up to a non-word character (Lark's NAME excludes
            # a keyword followed by `\b`, so `none٣` is the name `none` and the number `٣`)
            after = m.end()
            if value in KEYWORDS and not (after < end and text[after].isalnum()):
                append((value, value, pos))
            else:
                append(("NAME", value, pos))
        elif kind == "op":
            append((value, value, pos))
        elif kind != "ws":
            append((kind, value, pos))  # FLOAT, INT, STRING
        pos = m.end()
    append(("$END", "", end))
    return tokens
