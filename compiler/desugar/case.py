"""Step-level `case:` (specs 000, 002, 003) -> arcs and task policy rules.

Each rule `{when, then, else}` is classified by the event its condition tests:

* `step.exit` (or no event): its `next` entries (and the shorthand `- step: x`) become arcs of
  the step's router, in rule order, before the structural `next`, whose arcs only fire when no
  case rule did (exclusive: by order; inclusive: by an explicit guard). `set` writes ctx when
  the arc fires. `event.name == 'step.exit'` becomes `'step.done'` (`'loop.done'` for a loop
  step); `result`/`response` become the step's result (`{{ <step> }}`).
* `call.done` / `call.error`: `retry`, `fail`, `skip`, `collect` and `set` become a task
  policy rule of the step's (last) task, where `result`/`response` are `outcome.result`,
  `error` is `outcome.error` and `this` is `outcome`; `event.name == 'call.done'` becomes
  `outcome.status == 'ok'` (`'call.error'` -> `'error'`). A `next` in such a rule becomes an
  arc on `step.done` (`call.done`) or `step.failed` (`call.error`).
* `step.enter`: `set` becomes an init task that writes ctx before the tool runs.

`case_mode: inclusive` makes the router inclusive. Actions that have no canonical meaning
(`call`, `result`, `sink`, `save_item`, `pipe`, `catch`, `finally`) are reported (NOE410) with a
hint and left out.
"""

from __future__ import annotations

import json
import re
from typing import Any

from noetlc.compiler.desugar.common import (
    add_policy_rules,
    guard_body,
    map_step_list,
    node,
    rewrite_expression,
    rewrite_node,
    step_name,
    tool_tasks,
    with_tasks,
)
from noetlc.compiler.diagnostics import Reporter, Span
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq

_EVENT = re.compile(
    r"""event\.name\s*==\s*(['"])(call\.done|call\.error|step\.exit|step\.enter)\1"""
)
_TASK_ACTIONS = {"retry", "fail", "skip", "collect", "set"}
_ROUTE_ACTIONS = {"next", "step"}
_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_UNSUPPORTED = {"call", "result", "sink", "save_item", "pipe", "catch", "finally"}


def run(doc: YMap, reporter: Reporter) -> YMap:
    return map_step_list(doc, lambda step: _step(step, reporter))


