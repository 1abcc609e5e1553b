"""Step-level `case:` (specs 000, 002, 003) -> arcs, task policy rules and task chains.

Each rule `{when, then, else}` is classified by the event its condition tests:

* `step.exit` (or no event, when the rule routes): its `next` entries (and the shorthand
  `- step: x`) become arcs of the step's router, in rule order, before the structural `next`,
  whose arcs only fire when no case rule did (exclusive: by order; inclusive: by an explicit
  guard). `set` writes ctx when the arc fires. `event.name == 'step.exit'` becomes
  `'step.done'` (`'loop.done'` for a loop step); `result`/`response` become the step's result
  (`{{ <step> }}`).
* `call.done` / `call.error` (or no event, when the rule only acts on the call): `retry`,
  `fail`, `skip`, `collect` and `set` become a task policy rule of the step's call task, where
  `result`/`response` are `outcome.result`, `error` is `outcome.error` and `this` is `outcome`;
  `event.name == 'call.done'` becomes `outcome.status == 'ok'` (`'call.error'` -> `'error'`).
  A `next` in such a rule becomes an arc on `step.done` (`call.done`) or `step.failed`.
  `sink`, named tasks (`save_item: {tool: ...}`) and `result` become a chain of tasks after
  the call that the rule jumps to (`chains.py`).
* `call: {params}` re-invokes the call (a `jump` back with `iter.params`); `call: {step, args}`
  starts that step besides the routing: an extra arc, with the router made inclusive and
  the first-match order of the other arcs kept by explicit guards (`router.py`).
* `step.enter`: `set` becomes ctx writes of the step's admission (`spec.policy.admit`), made
  once per step run before the tool (and before a loop's first iteration).

Actions that have no canonical meaning (`pipe`, `catch`, `finally`; tasks or `result` after the
step ended or after a failed call) are reported (NOE410) with a hint and left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noetlc.compiler.desugar import chains, retry
from noetlc.compiler.desugar.case import next_action, router
from noetlc.compiler.desugar.case.rules import (
    CASE_SETTINGS as _CASE_SETTINGS,
)
from noetlc.compiler.desugar.case.rules import (
    TASK_NAMES as _TASK_NAMES,
)
from noetlc.compiler.desugar.case.rules import (
    actions as _actions,
)
from noetlc.compiler.desugar.case.rules import (
    arc_guard as _arc_guard,
)
from noetlc.compiler.desugar.case.rules import (
    condition_text as _condition_text,
)
from noetlc.compiler.desugar.case.rules import (
    directive_fields as _directive_fields,
)
from noetlc.compiler.desugar.case.rules import (
    enter_guard as _enter_guard,
)
from noetlc.compiler.desugar.case.rules import (
    event_of as _event_of,
)
from noetlc.compiler.desugar.case.rules import (
    gate_guard as _gate_guard,
)
from noetlc.compiler.desugar.case.rules import (
    is_task as _is_task,
)
from noetlc.compiler.desugar.case.rules import (
    priority as _priority,
)
from noetlc.compiler.desugar.case.rules import (
    recall_params as _recall_params,
)
from noetlc.compiler.desugar.case.rules import (
    refuse as _refuse,
)
from noetlc.compiler.desugar.case.rules import (
    retry_fields as _retry_fields,
)
from noetlc.compiler.desugar.case.rules import (
    setting as _setting,
)
from noetlc.compiler.desugar.case.rules import (
    task_guard as _task_guard,
)
from noetlc.compiler.desugar.common import (
    add_policy_rules,
    guard_body,
    map_step_list,
    node,
    rewrite_node,
    step_name,
)
from noetlc.compiler.desugar.recall import (
    collect_write,
    make_recallable,
    retarget_self,
)
from noetlc.compiler.shapes import (
    default_task_name,
    done_event,
    routes,
    single_task,
    task_maps,
    with_task_maps,
)
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter, Span
from noetlc.ir.events import LOOP_DONE, LegacyEventName, legacy_aliases

_CALL_DONE = LegacyEventName.CALL_DONE.value
_CALL_ERROR = LegacyEventName.CALL_ERROR.value
_ROUTE_ACTIONS = {"next", "step"}
_UNSUPPORTED = {"pipe", "catch", "finally"}
_KNOWN = {
    "retry",
    "fail",
    "skip",
    "collect",
    "set",
    "vars",
    "call",
    "result",
    "sink",
    "log",
    *_ROUTE_ACTIONS,
}


@dataclass
class _Case:
    """What the rules of one step produce."""

    name: str
    done: str  # the step's success event: step.done, or loop.done for a loop step
    call: str  # the name of the call task the task-level rules attach to
    taken: set[str]  # task names in use (generated names avoid them)
    arc_names: dict[str, str]
    arc_strings: dict[str, str]
    arcs: list[YMap] = field(default_factory=list)
    forks: set[int] = field(default_factory=set)  # arcs from `call: {step}`: fire besides
    case_guards: list[str] = field(default_factory=list)
    task_rules: list[YNode] = field(default_factory=list)
    init_writes: list[tuple[YScalar, YNode]] = field(default_factory=list)
    enter_skips: list[tuple[str | None, Span]] = field(default_factory=list)  # step.enter skip
    loop_exits: list[str] = field(default_factory=list)  # ctx flags of rules that end the loop
    inclusive: bool = False  # `case_mode: inclusive`: every matching rule's actions run
    # inclusive rules acting on the call: (condition, ctx writes, tasks, span), in rule order
    gated: list[
        tuple[str | None, list[tuple[YScalar, YNode]], list[tuple[str, YNode, Span]], Span]
    ] = field(default_factory=list)
    recall_params: set[str] = field(default_factory=set)
    chains: list[YMap] = field(default_factory=list)  # tasks placed after the call task
    needs_done: bool = False


def run(doc: YMap, reporter: Reporter) -> YMap:
    return map_step_list(doc, lambda step: _step(step, reporter))


def _step(step: YMap, reporter: Reporter) -> YMap | None:
    case = step.get("case")
    key = step.key_node("case")
    if not isinstance(case, YSeq) or key is None:
        return None
    name = step_name(step)
    reporter.report("NOE408", f"step `{name}` uses a legacy `case:` block", key.span)
    done = done_event(step)
    tasks = task_maps(step)
    call_index = _call_index(tasks)
    call_default = _default_name(step, name, call_index)
    taken = {str(t.get("name").value) for t in tasks if isinstance(t.get("name"), YScalar)}  # type: ignore[union-attr]
    state = _Case(
        name=name,
        done=done,
        call=call_default,
        taken=taken | {call_default},
        arc_names={"result": name, "response": name, "error": "event.data.error", "this": name},
        arc_strings=legacy_aliases(done),
    )  # fmt: skip
    # Whatever the `case_mode` and `next_policy`, the first `next` reached wins the routing
    # (NoETL's winner rule; `end_step` also suppresses the other branches, `break_chain` and
    # `defer` let them finish first): an exclusive router over the rules' arcs.
    case_inclusive = _setting(step, "case_mode") == "inclusive"
    inclusive = False
    state.inclusive = case_inclusive
    rules = [r for r in case.items if isinstance(r, YMap)]
    if _setting(step, "branch_order") == "priority":
        # higher priority first, YAML order among equals
        rules.sort(key=lambda r: -_priority(r))

    earlier: list[str] = []  # the conditions of the rules so far (a standalone `else` negates them)
    for rule in rules:
        next_action.refuse_rule_keys(rule, reporter)
        text = _condition_text(rule.get("when"))
        if text is None and "else" in rule and "when" not in rule and "then" not in rule:
            actions = _actions(rule.get("else"))
            if actions:
                otherwise = next_action.else_condition(earlier)
                _rule(state, None, otherwise, actions, rule.span, reporter)
            continue
        if text:
            earlier.append(text)
        event = _event_of(text)
        for branch, negate in (("then", False), ("else", True)):
            actions = _actions(rule.get(branch))
            if not actions or (negate and not text):
                continue
            condition = f"not ({guard_body(text)})" if negate and text else text
            _rule(state, event, condition, actions, rule.span, reporter)

    if state.gated:
        _gates(state, reporter)
    if case_inclusive and len(state.task_rules) > 1 + bool(state.gated):
        # every matching rule's actions on the call would run, in order: not expressible as
        # first-match policy rules
        next_action.refuse_inclusive(step, reporter)
    router_mode = "inclusive" if inclusive else "exclusive"
    written = routes(step.get("next"))
    if written.mode is not None and not inclusive:
        router_mode = written.mode
    structural = router.structural_arcs(written.node)
    case_arcs, forks = state.arcs, state.forks
    if written.form == "list" and len(structural) > 1 and not any("when" in a for a in structural):
        # a list of targets without conditions is a parallel fork: when no case rule routed,
        # every target starts (they fire besides each other; a case arc that fired stops them)
        forks = forks | set(range(len(case_arcs), len(case_arcs) + len(structural)))
        case_arcs, structural, router_mode = [*case_arcs, *structural], [], "exclusive"
    arcs, router_mode = router.router_arcs(
        case_arcs,
        forks,
        state.case_guards,
        structural,
        router_mode,
        inclusive,
        done,
    )

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
    if (state.task_rules or state.chains) and call_index is not None:
        tasks = _attach(state, tasks, call_index, key.span)
    if state.loop_exits:
        new = next_action.loop_exit(new, state.loop_exits, key.span)
        state.init_writes.extend(
            (YScalar(flag, key.span), YScalar(False, key.span)) for flag in state.loop_exits
        )
    if state.init_writes or state.enter_skips:
        # `step.enter` fires once per step run, before its loop: ctx written at admission,
        # and `skip` there skips the step (`step.skipped`)
        writes = YMap(tuple(state.init_writes), key.span) if state.init_writes else None
        new = next_action.enter_admission(new, state.enter_skips, writes, key.span)
    if tasks:
        new = with_task_maps(new, tasks)
    # a task a rule runs may carry its own `retry:` (it is a task of the pipeline now)
    return retry.finish(new, reporter)


def _call_index(tasks: list[YMap]) -> int | None:
    """The call task the rules act on: the last task the desugaring did not generate."""
    for i in range(len(tasks) - 1, -1, -1):
        if not chains.is_generated(tasks[i]):
            return i
    return None


def _default_name(step: YMap, name: str, index: int | None) -> str:
    """The name normalization gives the call task (`<step>_task` for a single task)."""
    tasks = task_maps(step)
    if index is None:
        return f"{name}_task"
    given = tasks[index].get("name")
    if isinstance(given, YScalar) and given.value is not None:
        return str(given.value)
    return default_task_name(name, single=single_task(step), index=index)


def _attach(state: _Case, tasks: list[YMap], index: int, span: Span) -> list[YMap]:
    """Task-level rules onto the call task; chains (and `<step>__done`) after it."""
    call = tasks[index]
    rules = state.task_rules
    if state.chains:  # named first: the chains read its result by this name
        call, _ = chains.named(call, state.call)
    if state.recall_params:
        call = make_recallable(call, state.name, state.recall_params)
    name_node = call.get("name")
    if isinstance(name_node, YScalar):
        rules = [retarget_self(r, str(name_node.value)) for r in rules]
    call = add_policy_rules(call, rules)
    if not state.chains:
        tasks[index] = call
        return tasks
    after = tasks[index + 1] if index + 1 < len(tasks) else None
    after_name = after.get("name") if after is not None else None
    call = chains.seal(call, str(after_name.value) if isinstance(after_name, YScalar) else None)
    generated: list[YNode] = [retarget_self(t, state.call) for t in state.chains]
    if state.needs_done:
        generated.append(chains.pass_through(f"{state.name}__done", state.call, span))
    return [*tasks[:index], call, *generated, *tasks[index + 1 :]]  # type: ignore[list-item]


def _rule(
    state: _Case,
    event: str | None,
    condition: str | None,
    actions: list[tuple[str, YNode, Span]],
    span: Span,
    reporter: Reporter,
) -> None:
    name = state.name
    writes: list[tuple[YScalar, YNode]] = []
    next_entries: list[YNode] = []
    fork_entries: list[YMap] = []
    inline: list[tuple[str, YNode, Span]] = []  # sinks and named tasks, in order
    result: tuple[YNode, Span] | None = None
    task_then: dict[str, Any] = {}
    for action, value, at in actions:
        if action in _UNSUPPORTED:
            _refuse(reporter, f"the case action `{action}` of step `{name}`", at)
        elif action in _ROUTE_ACTIONS:
            routed, besides = next_action.targets(value, reporter)
            next_entries.extend(routed)
            fork_entries.extend(besides)
        elif action in ("set", "vars"):  # `vars` (older): ctx writes, read as `vars.x` = `ctx.x`
            pairs = _set_pairs(value)
            if pairs is None:
                _refuse(
                    reporter,
                    f"the `{action}` of a case rule of step `{name}` (neither a mapping nor a "
                    "list of `{name, value}` entries)",
                    at,
                    hint=f"write `{action}: {{key: value}}`",
                )
            for k, v in pairs or ():
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
        elif action in ("retry", "call") and _recall_params(value) is not None:
            # Re-invoking the call with new parameters (pagination): jump back to the task
            # with the parameters in `iter.params`, which the task's arguments read.
            params = _recall_params(value)
            new_params = rewrite_node(params, _TASK_NAMES, {}) if params is not None else None
            task_then = {"do": "jump", "to": "__self__", "set_iter": {"params": new_params}}
            if isinstance(params, YMap):
                state.recall_params.update(str(k.value) for k, _ in params.items)
        elif action == "call" and isinstance(value, YMap) and "step" in value:
            # Calling another step: it starts besides the step's routing.
            fork_entries.append(value.without("params"))
        elif action == "call":
            _refuse(reporter, f"the `call` of step `{name}` names no `params` or `step`", at)
        elif action == "result":
            result = (value, at)
        elif action == "sink" or (action not in _KNOWN and _is_task(value)):
            inline.append((action, value, at))
        elif action == "log":
            # a message recorded in the execution's events: a noop task whose input it is
            message = node({"tool": {"kind": "noop", "input": {"message": value}}}, at)
            inline.append((f"{name}__log", message, at))
        elif action == "retry":
            task_then = {"do": "retry", **_retry_fields(value)}
        elif action == "fail":
            task_then = {"do": "fail"}
        elif action == "skip":
            task_then = {"do": "continue"}
        else:
            _refuse(reporter, f"the case action `{action}` of step `{name}`", at)
    if event == LegacyEventName.STEP_ENTER.value:
        state.init_writes.extend(writes)
        skips = any(a == "skip" for a, _, _ in actions)
        if skips:
            state.enter_skips.append((_enter_guard(condition), span))
        if next_entries or fork_entries or inline or result or (task_then and not skips):
            reporter.report(
                "NOE410", f"a `step.enter` rule of step `{name}` can only `set` or `skip`", span
            )
        return
    if any(a == "skip" for a, _, _ in actions):
        # NoETL's `skip` marks the step skipped: decided before the step runs
        _refuse(
            reporter,
            f"`skip` after the call of step `{name}`",
            next(at for a, _, at in actions if a == "skip"),
            "a step is skipped before it runs: write the condition in a rule on "
            "`event.name == 'step.enter'` (or in `spec.policy.admit`)",
        )
        return
    if (
        event is None
        and not next_entries
        and not fork_entries
        and (task_then or writes or inline or result)
    ):
        event = _CALL_DONE  # a rule that only acts on the call runs after each call
    if inline or result:
        at = result[1] if result is not None else inline[0][2]
        if event != _CALL_DONE and not (event == _CALL_ERROR and result is None):
            when = "after a failed call" if event == _CALL_ERROR else "after the step ended"
            what = f"`{inline[0][0]}`" if inline else "`result`"
            _refuse(
                reporter,
                f"the case action {what} of step `{name}` {when}",
                at,
                "tasks and the step's result come from the pipeline: move the action into a "
                "`call.done` rule (it then runs after each successful call)",
            )
            inline, result = [], None
        elif task_then.get("do") in ("retry", "continue"):
            _refuse(reporter, f"a task run by a rule of step `{name}` that retries or skips", at)
            inline, result = [], None
    if (
        event == _CALL_DONE
        and state.done == LOOP_DONE
        and next_entries
        and not (task_then or inline or result or fork_entries)
    ):
        # a `next` reached after an iteration's call ends the loop early and routes
        flag = f"{name}__exit_{len(state.loop_exits)}"
        state.loop_exits.append(flag)
        marks = YMap(((YScalar(flag, span), YScalar(True, span)), *writes), span)
        then_exit = {"do": "continue", "set_ctx": rewrite_node(marks, _TASK_NAMES, {})}
        exit_guard = _task_guard(condition)
        exit_rule = (
            {"when": exit_guard, "then": then_exit} if exit_guard else {"else": {"then": then_exit}}
        )
        state.task_rules.append(node(exit_rule, span))
        for entry in next_entries:
            arc = rewrite_node(entry, _TASK_NAMES, {})
            assert isinstance(arc, YMap)
            state.arcs.append(arc.with_item("when", YScalar(next_action.flag_guard([flag]), span)))
        state.case_guards.append(next_action.flag_guard([flag])[2:-2].strip())
        return
    task_level = event in (_CALL_DONE, _CALL_ERROR) and (
        task_then or inline or result or (writes and not next_entries and not fork_entries)
    )
    if task_level and state.inclusive and event == _CALL_DONE and not task_then and not result:
        # inclusive: run in rule order after the call with the other matching rules (`_gates`)
        state.gated.append((condition, list(writes), list(inline), span))
        writes = []
    elif task_level:
        # `call.done` fires after every call, failed or not; a rule that continues past a
        # failed call would hide the failure, so only retry/fail rules see failed calls
        guard = _task_guard(condition, any_outcome=task_then.get("do") in ("retry", "fail"))
        then: dict[str, Any] = dict(task_then) if task_then else {"do": "continue"}
        if inline or result:
            # after a failed call the rule's tasks run, then the step fails as the call did
            # (its arcs on `step.failed` route it)
            ends = (
                {**then, "do": "fail"}
                if event == _CALL_ERROR and then["do"] == "continue"
                else then
            )
            first = _chain(state, inline, result, ends, span, reporter)
            if first is not None:
                then = {"do": "jump", "to": first, **_directive_fields(task_then)}
        if writes:
            then["set_ctx"] = rewrite_node(YMap(tuple(writes), span), _TASK_NAMES, {})
        rule: dict[str, Any] = {"when": guard, "then": then} if guard else {"else": {"then": then}}
        state.task_rules.append(node(rule, span))
        writes = []
    if not next_entries and not fork_entries:
        return
    guard = _arc_guard(condition, state.arc_names, state.arc_strings, state.done)
    if result is not None and task_level:
        # The rule replaced the step's result, so its arcs cannot test the call's result
        # again; the result task is the pipeline's exit for this rule: "the step succeeded".
        guard = None
    if guard:
        state.case_guards.append(guard_body(guard))
    for entry, fork in [(e, True) for e in fork_entries] + [(e, False) for e in next_entries]:
        arc = rewrite_node(entry, state.arc_names, {})
        assert isinstance(arc, YMap)
        if guard:
            arc = arc.with_item("when", YScalar(guard, entry.span))
        if writes:
            arc = arc.with_item("set", rewrite_node(YMap(tuple(writes), span), state.arc_names, {}))
        if fork:
            state.forks.add(len(state.arcs))
        state.arcs.append(arc)


def _chain(
    state: _Case,
    inline: list[tuple[str, YNode, Span]],
    result: tuple[YNode, Span] | None,
    then: dict[str, Any],
    span: Span,
    reporter: Reporter,
    end_to: str | None = None,
) -> str | None:
    """Build the chain of tasks of one rule; returns its first task's name. The chain ends by
    jumping to `end_to` when given."""
    names = {"result": state.call, "response": state.call}
    built: list[YMap] = []
    for action, value, at in inline:
        base = f"{state.name}__sink" if action == "sink" else action
        task = chains.tool_task(value, chains.unique(base, state.taken), names)
        if task is None:
            _refuse(reporter, f"the `{action}` of step `{state.name}` has no tool `kind:`", at)
            continue
        built.append(task)
    if result is not None:
        value, at = result
        built.append(
            chains.result_task(
                value, chains.unique(f"{state.name}__result", state.taken), names, at
            )
        )
    if not built:
        return None
    if end_to is not None:
        end: dict[str, Any] = {"do": "jump", "to": end_to}
    elif then.get("do") == "jump":
        end = {"do": "jump", "to": "__self__"}
    elif then.get("do") == "fail":
        end = {"do": "fail"}
    elif result is not None:
        end = {"do": "break"}
    else:
        end = {"do": "jump", "to": f"{state.name}__done"}
        state.needs_done = True
    built[-1] = chains.with_rules(built[-1], [{"when": chains.ON_OK, "then": end}], span)
    state.chains.extend(built)
    return str(built[0].get("name").value)  # type: ignore[union-attr]


def _gates(state: _Case, reporter: Reporter) -> None:
    """`case_mode: inclusive`: after a successful call every matching rule's actions run, in
    rule order. Each rule gets a noop gate task `<step>__case_<i>` after the call: when its
    condition holds (read on the call's result by the call's name) it writes the rule's ctx
    values and runs the rule's tasks, then the next gate decides; the last ends at
    `<step>__done` (the step's result stays the call's)."""
    names = {"result": state.call, "response": state.call, "this": state.call}
    gates = [chains.unique(f"{state.name}__case_{i}", state.taken) for i in range(len(state.gated))]
    done = f"{state.name}__done"
    state.needs_done = True
    for i, (condition, writes, inline, span) in enumerate(state.gated):
        following = gates[i + 1] if i + 1 < len(state.gated) else done
        at = len(state.chains)
        first = (
            _chain(state, inline, None, {"do": "continue"}, span, reporter, following)
            if inline
            else None
        )
        then: dict[str, Any] = {"do": "jump", "to": first or following}
        if writes:
            then["set_ctx"] = rewrite_node(YMap(tuple(writes), span), names, {})
        guard = _gate_guard(condition, names)
        rules: list[dict[str, Any]] = (
            [{"when": guard, "then": then}, {"else": {"then": {"do": "jump", "to": following}}}]
            if guard
            else [{"else": {"then": then}}]
        )
        gate = node({"name": gates[i], "kind": "noop", "spec": {"policy": {"rules": rules}}}, span)
        assert isinstance(gate, YMap)
        state.chains.insert(at, gate)
    state.task_rules.append(
        node(
            {"when": "{{ outcome.status == 'ok' }}", "then": {"do": "jump", "to": gates[0]}},
            state.gated[0][3],
        )
    )


def _set_pairs(value: YNode) -> list[tuple[YScalar, YNode]] | None:
    """A rule's `set`: a mapping, or the older list of `{name, value}` entries; None when it
    is neither (refused: a write must never be dropped without a word)."""
    if isinstance(value, YMap):
        return [(k, v) for k, v in value.items]
    if not isinstance(value, YSeq):
        return None
    pairs = []
    for item in value.items:
        name = item.get("name") if isinstance(item, YMap) else None
        if not (isinstance(item, YMap) and isinstance(name, YScalar) and "value" in item):
            return None
        written = item.get("value")
        assert written is not None
        pairs.append((YScalar(str(name.value), name.span), written))
    return pairs
