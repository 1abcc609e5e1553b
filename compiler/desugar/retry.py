"""Step and task `retry:` (specs 000, 002) -> task policy rules with `do: retry`.

Accepted forms: `retry: 3` / `retry: true` (3 tries), a mapping `{max_attempts | attempts,
initial_delay | delay, backoff: none|linear|exponential|fixed, backoff_multiplier, max_delay,
jitter, when}`, and a list of such mappings or of `{when, then: {...}}` policies, evaluated in
order. A step-level `retry` is inherited by every task of the step that has none of its own
(spec 000 §4). The retry rule goes first, so it sees the error before any other rule;
`next_call` pagination inside retry policies cannot be rewritten mechanically and is an error.
"""

from __future__ import annotations

from typing import Any

from noetlc.compiler.desugar.common import (
    add_policy_rules,
    as_guard,
    guard_body,
    map_step_list,
    node,
    step_name,
    tool_tasks,
    with_tasks,
)
from noetlc.compiler.diagnostics import Reporter
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq

ON_ERROR = "{{ outcome.status == 'error' }}"


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        step_retry = step.get("retry")
        tasks = tool_tasks(step)
        if step_retry is None and not any("retry" in t for t in tasks):
            return None
        new_tasks = []
        for task in tasks:
            own = task.get("retry")
            source = own if own is not None else step_retry
            key = task.key_node("retry") if own is not None else step.key_node("retry")
            if source is None or key is None:
                new_tasks.append(task)
                continue
            reporter.report(
                "NOE405",
                f"`retry:` in step `{step_name(step)}` is a task policy rule now",
                key.span,
            )
            rules = _rules(source, reporter)
            task = task.without("retry")
            new_tasks.append(add_policy_rules(task, rules) if rules else task)
        new = step.without("retry") if step_retry is not None else step
        return with_tasks(new, new_tasks) if tasks else new

    return map_step_list(doc, fix)


def _rules(source: YNode, reporter: Reporter) -> list[YNode]:
    if isinstance(source, YSeq):
        out: list[YNode] = []
        for item in source.items:
            out.extend(_rules(item, reporter))
        return out
    if isinstance(source, YScalar):
        if source.value is False or source.value is None:
            return []
        attempts = (
            source.value
            if isinstance(source.value, int) and not isinstance(source.value, bool)
            else 3
        )
        return [
            node({"when": ON_ERROR, "then": {"do": "retry", "attempts": attempts}}, source.span)
        ]
    assert isinstance(source, YMap)
    body = source.get("then") if isinstance(source.get("then"), YMap) else source
    assert isinstance(body, YMap)
    if "next_call" in body or "collect" in body:
        key = body.key_node("next_call") or body.key_node("collect")
        reporter.report(
            "NOE410",
            "retry-driven pagination (`next_call`/`collect`) cannot be rewritten automatically",
            key.span if key is not None else body.span,
            hint="write the loop as tasks: fetch, then a policy rule with `do: jump` back to "
            "the fetch task while more pages remain (see docs/migration.md)",
        )
        return []
    when = source.get("when") or body.get("when")
    condition = ON_ERROR
    if isinstance(when, YScalar) and when.value not in (None, True):
        condition = "{{ outcome.status == 'error' and (" + guard_body(str(when.value)) + ") }}"
    then: dict[str, Any] = {"do": "retry", "attempts": _attempts(body)}
    delay = _first(body, "initial_delay", "delay")
    if delay is not None:
        then["delay"] = delay
    backoff = _backoff(body)
    if backoff != "none":
        then["backoff"] = backoff
    max_delay = _first(body, "max_delay")
    if max_delay is not None:
        then["max_delay"] = max_delay
    jitter = _first(body, "jitter")
    if jitter is not None:
        then["jitter"] = jitter
    return [node({"when": as_guard(condition), "then": then}, source.span)]


def _first(body: YMap, *keys: str) -> Any:
    for key in keys:
        value = body.get(key)
        if isinstance(value, YScalar) and value.value is not None:
            return value
    return None


def _attempts(body: YMap) -> Any:
    value = _first(body, "max_attempts", "attempts", "max_retries")
    return value if value is not None else 3


def _backoff(body: YMap) -> str:
    kind = body.get("backoff")
    if isinstance(kind, YScalar) and isinstance(kind.value, str):
        return {"fixed": "none", "constant": "none"}.get(kind.value, kind.value)
    multiplier = body.get("backoff_multiplier")
    if (
        isinstance(kind, YScalar)
        and isinstance(kind.value, int | float)
        and not isinstance(kind.value, bool)
    ):
        multiplier = kind
    if (
        isinstance(multiplier, YScalar)
        and isinstance(multiplier.value, int | float)
        and multiplier.value > 1
    ):
        return "exponential"
    return "none"
