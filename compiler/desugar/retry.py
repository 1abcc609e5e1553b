"""Step and task `retry:` (specs 000, 002) -> task policy rules with `do: retry`.

Accepted forms: `retry: 3` / `retry: true` (3 tries), a mapping `{max_attempts | attempts,
initial_delay | delay, backoff: none|linear|exponential|fixed, backoff_multiplier, max_delay,
jitter, when}` where `backoff` may also be the object `{type, delay_seconds,
max_delay_seconds, jitter}`, and a list of such mappings or of `{when, then: {...}}` policies, evaluated in
order. A step-level `retry` is inherited by every task of the step that has none of its own
(as older NoETL engines did). The retry rule goes first, so it sees the error before any other rule.
Success-driven policies (`next_call`, `collect`, a per-call `sink`: pagination and polling) become a
`jump` back to the task with `iter.params`; a `sink` is a task after the call (`chains.py`).
"""

from __future__ import annotations

from typing import Any

from noetlc.compiler.desugar import chains
from noetlc.compiler.desugar.common import (
    add_policy_rules,
    as_guard,
    guard_body,
    map_step_list,
    node,
    rewrite_expression,
    rewrite_node,
    step_name,
)
from noetlc.compiler.desugar.recall import collect_write, make_recallable, retarget_self
from noetlc.compiler.shapes import default_task_name, single_task, task_maps, with_task_maps
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter

ON_ERROR = "{{ outcome.status == 'error' }}"
# NoETL's legacy retry waits `initial_delay` (1 s) times `backoff_multiplier` (2) per attempt,
# at most `max_delay` (60 s) (noetl/noetl `noetl/core/runtime/retry.py`, `_calculate_delay`);
# the delay is the rule's default for an exponential backoff (passes/normalize.py)
LEGACY_WAIT: dict[str, Any] = {"backoff": "exponential", "max_delay": 60}


def run(doc: YMap, reporter: Reporter) -> YMap:
    return map_step_list(doc, lambda step: _changed(finish(step, reporter), step))


def _changed(new: YMap, old: YMap) -> YMap | None:
    return None if new is old else new


def finish(step: YMap, reporter: Reporter) -> YMap:
    """`rewrite_step` until no task has a `retry:` left (a policy's `sink` may carry one)."""
    while (new := rewrite_step(step, reporter)) is not None:
        step = new
    return step


def rewrite_step(step: YMap, reporter: Reporter) -> YMap | None:
    """The step with its `retry:` keys rewritten (None when it has none). A rewrite that makes
    a task from a legacy body that may carry its own `retry:` (a `sink:`, a task a `case`
    rule runs, a retry policy's `sink`) calls this on the step it made, so that `retry:` is
    rewritten where the task is made and this pass runs once."""
    step_retry = step.get("retry")
    tasks = task_maps(step)
    if step_retry is None and not any("retry" in t for t in tasks):
        return None
    new_tasks: list[YMap] = []
    for index, task in enumerate(tasks):
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
        recall: set[str] = set()
        sinks: list[YMap] = []
        default = default_task_name(step_name(step), single=single_task(step), index=index)
        task_name = _name_of(task) or default
        following = _name_of(tasks[index + 1]) if index + 1 < len(tasks) else None
        rules = _rules(source, reporter, recall, _Sinks(task_name, sinks, following))
        task = task.without("retry")
        if sinks:  # named first: the sinks read the call's result by this name
            task, task_name = chains.named(task, task_name)
        if recall:
            # success-driven repetition (`next_call`): the task re-runs with new params
            task = make_recallable(task, step_name(step), recall)
            task_name = _name_of(task) or task_name
        rules = [retarget_self(r, task_name) for r in rules]
        task = add_policy_rules(task, rules) if rules else task
        if sinks:
            task = chains.seal(task, following)
            sinks = [retarget_self(t, task_name) for t in sinks]  # type: ignore[misc]
        new_tasks.extend([task, *sinks])
    new = step.without("retry") if step_retry is not None else step
    return with_task_maps(new, new_tasks) if tasks else new


class _Sinks:
    """Where a policy's per-call `sink` tasks go (`then.sink`)."""

    def __init__(self, call: str, out: list[YMap], following: str | None) -> None:
        self.call = call  # the task's name: the sinks read its result by it
        self.out = out
        self.following = following  # the task after the call, if any
        self.taken: set[str] = set()


def _name_of(task: YMap) -> str | None:
    name = task.get("name")
    return str(name.value) if isinstance(name, YScalar) and name.value is not None else None


def _rules(source: YNode, reporter: Reporter, recall: set[str], sinks: _Sinks) -> list[YNode]:
    if isinstance(source, YSeq):
        out: list[YNode] = []
        for item in source.items:
            out.extend(_rules(item, reporter, recall, sinks))
        return out
    if isinstance(source, YScalar):
        if source.value is False or source.value is None:
            return []
        attempts = (
            source.value
            if isinstance(source.value, int) and not isinstance(source.value, bool)
            else 3
        )
        short = {"do": "retry", "attempts": attempts, **LEGACY_WAIT}
        return [node({"when": ON_ERROR, "then": short}, source.span)]
    assert isinstance(source, YMap)
    body = source.get("then") if isinstance(source.get("then"), YMap) else source
    assert isinstance(body, YMap)
    body = _flat_backoff(body)
    if "next_call" in body or "collect" in body or "sink" in body:
        return [_repeat_rule(source, body, reporter, recall, sinks)]
    when = source.get("when") or body.get("when")
    condition = ON_ERROR
    if isinstance(when, YScalar) and when.value not in (None, True):
        condition = "{{ outcome.status == 'error' and (" + _legacy_body(str(when.value)) + ") }}"
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
    elif backoff == "exponential":
        then["max_delay"] = LEGACY_WAIT["max_delay"]
    jitter = _first(body, "jitter")
    if jitter is not None:
        then["jitter"] = jitter
    return [node({"when": as_guard(condition), "then": then}, source.span)]


