"""The rule-level helpers of the legacy `case` rewrite (`block.py`): reading a rule's
condition, event and actions, and rewriting a condition for where it is evaluated (an arc, a
task policy, a `step.enter` admission, an inclusive-rules gate)."""

from __future__ import annotations

import re
from typing import Any

from noetlc.compiler.desugar.common import guard_body, rewrite_expression
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter, Span
from noetlc.ir.events import LegacyEventName

# `event.name == '<a legacy name>'` in a rule's condition
EVENT = re.compile(
    r"""event\.name\s*==\s*(['"])("""
    + "|".join(re.escape(name.value) for name in LegacyEventName)
    + r""")\1"""
)
# NoETL's case evaluator bound `response`, `result` and `this` to the tool's response
# (noetl/noetl `noetl/worker/case_evaluator.py` `build_eval_context`, before commit 3ae90a10)
TASK_NAMES = {
    "result": "outcome.result",
    "response": "outcome.result",
    "error": "outcome.error",
    "this": "outcome.result",
}


def gate_guard(condition: str | None, names: dict[str, str]) -> str | None:
    if not condition:
        return None
    text = condition if "{{" in condition else "{{ " + condition + " }}"
    text = EVENT.sub(
        lambda m: "true" if m.group(2) == LegacyEventName.CALL_DONE.value else "false", text
    )
    text = rewrite_expression(text, names, {})
    return None if guard_body(text) == "true" else text


def directive_fields(then: dict[str, Any]) -> dict[str, Any]:
    """What a re-invocation carries to the chain's jump (its `set_iter`)."""
    return {k: v for k, v in then.items() if k == "set_iter"}


def recall_params(value: YNode) -> YNode | None:
    """The new parameters of a re-invocation: `params`, or `args.params` (older form)."""
    if not isinstance(value, YMap):
        return None
    args = value.get("args")
    if "params" not in value and isinstance(args, YMap) and "params" in args:
        return args.get("params")
    return value.get("params")


def is_task(value: YNode) -> bool:
    return isinstance(value, YMap) and ("tool" in value or "kind" in value)


def refuse(reporter: Reporter, what: str, at: Span, hint: str | None = None) -> None:
    reporter.report(
        "NOE410",
        f"{what} has no canonical rewrite",
        at,
        hint=hint
        or "express it with tasks and task policy rules (`do: jump`, `set_iter`, `set_ctx`); "
        "see docs/migration.md",
    )


def condition_text(when: YNode | None) -> str | None:
    if isinstance(when, YScalar):
        if when.value is True or when.value is None:
            return None
        return str(when.value)
    return None


def event_of(text: str | None) -> str | None:
    if not text:
        return None
    m = EVENT.search(text)
    return m.group(2) if m else None


def actions(then: YNode | None) -> list[tuple[str, YNode, Span]]:
    """`then` as (action, value, span): a mapping of actions or a list of one-key mappings."""
    out: list[tuple[str, YNode, Span]] = []
    if isinstance(then, YMap):
        if "step" in then:  # a bare next entry
            return [("next", then, then.span)]
        out.extend((str(k.value), v, k.span) for k, v in then.items)
    elif isinstance(then, YSeq):
        for item in then.items:
            out.extend(actions(item))
    return out


def arc_guard(
    condition: str | None, names: dict[str, str], strings: dict[str, str], done: str
) -> str | None:
    if not condition:
        return None
    text = condition if "{{" in condition else "{{ " + condition + " }}"
    rewritten = rewrite_expression(text, names, strings)
    if guard_body(rewritten) == f"event.name == '{done}'":
        return None  # "the step succeeded": an arc without `when` says exactly that
    return rewritten


def enter_guard(condition: str | None) -> str | None:
    """A `step.enter` rule's condition at admission: the event test is true there."""
    if not condition:
        return None
    text = condition if "{{" in condition else "{{ " + condition + " }}"
    text = EVENT.sub(
        lambda m: "true" if m.group(2) == LegacyEventName.STEP_ENTER.value else "false", text
    )
    return None if guard_body(text) == "true" else text


def task_guard(
    condition: str | None, names: dict[str, str] = TASK_NAMES, *, any_outcome: bool = False
) -> str | None:
    if not condition:
        return None
    text = condition if "{{" in condition else "{{ " + condition + " }}"

    def status(m: re.Match[str]) -> str:
        if m.group(2) == LegacyEventName.CALL_DONE.value:
            return "outcome.status in ['ok', 'error']" if any_outcome else "outcome.status == 'ok'"
        return "outcome.status == 'error'"

    text = EVENT.sub(status, text)
    return rewrite_expression(text, names, {})


def retry_fields(value: YNode) -> dict[str, Any]:
    if not isinstance(value, YMap):
        return {"attempts": 3}
    fields: dict[str, Any] = {}
    attempts = value.get("max_attempts") or value.get("attempts")
    fields["attempts"] = attempts if attempts is not None else 3
    delay = value.get("initial_delay") or value.get("delay")
    if delay is not None:
        fields["delay"] = delay
    multiplier = value.get("backoff_multiplier")
    if (
        isinstance(multiplier, YScalar)
        and isinstance(multiplier.value, int | float)
        and multiplier.value > 1
    ):
        fields["backoff"] = "exponential"
    max_delay = value.get("max_delay")
    if max_delay is not None:
        fields["max_delay"] = max_delay
    return fields


CASE_SETTINGS = ("case_mode", "branch_order", "next_policy")


def setting(step: YMap, key: str) -> str | None:
    """A case setting, written on the step or (older NoETL engines) under its `spec:`."""
    spec = step.get("spec")
    for holder in (step, spec if isinstance(spec, YMap) else None):
        if holder is not None:
            value = holder.get(key)
            if isinstance(value, YScalar) and isinstance(value.value, str):
                return value.value
    return None


def priority(rule: YMap) -> float:
    value = rule.get("priority")
    if (
        isinstance(value, YScalar)
        and isinstance(value.value, int | float)
        and not isinstance(value.value, bool)
    ):
        return float(value.value)
    return 0.0
