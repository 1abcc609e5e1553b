"""Precompiled guards and templates (docs/expressions.md).

`compile_expression(text, mode=...)` parses a playbook expression by the grammar of the Jinja
subset (`jinja_expr.lark`, `grammar_parser.py`), generates the source of a Python function over the scope
(`codegen.py`) and computes static facts (`facts.py`). Modes:

* `guard` — a `when:` condition: the expression with or without `{{ }}`, or a YAML boolean.
  A mixed text guard (`"{{ a }} == b"`) is rendered and its text's truthiness used, as Jinja
  would; the analyzer flags it.
* `template` — a value: exactly one `{{ expr }}` yields the native value, mixed text renders a
  string, text without `{{` is a constant.

Expressions outside the subset (method calls, `{% %}` blocks, unknown filters) go to jinja2's
`ImmutableSandboxedEnvironment` (the slow path, a lint note). `ExpressionPool` collects the
compiled entries of a playbook, deduplicated and in first-use order; `to_data()` is what the
bytecode stores (sources and code hashes, never code), and `noetlc.expr.loader.load_pool`
rebuilds the callables once at load by compiling the sources again.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from noetlc.diagnostics.span import NO_SPAN, Span
from noetlc.expr import codegen, facts, parser
from noetlc.expr.limits import MAX_NESTING
from noetlc.expr.parser import ExpressionSyntaxError, ExprPiece

Mode = Literal["guard", "template"]


class ExpressionUnsafe(Exception):
    """Statically visible sandbox violation (e.g. `x.__class__`), or a non-deterministic
    filter or function (`random`); `hint` says what to write instead, when there is more to
    say than the diagnostic's default hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True, slots=True)
class CompiledExpression:
    """One compiled guard or template, with its static facts."""

    source: str  # as written
    mode: Mode
    kind: Literal["code", "const", "jinja_expression", "jinja_template"]
    code: str | None = None  # generated Python source (kind == "code")
    value: Any = None  # kind == "const"
    jinja: str | None = None  # text for the slow path
    slow_reason: str | None = None
    names: tuple[str, ...] = ()  # free root names
    optional_names: tuple[str, ...] = ()  # names under `| default` / `is defined`
    event_names: tuple[str, ...] = ()  # event names an `event.name` comparison tests
    mentions_event: bool = False
    constant: Any = facts.NOT_CONSTANT  # the folded value when the expression has no names
    text_template: bool = False  # mixed text around `{{ }}` (renders a string)
    # The expression without braces and surrounding blanks for a single expression (so the
    # guards `{{ x > 1 }}` and `x > 1` have the same normalized text), else the source.
    normalized: str = ""
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def fast(self) -> bool:
        return self.kind in ("code", "const")

    @property
    def is_constant(self) -> bool:
        return self.constant is not facts.NOT_CONSTANT

    @property
    def generated(self) -> str | None:
        """What the code generator made: the Python source, or the slow path's jinja text."""
        if self.kind == "code":
            return self.code
        return self.jinja if self.kind != "const" else None

    @property
    def code_sha256(self) -> str | None:
        """The hash a stored pool keeps in place of the code (`noetlc.expr.loader`)."""
        text = self.generated
        return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()

    def stored_entry(self) -> dict[str, Any]:
        """The pool's stored form (plain data): source, mode and the generated code's hash,
        or a constant's value; never code. `noetlc.expr.loader.load_pool` rebuilds it."""
        entry: dict[str, Any] = {"kind": self.kind, "source": self.source, "mode": self.mode}
        if self.span != NO_SPAN:
            entry["where"] = str(self.span)
        if self.kind == "const":
            entry["value"] = self.value
        else:
            entry["sha256"] = self.code_sha256
        return entry

    def to_entry(self) -> dict[str, Any]:
        """The in-process form with the generated code, for `noetlc.expr.runtime.compile_entry`
        (the expression console, constant folding); never stored."""
        entry: dict[str, Any] = {"kind": self.kind, "source": self.source, "mode": self.mode}
        if self.span != NO_SPAN:
            entry["where"] = str(self.span)
        if self.kind == "code":
            entry["code"] = self.code
        elif self.kind == "const":
            entry["value"] = self.value
        else:
            entry["jinja"] = self.jinja
        return entry


