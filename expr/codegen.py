"""Jinja expression parse tree (`noetlc.expr.tree`) -> Python source of `def _e(s): return <expr>`.

The generated code calls only the helpers of `noetlc.expr.runtime.RUNTIME` (`_name`,
`_attr`, `_item`, `_F[...]` filters, `_T[...]` tests, `_G[...]` globals) and Python operators
whose semantics match Jinja's (jinja2 compiles `==`, `<`, `+`, `in`, `and`, `or`, `not` to the
same Python operators). Anything the subset does not cover raises `Unsupported`, and the
caller puts the expression on jinja2's slow path.
"""

from __future__ import annotations

import ast
from typing import Any

from noetlc.expr.access import FORMAT_METHODS, MAPPING_METHODS, REF_ATTRIBUTES
from noetlc.expr.library import BUILDING_FILTERS, FILTER_NAMES, GLOBALS, TEST_NAMES
from noetlc.expr.limits import MAX_INT_BITS
from noetlc.expr.namespaces import ROOT_NAMESPACES
from noetlc.expr.tree import Token, Tree

MAX_INT_DIGITS = MAX_INT_BITS * 3 // 10  # decimal digits of the largest allowed integer


class Unsupported(Exception):
    """The expression is valid Jinja but outside the compiled subset (slow path)."""


class Unsafe(Exception):
    """The expression tries to reach something the sandbox forbids (statically visible)."""


def _call(func: ast.expr, *args: ast.expr, keywords: list[ast.keyword] | None = None) -> ast.expr:
    return ast.Call(func=func, args=list(args), keywords=keywords or [])


def _n(name: str) -> ast.expr:
    return ast.Name(id=name, ctx=ast.Load())


def _const(value: Any) -> ast.expr:
    return ast.Constant(value=value)


_CMP = {
    "==": ast.Eq,
    "!=": ast.NotEq,
    "<": ast.Lt,
    "<=": ast.LtE,
    ">": ast.Gt,
    ">=": ast.GtE,
    "in": ast.In,
    "notin": ast.NotIn,
}
# `*`, `%` and `+` can build huge values: the runtime's checked helpers (`noetlc.expr.limits`).
_BOUNDED = {"*": "_mul", "%": "_mod", "+": "_add"}  # `+` of two integers is inlined
_BIN = {
    "+": ast.Add,
    "-": ast.Sub,
    "*": ast.Mult,
    "/": ast.Div,
    "//": ast.FloorDiv,
    "%": ast.Mod,
}


