"""Tasks that legacy rules run after a call: per-call sinks, named tasks, `result` (the legacy
`case` and retry forms).

A legacy rule that fires after a call may run more tool calls (a `sink`, a named task such as
`save_item`) or set the step's result. Canonically these are tasks placed right after the call
in the pipeline — a *chain* — that the call's policy rule jumps to. The call stops falling
through into them (`seal`): where it used to continue past the end of the pipeline it now
breaks (or jumps to the task that used to follow it), so the chains only run when their rule
fired. A chain ends by jumping back to the call (re-invocation), failing, breaking with the
result it computed, or jumping to `<step>__done`, a noop that passes the call's result on so
the step's result stays the call's.

Generated task names contain `__` (`<step>__sink`, `<step>__result`, `<step>__done`).
"""

from __future__ import annotations

import re
from typing import Any

from noetlc.compiler.desugar.common import (
    as_guard,
    guard_body,
    node,
    rewrite_node,
)
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Span

ON_OK = "{{ outcome.status == 'ok' }}"
_RETRY_VARS = re.compile(r"\b_retry\.(index|count)\b")


def is_generated(task: YMap) -> bool:
    name = task.get("name")
    return isinstance(name, YScalar) and "__" in str(name.value)


def named(task: YMap, default: str) -> tuple[YMap, str]:
    """The task with a `name:` (`default` when it had none) and that name."""
    name = task.get("name")
    if isinstance(name, YScalar) and name.value is not None:
        return task, str(name.value)
    task = YMap(((YScalar("name", task.span), YScalar(default, task.span)), *task.items), task.span)
    return task, default


def unique(name: str, taken: set[str]) -> str:
    """`name`, or `name_2`, `name_3`, … when taken; the result is added to `taken`."""
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    taken.add(candidate)
    return candidate


def tool_task(value: YNode, name: str, names: dict[str, str]) -> YMap | None:
    """A `sink:` / named-task body as a canonical task called `name`; None without a kind.

    Accepted: `{tool: {kind, ...}, args: ..., retry: ...}` or the tool's
    fields directly (`{kind: postgres, ...}`, like a step-level sink). Templates in it read the
    call's result through `names` (e.g. `response` -> the call task by name).
    """
    if not isinstance(value, YMap):
        return None
    tool = value.get("tool")
    if isinstance(tool, YMap) and "kind" in tool:
        fields = [*tool.items, *((k, v) for k, v in value.items if k.value != "tool")]
    elif "kind" in value:
        fields = list(value.items)
    else:
        return None
    fields = [(k, v) for k, v in fields if k.value != "name"]
    body = rewrite_node(YMap(tuple(fields), value.span), names, {})
    assert isinstance(body, YMap)
    body = rewrite_retry_vars(body)
    assert isinstance(body, YMap)
    return YMap(((YScalar("name", value.span), YScalar(name, value.span)), *body.items), value.span)


def rewrite_retry_vars(value: YNode) -> YNode:
    """`_retry.index` / `_retry.count` (the 1-based call number) -> the call
    counter the pagination rewrite keeps in `iter.calls`."""
    if isinstance(value, YScalar):
        if isinstance(value.value, str) and "_retry." in value.value:
            text = _RETRY_VARS.sub("(iter.calls | default(1))", value.value)
            return YScalar(text, value.span, value.quoted)
        return value
    if isinstance(value, YSeq):
        return YSeq(tuple(rewrite_retry_vars(v) for v in value.items), value.span)
    return YMap(tuple((k, rewrite_retry_vars(v)) for k, v in value.items), value.span)


def result_task(value: YNode, name: str, names: dict[str, str], span: Span) -> YMap:
    """The `result:` action as a noop whose input is the new result (`{from: expr}` or a
    value)."""
    source = value.get("from") if isinstance(value, YMap) and "from" in value else None
    if isinstance(source, YScalar):
        text = str(source.value)
        given: YNode = YScalar(as_guard(text) if "{{" not in text else text, source.span)
    else:
        given = value
    result = rewrite_node(given, names, {})
    return YMap(
        (
            (YScalar("name", span), YScalar(name, span)),
            (YScalar("kind", span), YScalar("noop", span)),
            (YScalar("input", span), result),
        ),
        span,
    )


def pass_through(name: str, call: str, span: Span) -> YMap:
    """`<step>__done`: ends a chain with the call's result as the step's result."""
    return node({"name": name, "kind": "noop", "input": "{{ " + call + " }}"}, span)  # type: ignore[return-value]


def with_rules(task: YMap, rules: list[dict[str, Any]], span: Span) -> YMap:
    """Append policy rules to a generated task."""
    if not rules:
        return task
    spec = task.get("spec")
    spec = spec if isinstance(spec, YMap) else YMap((), span)
    policy = spec.get("policy")
    policy = policy if isinstance(policy, YMap) else YMap((), span)
    existing = policy.get("rules")
    old = list(existing.items) if isinstance(existing, YSeq) else []
    new = [node(r, span) for r in rules]
    policy = policy.with_item("rules", YSeq((*old, *new), span))
    return task.with_item("spec", spec.with_item("policy", policy))


def seal(task: YMap, after: str | None) -> YMap:
    """Stop `task` from falling through into the chains placed after it.

    Its `do: continue` rules, and an ok outcome no rule matched, go where `continue` went
    before the chains were inserted: to the task named `after`, or the end of the pipeline
    (`break`, which keeps this task's result as the step's result).
    """
    target: dict[str, Any] = {"do": "break"} if after is None else {"do": "jump", "to": after}
    spec = task.get("spec")
    policy = spec.get("policy") if isinstance(spec, YMap) else None
    rules = policy.get("rules") if isinstance(policy, YMap) else None
    items = list(rules.items) if isinstance(rules, YSeq) else []
    sealed = [_retarget_continue(r, target) for r in items]
    if not any(_catches_ok(r) for r in items):
        sealed.append(node({"when": ON_OK, "then": target}, task.span))
    spec_map = spec if isinstance(spec, YMap) else YMap((), task.span)
    policy_map = policy if isinstance(policy, YMap) else YMap((), task.span)
    span = rules.span if isinstance(rules, YSeq) else task.span
    policy_map = policy_map.with_item("rules", YSeq(tuple(sealed), span))
    return task.with_item("spec", spec_map.with_item("policy", policy_map))


def _catches_ok(rule: YNode) -> bool:
    """An `else`, or a rule whose condition is exactly "the task succeeded"."""
    if not isinstance(rule, YMap):
        return False
    when = rule.get("when")
    return "else" in rule or (
        isinstance(when, YScalar)
        and isinstance(when.value, str)
        and guard_body(when.value) == guard_body(ON_OK)
    )


def _retarget_continue(rule: YNode, target: dict[str, Any]) -> YNode:
    if not isinstance(rule, YMap):
        return rule
    out: list[tuple[YScalar, YNode]] = []
    for key, value in rule.items:
        if key.value in ("then", "else") and isinstance(value, YMap):
            value = _retarget_then(value, target)
        out.append((key, value))
    return YMap(tuple(out), rule.span)


def _retarget_then(then: YMap, target: dict[str, Any]) -> YMap:
    if "then" in then and isinstance(then.get("then"), YMap):  # `else: {then: {...}}`
        inner = then.get("then")
        assert isinstance(inner, YMap)
        return then.with_item("then", _retarget_then(inner, target))
    do = then.get("do")
    if not (isinstance(do, YScalar) and do.value == "continue"):
        return then
    new = then.with_item("do", YScalar(target["do"], do.span, do.quoted))
    if "to" in target:
        new = new.with_item("to", YScalar(target["to"], do.span))
    return new
