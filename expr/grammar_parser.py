"""The hand-written parser of `jinja_expr.lark`: recursive descent, one method per grammar level.

`parse(text)` returns the tree Lark's LALR parser builds from the grammar (`noetlc.expr.tree`,
same rule names, kept tokens, `None` placeholders and terminal names), or raises `ParseError`.
`tests/expressions/test_expr_grammar_parser.py` proves it against Lark on every fixture and
corpus expression, hypothesis-generated sentences of the grammar and mutated strings.

Where Lark's grammar is ambiguous, the choice is the one Lark's LALR tables make: a test takes
a following `(args)` or literal as its argument (`x is divisibleby 3`), `a if b` without `else`
is complete, and `-` / `+` before an operand are signs (`a - -b`).

Limits (`noetlc.expr.limits`): only brackets recurse here, at most `MAX_NESTING` levels; chains
(`not not …`, `a.b.c…`, `x | f | g …`, `a + b + …`, `else … if`) are loops. The tree's height
is at most `MAX_DEPTH` levels: each operator, filter, test, item access, call, sign and
`if`/`else` link is one level, an attribute access `.x` and a bracket's contents four (what
they nest in the generated Python). So the code generator, `ast.unparse` and Python's
compiler (at most 200 nested parentheses) can handle every expression accepted here, on any
reasonable stack.
"""

from __future__ import annotations

from typing import Any

from noetlc.expr.lexer import ParseError, tokenize
from noetlc.expr.limits import MAX_DEPTH, MAX_NESTING
from noetlc.expr.tree import Token, Tree

__all__ = ["ParseError", "TooDeep", "parse"]


class TooDeep(ParseError):
    """The expression goes over `MAX_NESTING` brackets or `MAX_DEPTH` levels."""


# `!comp_op`: the kept tokens with the terminal names Lark gives them
_COMPARISONS = {
    "==": "__ANON_0",
    "!=": "__ANON_1",
    "<": "LESSTHAN",
    "<=": "__ANON_2",
    ">": "MORETHAN",
    ">=": "__ANON_3",
    "in": "IN",
}
# Levels of height (see the module doc): a bracket's contents and an attribute access `.x`
# nest about five levels of generated Python each (the code generator and `ast.unparse`
# recurse about 17 frames for either, 3 for every other level).
_BRACKET = 4
_ATTRIBUTE = 4
_MULOPS = frozenset({"*", "/", "//", "%"})
_CONSTANTS = {
    "true": "true",
    "True": "true",
    "false": "false",
    "False": "false",
    "none": "none",
    "None": "none",
}
_LITERALS = frozenset({"STRING", "INT", "FLOAT", *_CONSTANTS})
_TEST_NAMES = {"NAME": "NAME", "none": "NONE", "true": "TRUE", "false": "FALSE"}


def parse(text: str) -> Tree:
    return _Parser(text).parse()