class CodeGen:
    def __init__(self) -> None:
        self.names: set[str] = set()  # free root names (facts for the analyzer)
        self.temps = 0  # walrus temporaries of inlined attribute access
        # Whether the code builds values (a checked operator, a filter that builds): its
        # function then starts the evaluation's budget (`limits.begin`) first.
        self.metered = False

    def expr(self, node: Tree | Token) -> ast.expr:
        if isinstance(node, Token):
            raise Unsupported(f"unexpected token {node!r}")
        method = getattr(self, f"n_{node.data}", None)
        if method is None:
            raise Unsupported(f"construct {node.data!r}")
        result: ast.expr = method(node.children)
        return result

    # ---- boolean and comparison ------------------------------------------------------

    def n_or_(self, ch: list[Any]) -> ast.expr:
        if len(ch) == 1:
            return self.expr(ch[0])
        return ast.BoolOp(op=ast.Or(), values=[self.expr(c) for c in ch])

    def n_and_(self, ch: list[Any]) -> ast.expr:
        if len(ch) == 1:
            return self.expr(ch[0])
        return ast.BoolOp(op=ast.And(), values=[self.expr(c) for c in ch])

    def n_not_(self, ch: list[Any]) -> ast.expr:
        return ast.UnaryOp(op=ast.Not(), operand=self.expr(ch[0]))

    def n_compare(self, ch: list[Any]) -> ast.expr:
        if len(ch) == 1:
            return self.expr(ch[0])
        left = self.expr(ch[0])
        ops: list[ast.cmpop] = []
        comparators: list[ast.expr] = []
        for i in range(1, len(ch), 2):
            op = "".join(str(t) for t in ch[i].children)
            ops.append(_CMP[op]())
            comparators.append(self.expr(ch[i + 1]))
        return ast.Compare(left=left, ops=ops, comparators=comparators)

    def n_cond(self, ch: list[Any]) -> ast.expr:
        body, test, orelse = ch
        return ast.IfExp(test=self.expr(test), body=self.expr(body), orelse=self.expr(orelse))

    def n_cond_noelse(self, ch: list[Any]) -> ast.expr:
        body, test = ch
        undefined = _call(
            _n("_U"),
            keywords=[
                ast.keyword(
                    arg="hint",
                    value=_const(
                        "the if expression evaluated to false and no else section was defined."
                    ),
                )
            ],
        )
        return ast.IfExp(test=self.expr(test), body=self.expr(body), orelse=undefined)

    # ---- arithmetic -----------------------------------------------------------------

    def n_binop(self, ch: list[Any]) -> ast.expr:
        result = self.expr(ch[0])
        for i in range(1, len(ch), 2):
            symbol = str(ch[i])
            if symbol == "+":
                result = self._add(result, self.expr(ch[i + 1]))
                continue
            if symbol in _BOUNDED:  # size-checked (`noetlc.expr.limits`)
                self.metered = True
                result = _call(_n(_BOUNDED[symbol]), result, self.expr(ch[i + 1]), _n("_m"))
                continue
            result = ast.BinOp(left=result, op=_BIN[symbol](), right=self.expr(ch[i + 1]))
        return result

    def _add(self, left: ast.expr, right: ast.expr) -> ast.expr:
        """`a + b`, inlined for two integers (the common case: `iter.page + 1`), else the
        size-checked `_add`: `(l + r if type(l := a) is type(r := b) is int else _add(l, r, _m))`
        (the chained `is` evaluates both sides before it compares)."""
        self.metered = True
        if _has_inlined_add(left) or _has_inlined_add(right):
            # one inlined `+` per path at most: it nests its operands two parentheses deeper
            # than an operator counts in the parser's depth limit (`limits.MAX_DEPTH`)
            return _call(_n("_add"), left, right, _n("_m"))
        self.temps += 2
        lt, rt = f"_t{self.temps - 1}", f"_t{self.temps}"
        bind_l = ast.NamedExpr(target=ast.Name(id=lt, ctx=ast.Store()), value=left)
        bind_r = ast.NamedExpr(target=ast.Name(id=rt, ctx=ast.Store()), value=right)
        both_int = ast.Compare(
            left=_call(_n("type"), bind_l),
            ops=[ast.Is(), ast.Is()],
            comparators=[_call(_n("type"), bind_r), _n("int")],
        )
        inlined = ast.IfExp(
            test=both_int,
            body=ast.BinOp(left=_n(lt), op=ast.Add(), right=_n(rt)),
            orelse=_call(_n("_add"), _n(lt), _n(rt), _n("_m")),
        )
        inlined.noetlc_inlined_add = True  # type: ignore[attr-defined]
        return inlined

    def n_concat(self, ch: list[Any]) -> ast.expr:
        if len(ch) == 1:
            return self.expr(ch[0])
        self.metered = True
        return joined([self.expr(c) for c in ch], self)

    def n_power(self, ch: list[Any]) -> ast.expr:
        operands = [c for c in ch if not (isinstance(c, Token) and c.type == "POW")]
        result = self.expr(operands[0])
        for operand in operands[1:]:  # Jinja's ** is left-associative
            result = _call(_n("_pow"), result, self.expr(operand))
        return result

    def n_neg(self, ch: list[Any]) -> ast.expr:
        return ast.UnaryOp(op=ast.USub(), operand=self.expr(ch[0]))

    def n_pos(self, ch: list[Any]) -> ast.expr:
        return ast.UnaryOp(op=ast.UAdd(), operand=self.expr(ch[0]))

    # ---- filters, tests, calls --------------------------------------------------------

    def _args(self, call_args: Tree | None) -> tuple[list[ast.expr], list[ast.keyword]]:
        args: list[ast.expr] = []
        keywords: list[ast.keyword] = []
        if call_args is None:
            return args, keywords
        for arg in call_args.children:
            if arg is None:
                continue
            if arg.data == "posarg":
                if keywords:
                    raise Unsupported("positional argument after keyword argument")
                args.append(self.expr(arg.children[0]))
            else:
                keywords.append(
                    ast.keyword(arg=str(arg.children[0]), value=self.expr(arg.children[1]))
                )
        return args, keywords

    def n_filter(self, ch: list[Any]) -> ast.expr:
        value, name = ch[0], str(ch[1])
        if name not in FILTER_NAMES:
            raise Unsupported(f"filter {name!r} is not in the compiled whitelist")
        args, keywords = self._args(ch[2] if len(ch) > 2 else None)
        func = ast.Subscript(value=_n("_F"), slice=_const(name), ctx=ast.Load())
        if name not in BUILDING_FILTERS:
            return _call(func, self.expr(value), *args, keywords=keywords)
        # `_FB`: the same filter, what it built charged to the meter (one call: no deeper)
        self.metered = True
        func = ast.Subscript(value=_n("_FB"), slice=_const(name), ctx=ast.Load())
        return _call(func, _n("_m"), self.expr(value), *args, keywords=keywords)

    def _test(self, ch: list[Any]) -> ast.expr:
        value = ch[0]
        name = "".join(str(t) for t in ch[1].children) if isinstance(ch[1], Tree) else str(ch[1])
        if name not in TEST_NAMES:
            raise Unsupported(f"test {name!r} is not in the compiled whitelist")
        args: list[ast.expr] = []
        keywords: list[ast.keyword] = []
        if len(ch) > 2 and ch[2] is not None:
            inner = ch[2].children[0]
            if isinstance(inner, Tree) and inner.data == "call_args":
                args, keywords = self._args(inner)
            else:
                args = [self.expr(inner)]
        func = ast.Subscript(value=_n("_T"), slice=_const(name), ctx=ast.Load())
        return _call(func, self.expr(value), *args, keywords=keywords)

    def n_test(self, ch: list[Any]) -> ast.expr:
        return self._test(ch)

    def n_test_not(self, ch: list[Any]) -> ast.expr:
        return ast.UnaryOp(op=ast.Not(), operand=self._test(ch))

    def n_call(self, ch: list[Any]) -> ast.expr:
        target, call_args = ch
        if not (isinstance(target, Tree) and target.data == "name"):
            if isinstance(target, Tree) and target.data == "getattr":
                method = str(target.children[1])
                if method in MAPPING_METHODS:
                    args, keywords = self._args(call_args)
                    if keywords:
                        raise Unsafe(f"`.{method}()` takes its arguments by position")
                    self.metered = True
                    return _call(
                        _n("_method"),
                        _n("_m"),
                        self.expr(target.children[0]),
                        _const(method),
                        ast.Tuple(elts=args, ctx=ast.Load()),
                        _n("s"),
                    )
                if method in FORMAT_METHODS:
                    raise Unsafe(f"string formatting (`.{method}()`) is not allowed")
                raise Unsafe(
                    f"method calls (`.{method}()`) are not allowed (a mapping's get, keys, "
                    f"values and items aside); use a filter (`x | upper`, `x | list`)"
                )
            raise Unsupported("calls of computed values are not compiled")
        name = str(target.children[0])
        if name not in GLOBALS:
            raise Unsupported(f"function {name!r} is not in the compiled whitelist")
        args, keywords = self._args(call_args)
        func = ast.Subscript(value=_n("_G"), slice=_const(name), ctx=ast.Load())
        # `range` is lazy and bounded, `lookup` returns a part of its input, `dict` a mapping
        # of its (written) keyword arguments or a copy of one: nothing to charge
        return _call(func, *args, keywords=keywords)

    # ---- access ----------------------------------------------------------------------

    def n_getattr(self, ch: list[Any]) -> ast.expr:
        name = str(ch[1])
        if name in REF_ATTRIBUTES:  # a stored result's reference (`_attr` reads it)
            return _call(_n("_attr"), self.expr(ch[0]), _const(name), _n("s"))
        if name.startswith("_"):
            raise Unsafe(f"access to attribute `{name}` is not allowed")
        # Inline the common case (a dict that has the key) and call `_attr` otherwise:
        # `(t[k] if type(t := obj) is dict and k in t else _attr(t, k))`.
        self.temps += 1
        temp = f"_t{self.temps}"
        bind = ast.NamedExpr(target=ast.Name(id=temp, ctx=ast.Store()), value=self.expr(ch[0]))
        is_dict = ast.Compare(
            left=_call(_n("type"), bind), ops=[ast.Is()], comparators=[_n("dict")]
        )
        has_key = ast.Compare(left=_const(name), ops=[ast.In()], comparators=[_n(temp)])
        return ast.IfExp(
            test=ast.BoolOp(op=ast.And(), values=[is_dict, has_key]),
            body=ast.Subscript(value=_n(temp), slice=_const(name), ctx=ast.Load()),
            orelse=_call(_n("_attr"), _n(temp), _const(name), _n("s")),
        )

    def n_getattr_int(self, ch: list[Any]) -> ast.expr:
        index = _const(int(str(ch[1]).replace("_", "")))
        return _call(_n("_item"), self.expr(ch[0]), index, _n("s"))

    def n_getitem(self, ch: list[Any]) -> ast.expr:
        key = self.expr(ch[1])
        if (
            isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and key.value.startswith("_")
        ):
            raise Unsafe(f"access to key `{key.value}` is not allowed")
        return _call(_n("_item"), self.expr(ch[0]), key, _n("s"))

    def n_getslice(self, ch: list[Any]) -> ast.expr:
        parts = list(ch[1].children) + [None] * 3
        bounds = [self.expr(p) if p is not None else _const(None) for p in parts[:3]]
        return _call(_n("_slice"), self.expr(ch[0]), *bounds)

    def n_name(self, ch: list[Any]) -> ast.expr:
        name = str(ch[0])
        self.names.add(name)
        if name in ROOT_NAMESPACES:
            # `_UN` is one shared undefined value: no allocation on the hot path.
            return _call(
                ast.Attribute(value=_n("s"), attr="get", ctx=ast.Load()), _const(name), _n("_UN")
            )
        return _call(_n("_name"), _n("s"), _const(name))

    # ---- literals --------------------------------------------------------------------

    def n_strings(self, ch: list[Any]) -> ast.expr:
        return _const("".join(unquote(str(t)) for t in ch))

    def n_int_(self, ch: list[Any]) -> ast.expr:
        digits = str(ch[0]).replace("_", "")
        if len(digits) > MAX_INT_DIGITS:
            raise Unsafe(f"an integer literal of {len(digits):,} digits is too large")
        return _const(int(digits))

    def n_float_(self, ch: list[Any]) -> ast.expr:
        return _const(float(str(ch[0]).replace("_", "")))

    def n_true(self, ch: list[Any]) -> ast.expr:
        return _const(True)

    def n_false(self, ch: list[Any]) -> ast.expr:
        return _const(False)

    def n_none(self, ch: list[Any]) -> ast.expr:
        return _const(None)

    def n_list_(self, ch: list[Any]) -> ast.expr:
        return ast.List(elts=[self.expr(c) for c in ch if c is not None], ctx=ast.Load())

    def n_tuple_empty(self, ch: list[Any]) -> ast.expr:
        return ast.Tuple(elts=[], ctx=ast.Load())

    def n_tuple_one(self, ch: list[Any]) -> ast.expr:
        return ast.Tuple(elts=[self.expr(ch[0])], ctx=ast.Load())

    def n_tuple_many(self, ch: list[Any]) -> ast.expr:
        return ast.Tuple(elts=[self.expr(c) for c in ch], ctx=ast.Load())

    def n_dict_(self, ch: list[Any]) -> ast.expr:
        pairs = [c for c in ch if c is not None]
        return ast.Dict(
            keys=[self.expr(p.children[0]) for p in pairs],
            values=[self.expr(p.children[1]) for p in pairs],
        )


