"""Pass `templates`: every `{{ … }}` in the document parses as Jinja, errors at the scalar.

Runs on the canonical document, so it sees every string a later stage will evaluate
(conditions, tool arguments, `set_ctx` values, arc args, loop items, the workload). Syntax is
checked with jinja2's own parser, so what passes here is what Jinja accepts; the expression
compiler (issue 3) then turns each template into a Python code object.
"""

from __future__ import annotations

import jinja2

from noetlc.compiler.diagnostics import Span
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.ynodes import YNode, YScalar, YSeq

_ENV = jinja2.Environment()
_CODE_KEYS = frozenset({"code", "command", "commands", "cmds", "query", "sql", "claim"})


def run(unit: CompilationUnit) -> None:
    doc = unit.canonical if unit.canonical is not None else unit.document
    if doc is None:
        return
    for scalar, is_condition in _template_scalars(doc):
        _check(scalar, is_condition, unit)


def _template_scalars(node: YNode, key: str = "") -> list[tuple[YScalar, bool]]:
    out: list[tuple[YScalar, bool]] = []
    if isinstance(node, YScalar):
        if isinstance(node.value, str) and (
            key == "when" or "{{" in node.value or "{%" in node.value
        ):
            out.append((node, key == "when"))
    elif isinstance(node, YSeq):
        for item in node.items:
            out.extend(_template_scalars(item, ""))
    else:
        for k, v in node.items:
            out.extend(_template_scalars(v, str(k.value)))
    return out


def _check(scalar: YScalar, is_condition: bool, unit: CompilationUnit) -> None:
    text = str(scalar.value)
    if is_condition and "{{" not in text and "{%" not in text:
        text = "{{ " + text + " }}"  # `when` accepts the bare expression
    try:
        _ENV.parse(text)
    except jinja2.TemplateSyntaxError as exc:
        line_in_text = max(1, exc.lineno or 1)
        span = scalar.span
        if not scalar.quoted and line_in_text > 1:
            span = Span(span.file, span.line + line_in_text - 1, 1, span.line + line_in_text - 1, 2)
        unit.reporter.report(
            "NOE301",
            f"template syntax error: {exc.message}",
            span,
            hint="check the braces and the expression inside `{{ … }}`",
        )