_FIELDS = tuple(f.name for f in dataclasses.fields(CompiledExpression) if f.name != "span")


def compile_expression(
    text: Any, *, mode: Mode = "template", span: Span = NO_SPAN
) -> CompiledExpression:
    """Compile one guard or templated value. Raises `ExpressionSyntaxError` / `ExpressionUnsafe`.

    Results are cached per (text, mode): playbooks repeat the same expressions a lot, and
    parsing is the expensive part; the span is set per occurrence."""
    if isinstance(text, str):
        try:
            compiled = _compile_cached(text, mode)
        except RecursionError:  # a backstop: the parser bounds brackets and tree height
            raise ExpressionSyntaxError("the expression is nested too deeply") from None
        return compiled if span == NO_SPAN else _with_span(compiled, span)
    return _compile_uncached(text, mode, span)


_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")


def check_nesting(text: str) -> None:
    """Refuse more than `MAX_NESTING` bracket levels before any parser recurses into them."""
    depth = deepest = 0
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch in _CLOSE:
            depth -= 1
    if deepest > MAX_NESTING:
        raise ExpressionSyntaxError(
            f"the expression nests {deepest} levels of brackets (`{{` included); at most {MAX_NESTING}"
        )


def _with_span(compiled: CompiledExpression, span: Span) -> CompiledExpression:
    """A copy at another occurrence (`dataclasses.replace` re-inspects the fields each call)."""
    return CompiledExpression(**{f: getattr(compiled, f) for f in _FIELDS}, span=span)


@functools.lru_cache(maxsize=65536)
def _compile_cached(text: str, mode: Mode) -> CompiledExpression:
    if "(" in text or "[" in text or "{" in text:
        check_nesting(text)
    return _compile_uncached(text, mode, NO_SPAN)


def _compile_uncached(text: Any, mode: Mode, span: Span) -> CompiledExpression:
    try:
        return _compile_text(text, mode, span)
    except parser.Nondeterministic as exc:  # found by jinja2's parser, wherever it ran
        raise ExpressionUnsafe(str(exc), exc.hint) from None


def _compile_text(text: Any, mode: Mode, span: Span) -> CompiledExpression:
    if not isinstance(text, str):
        if mode == "guard":
            return _constant(
                str(text).lower() if isinstance(text, bool) else str(text), mode, bool(text), span
            )
        return _constant(str(text), mode, text, span)
    if "{{" not in text and "{%" not in text:
        if mode == "guard":  # a condition without braces
            return _compile_single(text, text, mode, span)
        return _constant(text, mode, text, span)  # plain text is data
    # jinja2's lexer decides where expressions start and end (`'}}'` inside a string, `{{-`).
    pieces = parser.split_template(text)  # raises ExpressionSyntaxError
    if pieces is not None:
        expressions = [p for p in pieces if isinstance(p, ExprPiece)]
        if len(expressions) == 1 and all(
            isinstance(p, ExprPiece) or not p.strip() for p in pieces
        ):  # exactly one `{{ expr }}`, blanks around it: the native value
            return _compile_single(text, expressions[0].text, mode, span)
    return _compile_mixed(text, mode, span, pieces)


def _constant(source: str, mode: Mode, value: Any, span: Span) -> CompiledExpression:
    return CompiledExpression(
        source, mode, "const", value=value, constant=value, normalized=source, span=span
    )


def _slow_template(source: str, mode: Mode, span: Span, reason: str) -> CompiledExpression:
    parser.check_jinja_syntax(source)  # only valid Jinja goes to the slow path
    return CompiledExpression(
        source,
        mode,
        "jinja_template",
        jinja=source,
        slow_reason=reason,
        text_template=True,
        normalized=source,
        span=span,
    )