def _has_inlined_add(node: ast.expr) -> bool:
    return any(getattr(n, "noetlc_inlined_add", False) for n in ast.walk(node))


def unquote(token: str) -> str:
    """The value of a quoted string token. Jinja's string escapes are Python's, so Python's
    parser reads them; `ast.parse` rather than `ast.literal_eval`, whose recursive nested
    helpers are reference cycles left for the garbage collector on every call."""
    body = token[1:-1]
    if "\\" not in body:
        return body
    node = ast.parse(token, mode="eval").body
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        raise ValueError(f"not a string literal: {token}")
    return node.value


def function_source(expr: ast.expr, metered: bool = False) -> str:
    """Wrap an expression AST into the source of the function the pool stores:

        def _e(s):
            _m = [0]            # when it builds values (`CodeGen.metered`): its meter
            try:
                return <expr>
            except Exception as e:
                raise _fail(e) from e

    (`_fail` is bound at load time to the expression's source and position; a `try` costs
    nothing until something raises.)"""
    handler = ast.ExceptHandler(
        type=_n("Exception"),
        name="e",
        body=[ast.Raise(exc=_call(_n("_fail"), _n("e")), cause=_n("e"))],
    )
    body: list[ast.stmt] = [
        ast.Try(body=[ast.Return(value=expr)], handlers=[handler], orelse=[], finalbody=[])
    ]
    if metered:  # the evaluation's meter (`noetlc.expr.limits.charge`)
        meter = ast.List(elts=[_const(0)], ctx=ast.Load())
        target = ast.Name(id="_m", ctx=ast.Store())
        body.insert(0, ast.Assign(targets=[target], value=meter, lineno=1))  # see `lineno` below
    fn = ast.FunctionDef(
        name="_e",
        args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg="s")], kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        body=body,
        decorator_list=[],
        returns=None,
        lineno=1,  # `unparse` reads the def's line for type comments
    )
    # No `ast.fix_missing_locations`: `unparse` needs only the def's line, and that helper's
    # recursive closure is a reference cycle left for the garbage collector on every call.
    return ast.unparse(ast.Module(body=[fn], type_ignores=[]))


