"""The expression parser is generated once from the grammar and committed.

`expr/jinja_expr_parser.py` holds the LALR tables of `expr/jinja_expr.lark` and Lark's parsing
runtime, so no process builds the tables (about 0.3 s) or imports `lark`. These tests fail when
the committed file is not what `scripts/gen_expr_parser.py` makes from the grammar today, and
when the built parser and one built from the grammar by Lark disagree.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from noetlc.expr.parser import GRAMMAR, parse_expression

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gen_expr_parser.py"

EXPRESSIONS = [
    "workload.api_url ~ '/items/' ~ iter.page",
    "outcome.status == 'error' and outcome.http.status in [429, 503]",
    "ctx.count | default(0) > 10",
    "(iter.page | int) + 1",
    "a if b else c",
    "x is not defined",
    "-x ** 2 // 3 % 4",
    "{'a': [1, 2.5, 'x'], 'b': (1,)}[k][1:2]",
    "f(1, y=2) | join(', ')",
    "not a not in b",
]


def test_committed_parser_is_what_the_grammar_generates() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_built_parser_agrees_with_lark_on_the_grammar(text: str) -> None:
    from lark import Lark

    reference = Lark(GRAMMAR.read_text(encoding="utf-8"), parser="lalr", maybe_placeholders=True)
    assert plain(parse_expression(text)) == plain(reference.parse(text))


def plain(node: Any) -> Any:
    """A tree as nested tuples (rule names, token types and values)."""
    if hasattr(node, "children"):
        return (str(node.data), tuple(plain(c) for c in node.children))
    if node is None:
        return None
    return (str(node.type), str(node))