def _compiled_code(
    source: str,
    mode: Mode,
    span: Span,
    code: str,
    names: set[str],
    found: facts.Facts,
    *,
    text: bool,
    normalized: str,
) -> CompiledExpression:
    return CompiledExpression(
        source,
        mode,
        "code",
        code=code,
        names=tuple(sorted(names)),
        optional_names=found.optional_names,
        event_names=found.event_names,
        mentions_event="event" in names,
        constant=facts.fold(code) if not names else facts.NOT_CONSTANT,
        text_template=text,
        normalized=normalized,
        span=span,
    )


def _compile_single(source: str, expr_text: str, mode: Mode, span: Span) -> CompiledExpression:
    gen = codegen.CodeGen()
    try:
        tree = parser.parse_expression(expr_text)  # raises ExpressionSyntaxError
        node = gen.expr(tree)
    except codegen.Unsafe as exc:
        raise ExpressionUnsafe(str(exc)) from None
    except codegen.Unsupported as exc:
        parser.check_jinja_syntax("{{ " + expr_text + " }}")
        return CompiledExpression(
            source,
            mode,
            "jinja_expression",
            jinja=expr_text.strip(),
            slow_reason=str(exc),
            normalized=expr_text.strip(),
            span=span,
        )
    code = codegen.function_source(node, gen.metered)
    found = facts.analyze(tree, gen.names)
    return _compiled_code(
        source,
        mode,
        span,
        code,
        gen.names,
        found,
        text=False,
        normalized=expr_text.strip(),
    )


def _compile_mixed(
    source: str, mode: Mode, span: Span, pieces: list[str | ExprPiece] | None
) -> CompiledExpression:
    if pieces is None:  # `{% %}` blocks or comments: the slow path
        return _slow_template(source, mode, span, "template tags")
    gen = codegen.CodeGen()
    parts: list[Any] = []
    trees = []
    try:
        for piece in pieces:
            if isinstance(piece, str):
                parts.append(piece)
            else:
                tree = parser.parse_expression(piece.text)
                trees.append(tree)
                parts.append(gen.expr(tree))
    except codegen.Unsafe as exc:
        raise ExpressionUnsafe(str(exc)) from None
    except codegen.Unsupported as exc:
        return _slow_template(source, mode, span, str(exc))
    code = codegen.template_source(parts, gen)
    event_names: set[str] = set()
    optional: set[str] = set()
    for tree in trees:
        found = facts.analyze(tree, gen.names)
        event_names.update(found.event_names)
        optional.update(found.optional_names)
    merged = facts.Facts(tuple(sorted(event_names)), tuple(sorted(optional)))
    return _compiled_code(source, mode, span, code, gen.names, merged, text=True, normalized=source)


class ExpressionPool:
    """The compiled expressions of one playbook, deduplicated by (mode, source)."""

    def __init__(self) -> None:
        self.entries: list[CompiledExpression] = []
        self._index: dict[tuple[str, str, str], int] = {}
        self.by_path: dict[tuple[str | int, ...], int] = {}

    def add(self, compiled: CompiledExpression, path: tuple[str | int, ...] | None = None) -> int:
        key = (compiled.mode, type(compiled.source).__name__, compiled.source)
        index = self._index.get(key)
        if index is None:
            index = len(self.entries)
            self.entries.append(compiled)
            self._index[key] = index
        if path is not None:
            self.by_path[path] = index
        return index

    def index_of(self, source: str, mode: Mode) -> int | None:
        return self._index.get((mode, "str", source))

    def to_data(self) -> list[dict[str, Any]]:
        """The stored pool (`CompiledExpression.stored_entry`: no code)."""
        return [e.stored_entry() for e in self.entries]

    def __len__(self) -> int:
        return len(self.entries)


__all__ = [
    "CompiledExpression",
    "ExpressionPool",
    "ExpressionSyntaxError",
    "ExpressionUnsafe",
    "compile_expression",
]