def _step(step: YMap, reporter: Reporter) -> YMap | None:
    case = step.get("case")
    key = step.key_node("case")
    if not isinstance(case, YSeq) or key is None:
        return None
    name = step_name(step)
    reporter.report("NOE408", f"step `{name}` uses a legacy `case:` block", key.span)
    done = "loop.done" if "loop" in step else "step.done"
    arc_names = {
        "result": name,
        "response": name,
        "error": "event.data.error",
        "this": "event.data",
    }
    arc_strings = {"step.exit": done, "call.done": done, "call.error": "step.failed"}
    task_names = {
        "result": "outcome.result",
        "response": "outcome.result",
        "error": "outcome.error",
        "this": "outcome",
    }
    inclusive = _setting(step, "case_mode") == "inclusive"
    if inclusive and _setting(step, "next_policy") == "end_step":
        # `end_step`: the first `next` that fires ends the step's routing (spec 000 §2.2),
        # which is what an exclusive router does
        inclusive = False
    rules = [r for r in case.items if isinstance(r, YMap)]
    if _setting(step, "branch_order") == "priority":
        # higher priority first, YAML order among equals (spec 000 §1.3)
        rules.sort(key=lambda r: -_priority(r))

    arcs: list[YNode] = []
    case_guards: list[str] = []
    task_rules: list[YNode] = []
    init_writes: list[tuple[YScalar, YNode]] = []
    recall_params: set[str] = set()
    for rule in rules:
        when = rule.get("when")
        text = _condition_text(when)
        event = _event_of(text)
        for branch, negate in (("then", False), ("else", True)):
            actions = _actions(rule.get(branch))
            if not actions:
                continue
            condition = f"not ({guard_body(text)})" if negate and text else text
            if negate and not text:
                continue
            _rule(
                name, event, condition, actions, rule.span, reporter,
                arcs, case_guards, task_rules, init_writes,
                arc_names, arc_strings, task_names, done, recall_params,
            )  # fmt: skip

    structural = _structural_arcs(step.get("next"))
    router_mode = "inclusive" if inclusive else "exclusive"
    if isinstance(step.get("next"), YMap):
        spec = step.get("next").get("spec")  # type: ignore[union-attr]
        if isinstance(spec, YMap) and isinstance(spec.get("mode"), YScalar) and not inclusive:
            router_mode = str(spec.get("mode").value)  # type: ignore[union-attr]
    for arc in structural:
        if inclusive and case_guards:
            # inclusive: the structural next fires only when no case rule routed
            none_fired = " and ".join(f"not ({g})" for g in case_guards)
            arc = arc.with_item("when", YScalar("{{ " + none_fired + " }}", arc.span))
        if not any(_same_arc(arc, other) for other in arcs):
            arcs.append(arc)

    new = step.without("case", "case_mode", "branch_order", "priority", "next_policy")
    spec = new.get("spec")
    if isinstance(spec, YMap) and any(k in spec for k in _CASE_SETTINGS):
        rest = spec.without(*_CASE_SETTINGS)
        new = new.with_item("spec", rest) if rest.items else new.without("spec")
    if arcs:
        new = new.with_item(
            "next",
            node({"spec": {"mode": router_mode}, "arcs": list(arcs)}, key.span),
        )
    else:
        new = new.without("next")
    tasks = tool_tasks(new)
    if task_rules and tasks:
        last = tasks[-1]
        if recall_params:
            last = make_recallable(last, name, recall_params)
            task_name = str(last.get("name").value)  # type: ignore[union-attr]
            task_rules = [retarget_self(r, task_name) for r in task_rules]
        tasks[-1] = add_policy_rules(last, task_rules)
    if init_writes:
        init = node(
            {
                "name": f"{name}__enter",
                "kind": "noop",
                "spec": {
                    "policy": {
                        "rules": [
                            {
                                "else": {
                                    "then": {
                                        "do": "continue",
                                        "set_ctx": YMap(tuple(init_writes), key.span),
                                    }
                                }
                            }
                        ]
                    }
                },
            },
            key.span,
        )
        tasks.insert(0, init)  # type: ignore[arg-type]
    if tasks:
        new = with_tasks(new, tasks)
    return new