class _Parser:
    """`kind` is the current token's kind; every method leaves in `h` the height of the tree
    it returns (see the module doc)."""

    __slots__ = ("h", "i", "kind", "nesting", "tokens")

    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.kind = self.tokens[0][0]
        self.h = 0
        self.nesting = 0

    def parse(self) -> Tree:
        node = self._expr()
        if self.kind != "$END":
            raise self._unexpected()
        return node

    # ---- tokens and limits --------------------------------------------------------------

    def _advance(self) -> tuple[str, str, int]:
        token = self.tokens[self.i]
        self.i += 1
        self.kind = self.tokens[self.i][0]
        return token

    def _expect(self, kind: str) -> tuple[str, str, int]:
        if self.kind != kind:
            raise self._unexpected(kind)
        return self._advance()

    def _unexpected(self, wanted: str | None = None) -> ParseError:
        kind, value, pos = self.tokens[self.i]
        found = "end of the expression" if kind == "$END" else repr(value)
        expected = f", expected {wanted!r}" if wanted else ""
        return ParseError(f"unexpected {found} at column {pos + 1}{expected}", pos)

    def _height(self, h: int) -> int:
        if h > MAX_DEPTH:
            pos = self.tokens[self.i][2]
            raise TooDeep(
                f"the expression is nested too deeply (more than {MAX_DEPTH} levels of "
                f"operators, filters and accesses, at column {pos + 1})",
                pos,
            )
        return h

    def _open(self) -> None:
        """Enter a bracket (the current token)."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            pos = self.tokens[self.i][2]
            raise TooDeep(
                f"the expression nests more than {MAX_NESTING} levels of brackets "
                f"(at column {pos + 1})",
                pos,
            )
        self._advance()

    def _close(self, kind: str) -> None:
        self._expect(kind)
        self.nesting -= 1

    # ---- ?expr, or, and, not ------------------------------------------------------------

    def _expr(self) -> Tree:
        links: list[tuple[Tree, Tree, int]] = []  # `body if test else` … awaiting their else
        while True:
            body = self._or()
            if self.kind != "if":
                node = body
                break
            h = self.h
            self._advance()
            test = self._or()
            h = max(h, self.h)
            if self.kind == "else":
                self._advance()
                links.append((body, test, h))
                continue
            node = Tree("cond_noelse", [body, test])
            self.h = self._height(h + 1)
            break
        for body, test, h in reversed(links):
            node = Tree("cond", [body, test, node])
            self.h = self._height(max(h, self.h) + 1)
        return node

    def _or(self) -> Tree:
        items = [self._and()]
        if self.kind == "or":
            h = self.h
            while self.kind == "or":
                self._advance()
                items.append(self._and())
                h = max(h, self.h)
            self.h = self._height(h + 1)
        return Tree("or_", items)

    def _and(self) -> Tree:
        items = [self._not()]
        if self.kind == "and":
            h = self.h
            while self.kind == "and":
                self._advance()
                items.append(self._not())
                h = max(h, self.h)
            self.h = self._height(h + 1)
        return Tree("and_", items)

    def _not(self) -> Any:
        count = 0
        while self.kind == "not":
            self._advance()
            count += 1
        node: Any = self._compare()
        if count:
            for _ in range(count):
                node = Tree("not_", [node])
            self.h = self._height(self.h + count)
        return node

    # ---- comparisons and arithmetic -----------------------------------------------------

    def _compare(self) -> Tree:
        items: list[Any] = [self._sum()]
        h = self.h
        while True:
            kind = self.kind
            if kind in _COMPARISONS:
                _, value, pos = self._advance()
                op = Tree("comp_op", [Token(_COMPARISONS[kind], value, pos)])
            elif kind == "not":  # `not in`
                _, value, pos = self._advance()
                _, value_in, pos_in = self._expect("in")
                op = Tree("comp_op", [Token("NOT", value, pos), Token("IN", value_in, pos_in)])
            else:
                break
            items.append(op)
            items.append(self._sum())
            h = max(h, self.h)
        if len(items) > 1:
            self.h = self._height(h + 1)
        return Tree("compare", items)

    def _sum(self) -> Tree:
        items: list[Any] = [self._concat()]
        h = self.h
        while self.kind == "+" or self.kind == "-":
            _, value, pos = self._advance()
            items.append(Token("ADDOP", value, pos))
            items.append(self._concat())
            h = self._height(max(h, self.h) + 1)  # left-nested in the generated code
        self.h = h
        return Tree("binop", items)

    def _concat(self) -> Tree:
        items = [self._product()]
        if self.kind == "~":
            h = self.h
            while self.kind == "~":
                self._advance()
                items.append(self._product())
                h = max(h, self.h)
            self.h = self._height(h + 1)  # one f-string
        return Tree("concat", items)

    def _product(self) -> Tree:
        items: list[Any] = [self._power()]
        h = self.h
        while self.kind in _MULOPS:
            _, value, pos = self._advance()
            items.append(Token("MULOP", value, pos))
            items.append(self._power())
            h = self._height(max(h, self.h) + 1)
        self.h = h
        return Tree("binop", items)

    def _power(self) -> Tree:
        items: list[Any] = [self._filtered()]
        h = self.h
        while self.kind == "**":
            _, value, pos = self._advance()
            items.append(Token("POW", value, pos))
            items.append(self._filtered())
            h = self._height(max(h, self.h) + 1)
        self.h = h
        return Tree("power", items)

    # ---- filters, tests, signs, postfix -------------------------------------------------

    def _filtered(self) -> Any:
        node = self._signed()
        h = self.h
        while True:
            if self.kind == "|":
                self._advance()
                _, name, pos = self._expect("NAME")
                children = [node, Token("NAME", name, pos)]
                if self.kind == "(":
                    children.append(self._call_args())
                    h = max(h, self.h)
                node = Tree("filter", children)
            elif self.kind == "is":
                self._advance()
                data = "test"
                if self.kind == "not":
                    self._advance()
                    data = "test_not"
                kind = self.kind
                if kind not in _TEST_NAMES:
                    raise self._unexpected("a test name")
                _, name, pos = self._advance()
                children = [node, Tree("test_name", [Token(_TEST_NAMES[kind], name, pos)])]
                if self.kind == "(":
                    children.append(Tree("test_arg", [self._call_args()]))
                    h = max(h, self.h)
                elif self.kind in _LITERALS:
                    children.append(Tree("test_arg", [self._literal()]))
                node = Tree(data, children)
            else:
                break
            h = self._height(h + 1)
        self.h = h
        return node

    def _signed(self) -> Any:
        signs: list[str] = []
        while self.kind == "-" or self.kind == "+":
            signs.append(self._advance()[0])
        node = self._postfix()
        if signs:
            for sign in reversed(signs):
                node = Tree("neg" if sign == "-" else "pos", [node])
            self.h = self._height(self.h + len(signs))
        return node

    def _postfix(self) -> Any:
        node = self._primary()
        h = self.h
        while True:
            kind = self.kind
            step = 1
            if kind == ".":
                self._advance()
                kind = self.kind
                if kind == "NAME":
                    _, value, pos = self._advance()
                    node = Tree("getattr", [node, Token("NAME", value, pos)])
                    step = _ATTRIBUTE
                elif kind == "INT":
                    _, value, pos = self._advance()
                    node = Tree("getattr_int", [node, Token("INT", value, pos)])
                else:
                    raise self._unexpected("a name or an integer")
            elif kind == "[":
                node = self._subscript(node)
                h = max(h, self.h)
            elif kind == "(":
                node = Tree("call", [node, self._call_args()])
                h = max(h, self.h)
            else:
                break
            h = self._height(h + step)
        self.h = h
        return node

    def _subscript(self, target: Any) -> Tree:
        """`target[i]`, `target[a:b]`, `target[a:b:c]` (the current token is `[`)."""
        self._open()
        first = None
        h = 0
        if self.kind != ":":
            first = self._expr()
            h = self.h
            if self.kind == "]":
                self._close("]")
                self.h = self._height(h + _BRACKET)
                return Tree("getitem", [target, first])
        self._expect(":")
        bounds = [first]
        for last in (False, True):
            if self.kind not in (":", "]"):
                bounds.append(self._expr())
                h = max(h, self.h)
            else:
                bounds.append(None)
            if last or self.kind != ":":
                break
            self._advance()
        self._close("]")
        self.h = self._height(h + _BRACKET)
        return Tree("getslice", [target, Tree(f"slice{len(bounds)}", bounds)])

    def _call_args(self) -> Tree:
        """`( [arg ("," arg)* ","?] )`, an arg `expr` or `NAME = expr`."""
        self._open()
        args: list[Any] = []
        h = 0
        while self.kind != ")":
            if self.kind == "NAME" and self.tokens[self.i + 1][0] == "=":
                _, name, pos = self._advance()
                self._advance()
                args.append(Tree("kwarg", [Token("NAME", name, pos), self._expr()]))
            else:
                args.append(Tree("posarg", [self._expr()]))
            h = max(h, self.h)
            if self.kind != ",":
                break
            self._advance()
        self._close(")")
        self.h = self._height(h + _BRACKET)
        return Tree("call_args", args or [None])

    # ---- primaries ----------------------------------------------------------------------

    def _primary(self) -> Any:
        kind = self.kind
        if kind == "NAME":
            _, value, pos = self._advance()
            self.h = 0
            return Tree("name", [Token("NAME", value, pos)])
        if kind in _LITERALS:
            return self._literal()
        if kind == "(":
            return self._parenthesized()
        if kind == "[":
            return self._sequence("]", "list_")
        if kind == "{":
            return self._sequence("}", "dict_")
        raise self._unexpected()

    def _literal(self) -> Tree:
        kind = self.kind
        self.h = 0
        if kind == "STRING":  # adjacent strings are one
            parts = []
            while self.kind == "STRING":
                _, value, pos = self._advance()
                parts.append(Token("STRING", value, pos))
            return Tree("strings", parts)
        _, value, pos = self._advance()
        if kind == "INT" or kind == "FLOAT":
            return Tree("int_" if kind == "INT" else "float_", [Token(kind, value, pos)])
        return Tree(_CONSTANTS[kind], [])

    def _parenthesized(self) -> Any:
        """`()`, `(x)` (the tree of x), `(x,)`, `(x, y, …)`."""
        self._open()
        if self.kind == ")":
            self._close(")")
            self.h = 0
            return Tree("tuple_empty", [])
        first = self._expr()
        if self.kind == ")":
            self._close(")")
            self.h = self._height(self.h + _BRACKET)
            return first
        h = self.h
        self._expect(",")
        items = [first]
        while self.kind != ")":
            items.append(self._expr())
            h = max(h, self.h)
            if self.kind != ",":
                break
            self._advance()
        self._close(")")
        self.h = self._height(h + _BRACKET)
        return Tree("tuple_one" if len(items) == 1 else "tuple_many", items)

    def _sequence(self, close: str, data: str) -> Tree:
        """A list `[a, b,]` or a dict `{k: v,}`; empty: one `None` child."""
        self._open()
        items: list[Any] = []
        h = 0
        while self.kind != close:
            item = self._expr()
            h = max(h, self.h)
            if data == "dict_":
                self._expect(":")
                item = Tree("pair", [item, self._expr()])
                h = max(h, self.h)
            items.append(item)
            if self.kind != ",":
                break
            self._advance()
        self._close(close)
        self.h = self._height(h + _BRACKET)
        return Tree(data, items or [None])
