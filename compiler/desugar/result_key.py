"""`<step>.result` in a playbook of the `case:`/`vars:` form -> the step's result itself when it
has no `result` key.

NoETL's engine of that form rendered templates with every step result wrapped in a proxy whose
`.data` and `.result` answer the result itself when it has no such key (noetl/noetl
`noetl/core/dsl/render.py`, `TaskResultProxy.__getattr__`, up to commit 9e66e137 of
2026-02-25, which kept only `.data`). Its playbooks rely on it: a postgres step's rows are read
as `validate_results.data.result.command_0.rows`. noetlc keeps `.data` that way for every
playbook (expr/access.py); `.result` only for a playbook in that older form (a step-level
`case:` or `vars:` block), by rewriting the read into a form both engines give the same value:
`(validate_results.data.result | default(validate_results.data)).command_0.rows`. A result
that has a `result` key is read as before. Every rewritten text is reported (NOE420).
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import lexer_env, step_name, steps
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter

# the step-level blocks of the form whose engine passed `.result` through
_OLDER_FORM = ("case", "vars")
_OPEN = ("variable_begin", "block_begin")
_CLOSE = ("variable_end", "block_end")


def run(doc: YMap, reporter: Reporter) -> YMap:
    if not any(key in step for _, step in steps(doc) for key in _OLDER_FORM):
        return doc
    names = frozenset(step_name(step) for _, step in steps(doc))
    workflow = doc.get("workflow")
    assert isinstance(workflow, YSeq)
    new = _rewrite(workflow, names, reporter)
    return doc if new is workflow else doc.with_item("workflow", new)


def _rewrite(node: YNode, names: frozenset[str], reporter: Reporter) -> YNode:
    if isinstance(node, YScalar):
        if not isinstance(node.value, str) or ".result" not in node.value:
            return node
        new = rewrite_text(node.value, names)
        if new == node.value:
            return node
        reporter.report(
            "NOE420",
            "`<step>.result` of a result without a `result` key is the result itself in "
            f"NoETL's engine of the `case:` form: rewritten to `{_excerpt(new)}`",
            node.span,
        )
        return YScalar(new, node.span, node.quoted)
    if isinstance(node, YSeq):
        items = tuple(_rewrite(item, names, reporter) for item in node.items)
        changed = any(a is not b for a, b in zip(items, node.items, strict=True))
        return YSeq(items, node.span) if changed else node
    if isinstance(node, YMap):
        pairs = tuple((k, _rewrite(v, names, reporter)) for k, v in node.items)
        changed = any(a[1] is not b[1] for a, b in zip(pairs, node.items, strict=True))
        return YMap(pairs, node.span) if changed else node
    return node


def rewrite_text(text: str, names: frozenset[str]) -> str:
    """`S.result` and `S.data.result` (S a step name, as a root) inside `{{ }}`/`{% %}` ->
    `(S.result | default(S))`, `(S.data.result | default(S.data))`; the rest byte for byte.
    Text that does not lex is returned unchanged (the expression pass reports it)."""
    if "{{" not in text and "{%" not in text:
        return text
    from jinja2 import TemplateSyntaxError

    try:
        tokens = [(kind, value) for _, kind, value in lexer_env().lex(text)]
    except TemplateSyntaxError:
        return text
    out: list[str] = []
    inside = False
    previous = ""
    i = 0
    while i < len(tokens):
        kind, value = tokens[i]
        if kind in _OPEN:
            inside = True
        elif kind in _CLOSE:
            inside = False
        if inside and kind == "name" and value in names and previous != ".":
            end, prefix = _chain(tokens, i)
            if end:
                out.append(f"({prefix}.result | default({prefix}))")
                previous, i = ")", end
                continue
        out.append(value)
        if kind != "whitespace":
            previous = value
        i += 1
    return "".join(out)


def _chain(tokens: list[tuple[str, str]], i: int) -> tuple[int, str]:
    """From the root at `i`: `.data` any number of times, then `.result` (not called): the
    index after `result` and the text before `.result`; else (0, "")."""
    prefix = tokens[i][1]
    j = i + 1
    while _attribute(tokens, j) == "data":
        prefix += ".data"
        j += 2
    if _attribute(tokens, j) != "result":
        return 0, ""
    if j + 2 < len(tokens) and tokens[j + 2][1] == "(":
        return 0, ""  # a method call, not a key
    return j + 2, prefix


def _attribute(tokens: list[tuple[str, str]], j: int) -> str:
    if j + 1 < len(tokens) and tokens[j][1] == "." and tokens[j + 1][0] == "name":
        return tokens[j + 1][1]
    return ""


def _excerpt(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."