def _rule(
    name: str,
    event: str | None,
    condition: str | None,
    actions: list[tuple[str, YNode, Span]],
    span: Span,
    reporter: Reporter,
    arcs: list[YNode],
    case_guards: list[str],
    task_rules: list[YNode],
    init_writes: list[tuple[YScalar, YNode]],
    arc_names: dict[str, str],
    arc_strings: dict[str, str],
    task_names: dict[str, str],
    done: str,
    recall_params: set[str],
) -> None:
    writes: list[tuple[YScalar, YNode]] = []
    next_entries: list[YNode] = []
    task_then: dict[str, Any] = {}
    for action, value, at in actions:
        if action in _UNSUPPORTED and not (
            action == "call" and isinstance(value, YMap) and "params" in value
        ):
            reporter.report(
                "NOE410",
                f"the case action `{action}` of step `{name}` has no canonical rewrite",
                at,
                hint="express it with task policy rules (`set_iter`/`set_ctx`, `do: jump`); "
                "see docs/migration.md",
            )
        elif action in _ROUTE_ACTIONS:
            entries = value.items if isinstance(value, YSeq) else (value,)
            for entry in entries:
                if isinstance(entry, YScalar):
                    entry = YMap(((YScalar("step", entry.span), entry),), entry.span)
                if isinstance(entry, YMap):
                    next_entries.append(entry)
        elif action == "set":
            if isinstance(value, YMap):
                for k, v in value.items:
                    text = str(k.value)
                    key = text[4:] if text.startswith("ctx.") else text
                    writes.append((YScalar(key, k.span), v))
        elif action == "collect" and isinstance(value, YMap):
            collected = collect_write(value, at)
            if collected is None:
                reporter.report(
                    "NOE410",
                    f"the `collect` of step `{name}` needs `into:` naming a ctx key",
                    at,
                    hint="write `into: pages` (the list is kept in `ctx.pages`)",
                )
            else:
                writes.append(collected)
        elif action in ("retry", "call") and isinstance(value, YMap) and "params" in value:
            # Re-invoking the call with new parameters (pagination): jump back to the task
            # with the parameters in `iter.params`, which the task's arguments read.
            params = value.get("params")
            new_params = rewrite_node(params, task_names, {}) if params is not None else None
            task_then = {"do": "jump", "to": "__self__", "set_iter": {"params": new_params}}
            if isinstance(params, YMap):
                recall_params.update(str(k.value) for k, _ in params.items)
        elif action == "retry":
            task_then = {"do": "retry", **_retry_fields(value)}
        elif action == "fail":
            task_then = {"do": "fail"}
        elif action == "skip":
            task_then = {"do": "continue"}
    if event == "step.enter":
        init_writes.extend(writes)
        if next_entries or task_then:
            reporter.report("NOE410", f"a `step.enter` rule of step `{name}` can only `set`", span)
        return
    task_level = event in ("call.done", "call.error") and (
        task_then or (writes and not next_entries)
    )
    if task_level:
        guard = _task_guard(condition, task_names)
        then: dict[str, Any] = dict(task_then) if task_then else {"do": "continue"}
        if writes:
            then["set_ctx"] = rewrite_node(YMap(tuple(writes), span), task_names, {})
        rule: dict[str, Any] = {"when": guard, "then": then} if guard else {"else": {"then": then}}
        task_rules.append(node(rule, span))
        writes = []
    if not next_entries:
        return
    guard = _arc_guard(condition, arc_names, arc_strings, done)
    if guard:
        case_guards.append(guard_body(guard))
    for entry in next_entries:
        arc = rewrite_node(entry, arc_names, {})
        assert isinstance(arc, YMap)
        if guard:
            arc = arc.with_item("when", YScalar(guard, entry.span))
        if writes:
            arc = arc.with_item("set", rewrite_node(YMap(tuple(writes), span), arc_names, {}))
        arcs.append(arc)


def _condition_text(when: YNode | None) -> str | None:
    if isinstance(when, YScalar):
        if when.value is True or when.value is None:
            return None
        return str(when.value)
    return None


def _event_of(text: str | None) -> str | None:
    if not text:
        return None
    m = _EVENT.search(text)
    return m.group(2) if m else None


def _actions(then: YNode | None) -> list[tuple[str, YNode, Span]]:
    """`then` as (action, value, span): a mapping of actions or a list of one-key mappings."""
    out: list[tuple[str, YNode, Span]] = []
    if isinstance(then, YMap):
        if "step" in then:  # a bare next entry
            return [("next", then, then.span)]
        out.extend((str(k.value), v, k.span) for k, v in then.items)
    elif isinstance(then, YSeq):
        for item in then.items:
            out.extend(_actions(item))
    return out


def _arc_guard(
    condition: str | None, names: dict[str, str], strings: dict[str, str], done: str
) -> str | None:
    if not condition:
        return None
    text = condition if "{{" in condition else "{{ " + condition + " }}"
    rewritten = rewrite_expression(text, names, strings)
    if guard_body(rewritten) == f"event.name == '{done}'":
        return None  # "the step succeeded": an arc without `when` says exactly that
    return rewritten


def _task_guard(condition: str | None, names: dict[str, str]) -> str | None:
    if not condition:
        return None
    text = condition if "{{" in condition else "{{ " + condition + " }}"

    def status(m: re.Match[str]) -> str:
        return (
            "outcome.status == 'ok'" if m.group(2) == "call.done" else "outcome.status == 'error'"
        )

    text = _EVENT.sub(status, text)
    return rewrite_expression(text, names, {})


