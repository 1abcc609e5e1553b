"""Helpers shared by the desugaring passes: walking steps and tasks, rewriting expressions.

Expressions are rewritten at the token level with jinja2's own lexer, so everything the
author wrote (spacing, quoting, the parts not rewritten) is kept byte for byte.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq, from_python
from noetlc.diagnostics.report import Reporter, Span

if TYPE_CHECKING:
    import jinja2

Pass = Callable[[YMap, Reporter], YMap]


@functools.lru_cache(maxsize=1)
def lexer_env() -> jinja2.Environment:
    """jinja2's lexer, made the first time a `{{ }}` expression is rewritten (importing this
    module does not import jinja2)."""
    import jinja2

    return jinja2.Environment(keep_trailing_newline=True)  # the text is kept byte for byte


def steps(doc: YMap) -> Iterator[tuple[int, YMap]]:
    workflow = doc.get("workflow")
    if isinstance(workflow, YSeq):
        for i, step in enumerate(workflow.items):
            if isinstance(step, YMap):
                yield i, step


def replace_steps(doc: YMap, new_steps: dict[int, YMap]) -> YMap:
    if not new_steps:
        return doc
    workflow = doc.get("workflow")
    assert isinstance(workflow, YSeq)
    items = tuple(new_steps.get(i, item) for i, item in enumerate(workflow.items))
    return doc.with_item("workflow", YSeq(items, workflow.span))


def map_step_list(doc: YMap, fn: Callable[[YMap], YMap | None]) -> YMap:
    """Apply `fn` to every step mapping; it returns a replacement or None (unchanged)."""
    changed: dict[int, YMap] = {}
    for i, step in steps(doc):
        new = fn(step)
        if new is not None:
            changed[i] = new
    return replace_steps(doc, changed)


def step_name(step: YMap) -> str:
    name = step.get("step")
    return str(name.value) if isinstance(name, YScalar) else "?"


def key_span(node: YMap, key: str) -> Span:
    k = node.key_node(key)
    return k.span if k is not None else node.span


def add_policy_rules(task: YMap, rules: list[YNode], *, first: bool = True) -> YMap:
    """Put rules into `task.spec.policy.rules` (before the existing ones when `first`)."""
    spec = task.get("spec")
    spec = spec if isinstance(spec, YMap) else YMap((), task.span)
    policy = spec.get("policy")
    policy = policy if isinstance(policy, YMap) else YMap((), task.span)
    existing = policy.get("rules")
    old = list(existing.items) if isinstance(existing, YSeq) else []
    merged = [*rules, *old] if first else [*old, *rules]
    policy = policy.with_item("rules", YSeq(tuple(merged), task.span))
    return task.with_item("spec", spec.with_item("policy", policy))


def rewrite_expression(text: str, names: dict[str, str], strings: dict[str, str]) -> str:
    """Rename root names (not attributes) and replace string literals inside `{{ }}`.

    `names` maps a root name to replacement text (e.g. `result` -> `outcome.result`);
    `strings` maps a literal's value to a new value (e.g. `step.exit` -> `step.done`).
    Text outside `{{ }}` is left alone. Text that does not lex is returned unchanged (the
    expression pass reports it).
    """
    if "{{" not in text:
        return text
    if not any(name in text for name in names) and not (strings and ("'" in text or '"' in text)):
        return text  # no token could be renamed or replaced: no lexer (nor jinja2) needed
    from jinja2 import TemplateSyntaxError

    try:
        tokens = list(lexer_env().lex(text))
    except TemplateSyntaxError:
        return text
    out: list[str] = []
    previous = ""
    inside = False
    for _, kind, value in tokens:
        if kind == "variable_begin":
            inside = True
        elif kind == "variable_end":
            inside = False
        if inside and kind == "name" and value in names and previous != ".":
            out.append(names[value])
        elif inside and kind == "string" and _unquote(value) in strings:
            quote = value[0]
            out.append(quote + strings[_unquote(value)] + quote)
        else:
            out.append(value)
        if kind != "whitespace":
            previous = value
    return "".join(out)


def rewrite_node(node: YNode, names: dict[str, str], strings: dict[str, str]) -> YNode:
    """`rewrite_expression` on every string scalar below `node` (spans kept)."""
    if isinstance(node, YScalar):
        if isinstance(node.value, str):
            new = rewrite_expression(node.value, names, strings)
            if new != node.value:
                return YScalar(new, node.span, node.quoted)
        return node
    if isinstance(node, YSeq):
        return YSeq(tuple(rewrite_node(i, names, strings) for i in node.items), node.span)
    return YMap(tuple((k, rewrite_node(v, names, strings)) for k, v in node.items), node.span)


def as_guard(text: str) -> str:
    """A `when:` in braces form (so it can be combined and rewritten)."""
    stripped = text.strip()
    if stripped.startswith("{{") and stripped.endswith("}}") and stripped.count("{{") == 1:
        return stripped
    return "{{ " + stripped + " }}"


def guard_body(text: str) -> str:
    stripped = as_guard(text)
    return stripped[2:-2].strip()


def condition_expression(text: str) -> str:
    """A `when:` as one expression: the inside of `{{ e }}`, or, for text mixed with
    templates (`"{{ x }} == push"`, which a condition reads as its rendered text), the
    expression that renders that text (`(x) ~ ' == push'`), so it can be negated or combined."""
    stripped = text.strip()
    if stripped.startswith("{{") and stripped.endswith("}}") and stripped.count("{{") == 1:
        return stripped[2:-2].strip()
    if "{{" not in stripped:
        return stripped
    parts: list[str] = []
    rest = stripped
    while rest:
        start = rest.find("{{")
        end = rest.find("}}", start + 2) if start >= 0 else -1
        if start < 0 or end < 0:
            parts.append(repr(rest))
            break
        if start > 0:
            parts.append(repr(rest[:start]))
        parts.append(f"(({rest[start + 2 : end].strip()}) | string)")
        rest = rest[end + 2 :]
    return " ~ ".join(parts)


def node(value: object, span: Span) -> YNode:
    return from_python(value, span)


def _unquote(token: str) -> str:
    return token[1:-1] if len(token) >= 2 and token[0] in "'\"" else token