# The backoff object `{type, delay_seconds, max_delay_seconds, jitter}` -> the flat fields.
_BACKOFF_FIELDS = {
    "type": "backoff",
    "delay_seconds": "delay",
    "delay": "delay",
    "initial_delay": "delay",
    "max_delay_seconds": "max_delay",
    "max_delay": "max_delay",
    "jitter": "jitter",
    "multiplier": "backoff_multiplier",
}


def _flat_backoff(body: YMap) -> YMap:
    backoff = body.get("backoff")
    if not isinstance(backoff, YMap):
        return body
    flat = body.without("backoff")
    for k, v in backoff.items:
        name = _BACKOFF_FIELDS.get(str(k.value))
        if name is not None and name not in flat:
            flat = flat.with_item(name, v, k.span)
    return flat


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
    if kind is None and multiplier is None:
        return "exponential"  # NoETL's default multiplier is 2 (LEGACY_WAIT)
    return "none"


# In retry policies `result` is the call's result, `error` its error, and `response` the
# body: NoETL's pagination helper binds `response` to the result's `data` (an http call's
# body; noetl/noetl `noetl/core/runtime/retry.py`, `_build_next_request`), which
# `outcome.result.data` reads for every tool (`x.data` of a mapping without `data` is `x`).
LEGACY_NAMES = {
    "result": "outcome.result",
    "response": "outcome.result.data",
    "error": "outcome.error",
    "this": "outcome",
}


def _legacy_body(condition: str) -> str:
    return guard_body(rewrite_expression(as_guard(condition), LEGACY_NAMES, {}))


def _repeat_rule(
    source: YMap, body: YMap, reporter: Reporter, recall: set[str], sinks: _Sinks
) -> YNode:
    """A success-driven retry policy (pagination, polling): while its `when` holds after a
    successful call, run the task again with `next_call.params`, at most `max_attempts`
    calls in all, collecting into ctx. A `sink` runs after each such call: the rule jumps to
    the sink task, which jumps back to the call (and counts it)."""
    when = source.get("when") or body.get("when")
    condition = "outcome.status == 'ok'"
    if isinstance(when, YScalar) and when.value not in (None, True):
        condition += " and (" + _legacy_body(str(when.value)) + ")"
    attempts = _attempts(body)
    bound = attempts.value if isinstance(attempts, YScalar) else attempts
    condition += (
        f" and (iter.calls | default(1)) < {int(bound) if isinstance(bound, int | float) else 3}"
    )
    then: dict[str, Any] = {"do": "continue"}
    set_iter: dict[str, Any] = {}
    next_call = body.get("next_call")
    if isinstance(next_call, YMap):
        params = next_call.get("params")
        if isinstance(params, YMap):
            recall.update(str(k.value) for k, _ in params.items)
            set_iter["params"] = rewrite_node(params, LEGACY_NAMES, {})
        set_iter["calls"] = "{{ (iter.calls | default(1)) + 1 }}"
        then = {"do": "jump", "to": "__self__"}
    collect = body.get("collect")
    if isinstance(collect, YMap):
        # NoETL's pagination helper reads `path` in the body (`_extract_page_data`)
        written = collect_write(collect, collect.span, base="response", pages=True)
        if written is None:
            reporter.report(
                "NOE410",
                "`collect` needs `into:` naming a ctx key",
                collect.span,
                hint="write `into: pages` (the list is kept in `ctx.pages`)",
            )
        else:
            key, value = written
            then["set_ctx"] = YMap(((key, rewrite_node(value, LEGACY_NAMES, {})),), collect.span)
    sink = body.get("sink")
    if sink is not None:
        sink_key = body.key_node("sink")
        at = sink_key.span if sink_key is not None else body.span
        name = chains.unique(f"{sinks.call}__sink", sinks.taken)
        task = chains.tool_task(sink, name, {"result": sinks.call, "response": sinks.call})
        if task is None:
            reporter.report(
                "NOE410",
                "the per-call `sink` of a `retry` policy has no tool `kind:`",
                at,
                hint="write `sink: {tool: {kind: postgres, ...}, args: {...}}`",
            )
        else:
            # The sink runs between this call and the next; it counts the call, so
            # `_retry.index` inside it is this call's number.
            repeat = then.get("do") == "jump"
            end: dict[str, Any] = (
                {"do": "jump", "to": "__self__", "set_iter": {"calls": set_iter.pop("calls")}}
                if repeat
                else {"do": "jump", "to": sinks.following}
                if sinks.following
                else {"do": "break"}
            )
            task = chains.with_rules(task, [{"when": chains.ON_OK, "then": end}], at)
            sinks.out.append(task)
            then = {**then, "do": "jump", "to": name}
    if set_iter:
        then["set_iter"] = set_iter
    return node({"when": "{{ " + condition + " }}", "then": then}, source.span)