def collect_write(value: YMap, at: Span) -> tuple[YScalar, YNode] | None:
    """`collect` -> a ctx write; None when `into` does not name a ctx key."""
    source = value.get("from")
    path = value.get("path")
    into = value.get("into")
    mode = value.get("mode") or value.get("strategy")
    if not (isinstance(into, YScalar) and isinstance(into.value, str)):
        return None
    target = into.value[4:] if into.value.startswith("ctx.") else into.value
    if not _IDENTIFIER.match(target):
        return None
    if isinstance(source, YScalar):
        expr = str(source.value)
        expr = guard_body(expr) if "{{" in expr else expr
    elif isinstance(path, YScalar):
        expr = f"result.{path.value}"  # `path` is relative to the call's result
    else:
        expr = "result"
    extend = isinstance(mode, YScalar) and mode.value == "extend"
    item = f"({expr})" if extend else f"[{expr}]"
    return YScalar(target, at), YScalar(
        "{{ (ctx." + target + " | default([])) + " + item + " }}", at
    )


def _retry_fields(value: YNode) -> dict[str, Any]:
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


def _structural_arcs(nxt: YNode | None) -> list[YMap]:
    if isinstance(nxt, YScalar) and nxt.value is not None:
        return [YMap(((YScalar("step", nxt.span), nxt),), nxt.span)]
    if isinstance(nxt, YSeq):
        out = []
        for entry in nxt.items:
            if isinstance(entry, YScalar):
                out.append(YMap(((YScalar("step", entry.span), entry),), entry.span))
            elif isinstance(entry, YMap):
                out.append(entry)
        return out
    if isinstance(nxt, YMap):
        arcs = nxt.get("arcs")
        return [a for a in arcs.items if isinstance(a, YMap)] if isinstance(arcs, YSeq) else []
    return []


def _same_arc(a: YMap, b: YNode) -> bool:
    return (
        isinstance(b, YMap)
        and a.get("step") == b.get("step")
        and "when" not in a
        and "when" not in b
    )


def retarget_self(rule: YNode, task_name: str) -> YNode:
    """Point `to: __self__` of a re-invocation rule at the task's real name."""
    if isinstance(rule, YMap):
        return YMap(tuple((k, retarget_self(v, task_name)) for k, v in rule.items), rule.span)
    if isinstance(rule, YSeq):
        return YSeq(tuple(retarget_self(v, task_name) for v in rule.items), rule.span)
    if rule.value == "__self__":
        return YScalar(task_name, rule.span)
    return rule


def make_recallable(task: YMap, step: str, keys: set[str]) -> YMap:
    """Name the task and make its `params` read `iter.params` when a re-invocation set them."""
    if "name" not in task:
        task = YMap(
            ((YScalar("name", task.span), YScalar(f"{step}_task", task.span)), *task.items),
            task.span,
        )
    spec = task.get("spec")
    under_spec = "params" not in task and isinstance(spec, YMap) and "params" in spec
    holder = spec if under_spec and isinstance(spec, YMap) else task
    params = holder.get("params")
    original = params if isinstance(params, YMap) else YMap((), task.span)
    out = list(original.items)
    present = {str(k.value) for k, _ in out}
    out = [(k, YScalar(_param_template(str(k.value), v), v.span)) for k, v in out]
    out.extend(
        (YScalar(k, task.span), YScalar(_param_template(k, None), task.span))
        for k in sorted(keys - present)
    )
    holder = holder.with_item("params", YMap(tuple(out), original.span))
    return task.with_item("spec", holder) if under_spec else holder


def _param_template(key: str, original: YNode | None) -> str:
    if isinstance(original, YScalar) and isinstance(original.value, str) and "{{" in original.value:
        fallback = "(" + guard_body(original.value) + ")"
    elif isinstance(original, YScalar):
        fallback = json.dumps(original.value)
    else:
        fallback = "none"
    return "{{ iter.params." + key + " if iter.params is defined else " + fallback + " }}"


_CASE_SETTINGS = ("case_mode", "branch_order", "next_policy")


def _setting(step: YMap, key: str) -> str | None:
    """A case setting, written on the step or (spec 000) under its `spec:`."""
    spec = step.get("spec")
    for holder in (step, spec if isinstance(spec, YMap) else None):
        if holder is not None:
            value = holder.get(key)
            if isinstance(value, YScalar) and isinstance(value.value, str):
                return value.value
    return None


def _priority(rule: YMap) -> float:
    value = rule.get("priority")
    if (
        isinstance(value, YScalar)
        and isinstance(value.value, int | float)
        and not isinstance(value.value, bool)
    ):
        return float(value.value)
    return 0.0