def joined(parts: list[ast.expr | str], gen: CodeGen) -> ast.expr:
    """`_sized(_m, f"{a}text{b}")`: str() of each value, as Jinja's `~` and rendering do (an
    undefined value renders as ''), and the text's size checked and charged
    (`noetlc.expr.limits.sized`). A string, a number, a boolean or null goes into the f-string
    as it is (its text is no longer than it); anything else first through `_text`, which
    refuses a structure whose text would be huge, or an object, before `str()` builds it.
    So the f-string builds at most the sum of texts already bounded.

    A part that holds an f-string itself (`x ~ (y ~ z)`) makes it `_concat(_m, a, 'text', b)`
    instead: Python cannot nest f-strings more than a few quote styles deep."""
    if any(
        isinstance(node, ast.JoinedStr)
        for part in parts
        if not isinstance(part, str)
        for node in ast.walk(part)
    ):
        return _call(
            _n("_concat"), _n("_m"), *(_const(p) if isinstance(p, str) else p for p in parts)
        )
    values: list[ast.expr] = []
    for part in parts:
        if isinstance(part, str):
            values.append(_const(part))
        elif isinstance(part, ast.Constant) and isinstance(part.value, str):
            values.append(part)
        else:
            gen.temps += 1
            temp = f"_t{gen.temps}"
            bind = ast.NamedExpr(target=ast.Name(id=temp, ctx=ast.Store()), value=part)
            scalar = ast.Compare(
                left=_call(_n("type"), bind), ops=[ast.In()], comparators=[_n("_SC")]
            )
            checked = ast.IfExp(test=scalar, body=_n(temp), orelse=_call(_n("_text"), _n(temp)))
            values.append(ast.FormattedValue(value=checked, conversion=ord("s"), format_spec=None))
    return _call(_n("_sized"), _n("_m"), ast.JoinedStr(values=values))


def template_source(parts: list[ast.expr | str], gen: CodeGen) -> str:
    """Mixed text: the literal text and the expressions, concatenated."""
    return function_source(joined(parts, gen), metered=True)
