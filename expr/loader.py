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

from noetlc.expr.runtime import Evaluator, build_evaluator, code_object


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


def inline_form(
    fn: Evaluator, source: str, mode: str
) -> tuple[list[str], str, dict[str, Any]] | None:
    """The body of the compiled evaluator `fn` of `source` for a caller to inline it (the
    control VM's generated handlers, vm/specialise.py): `(setup, expression, names)` where
    `setup` are the statements before the function's `try` (its meter, if any), `expression`
    the Python source of what it returns, over the scope `s` and its walrus temporaries, and
    `names` the globals the expression reads, with the objects `fn` reads under those names
    (its own globals; `_fail` makes its `ExpressionError`). None when `fn` is not exactly the
    function this process's code generator makes from `source` (a slow-path or constant
    entry, or a code object that is not the cached one) or its body has another shape: the
    caller then calls `fn`. Inlined code behaves as `fn`: the same operations on the same
    objects, and a caller wraps it in `except Exception as e: raise _fail(e) from e`."""
    import ast  # (not on a cold start's path: only when a handler is generated)

    from noetlc.expr.compile import compile_expression  # the code generator: only when asked

    compiled = compile_expression(source, mode="guard" if mode == "guard" else "template")
    code = compiled.code
    if compiled.kind != "code" or code is None:
        return None
    module = code_object(code, source)
    if not any(c is getattr(fn, "__code__", None) for c in module.co_consts):
        return None  # not the function built from this code
    tree = ast.parse(code)
    func = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(func, ast.FunctionDef) or not func.body:
        return None
    *setup, last = func.body
    if not (
        isinstance(last, ast.Try)
        and len(last.body) == 1
        and isinstance(last.body[0], ast.Return)
        and last.body[0].value is not None
        and not last.orelse
        and not last.finalbody
        and all(isinstance(x, ast.Assign) for x in setup)
    ):
        return None
    locals_ = {"s", "e"} | {
        n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    read = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and n.id not in locals_}
    env = fn.__globals__
    if not read <= env.keys() or "_fail" not in env:
        return None  # a name the evaluator would not find (NameError): keep the call
    names = {name: env[name] for name in read | {"_fail"}}
    return [ast.unparse(x) for x in setup], ast.unparse(last.body[0].value), names
