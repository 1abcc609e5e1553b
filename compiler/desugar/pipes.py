"""`pipe:` inside a `case` rule (an older NoETL form) -> the rule's tasks, in order.

A `then` entry `{pipe: [tasks], catch: {cond: [rules]}, finally: [actions]}` ran its tasks in
order (`_prev` is the previous task's result), handled a failing task with the first `catch`
rule that matched (`_task` is the failing task's name, `_err` its error), and ran the `finally`
actions (usually a `next`) after the tasks. Canonically:

* the tasks become the rule's named tasks, in the same order (the `case` rewrite places them
  after the step's call, `_prev` keeps its meaning);
* each `catch` rule becomes a policy rule of every task it can apply to:
  `when: outcome.status == 'error' and (COND)` with `_err` -> `outcome.error` and
  `_task` -> the task's name as a string; `do: skip` is `do: continue`; `retry`/`fail` stay;
* the step's result is the last task's (a `result:` action after the tasks);
* the `finally` actions follow the tasks in the rule.

A `catch` rule with `set_prev` (the failed task's result replaced, the pipe going on) jumps
to a noop `<task>__prev_<k>` placed after the task whose result is the replacement, so the
next task reads it as `_prev`; a successful call jumps past these stand-ins. For the last task
of a pipe no task follows to read it: refused (NOE410). Only `noetlc migrate` rewrites `pipe`: `check` rejects it (NOE105) and points at
`migrate`.
"""

from __future__ import annotations

import re

from noetlc.compiler.desugar.common import (
    add_policy_rules,
    as_guard,
    guard_body,
    map_step_list,
    node,
    rewrite_expression,
    step_name,
)
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter

_DIRECTIVES = {"skip": "continue"}


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        case = step.get("case")
        if not isinstance(case, YSeq):
            return None
        changed = False
        rules: list[YNode] = []
        for rule in case.items:
            new_rule = rule
            if isinstance(rule, YMap):
                for branch in ("then", "else"):
                    then = new_rule.get(branch) if isinstance(new_rule, YMap) else None
                    if isinstance(then, YSeq) and any(
                        isinstance(e, YMap) and "pipe" in e for e in then.items
                    ):
                        assert isinstance(new_rule, YMap)
                        new_rule = new_rule.with_item(
                            branch, _flatten(then, step_name(step), reporter)
                        )
                        changed = True
            rules.append(new_rule)
        return step.with_item("case", YSeq(tuple(rules), case.span)) if changed else None

    return map_step_list(doc, fix)


def _flatten(then: YSeq, step: str, reporter: Reporter) -> YSeq:
    out: list[YNode] = []
    for entry in then.items:
        if not (isinstance(entry, YMap) and "pipe" in entry):
            out.append(entry)
            continue
        key = entry.key_node("pipe")
        assert key is not None
        reporter.report("NOE415", f"the `pipe:` of step `{step}` is the rule's tasks now", key.span)
        catch = entry.get("catch")
        cond = catch.get("cond") if isinstance(catch, YMap) else catch
        handlers = [r for r in cond.items if isinstance(r, YMap)] if isinstance(cond, YSeq) else []
        tasks = entry.get("pipe")
        items = list(tasks.items) if isinstance(tasks, YSeq) else []
        names = [_task_name(item) for item in items]
        last: str | None = None
        for j, item in enumerate(items):
            following = names[j + 1] if j + 1 < len(names) else None
            out.extend(_with_handlers(item, handlers, following, reporter))
            last = names[j] or last
        if last is not None:  # the step's result is the last task's, as the pipe's was
            out.append(node({"result": {"from": last}}, key.span))
        rest = entry.without("pipe", "catch", "finally")
        if rest.items:
            out.append(rest)
        final = entry.get("finally")
        if isinstance(final, YSeq):
            out.extend(final.items)
        elif isinstance(final, YMap):
            out.append(final)
    return YSeq(tuple(out), then.span)


def _task_name(item: YNode) -> str | None:
    if isinstance(item, YMap) and len(item.items) == 1:
        return str(item.items[0][0].value)
    return None


def _with_handlers(
    item: YNode, handlers: list[YMap], following: str | None, reporter: Reporter
) -> list[YNode]:
    """A named pipe task `{name: {tool: {...}}}` with the catch rules as its policy rules, and
    after it the noop tasks that stand in for it when a `set_prev` rule handled its failure."""
    name = _task_name(item)
    if name is None or not handlers:
        return [item]
    assert isinstance(item, YMap)
    name_key, body = item.items[0]
    if not isinstance(body, YMap):
        return [item]
    tool = body.get("tool")
    target = tool if isinstance(tool, YMap) else body
    rules: list[YNode] = []
    stand_ins: list[YNode] = []
    for k, handler in enumerate(handlers):
        if not _may_apply(handler, name):
            continue
        replacement = _set_prev(handler)
        if replacement is None:
            rules.append(_rule(handler, name))
            continue
        if following is None:
            _refuse_set_prev(handler, reporter)
            continue
        # the failure is handled: a noop whose result is the replacement stands in for the
        # task (the next task reads it as `_prev`)
        stand_in = f"{name}__prev_{k}"
        jump = YMap(
            ((YScalar("do", handler.span), YScalar("jump", handler.span)),
             (YScalar("to", handler.span), YScalar(stand_in, handler.span))),
            handler.span,
        )  # fmt: skip
        rules.append(_rule(handler, name, then=jump))
        stand_ins.append(
            node({stand_in: {"tool": {"kind": "noop", "input": replacement}}}, handler.span)
        )
    if stand_ins:  # a successful call goes on past its stand-ins
        rules.append(
            node(
                {"when": "{{ outcome.status == 'ok' }}", "then": {"do": "jump", "to": following}},
                item.span,
            )
        )
    if not rules:
        return [item, *stand_ins]
    target = add_policy_rules(target, rules, first=False)
    new_body = body.with_item("tool", target) if isinstance(tool, YMap) else target
    return [YMap(((name_key, new_body),), item.span), *stand_ins]


_TASK_TEST = re.compile(r"""\b_task\s*==\s*(['"])(\w+)\1""")


def _may_apply(handler: YMap, task: str) -> bool:
    """False when the rule's condition requires `_task == 'other'` (a conjunction)."""
    when = handler.get("when")
    if "else" in handler or not isinstance(when, YScalar) or not isinstance(when.value, str):
        return True
    text = when.value
    if re.search(r"\bor\b", text):
        return True
    return all(m.group(2) == task for m in _TASK_TEST.finditer(text))


def _set_prev(handler: YMap) -> YNode | None:
    otherwise = handler.get("else")
    body = otherwise if isinstance(otherwise, YMap) else handler
    return body.get("set_prev")


def _refuse_set_prev(handler: YMap, reporter: Reporter) -> None:
    otherwise = handler.get("else")
    body = otherwise if isinstance(otherwise, YMap) else handler
    key = body.key_node("set_prev")
    reporter.report(
        "NOE410",
        "`set_prev` of a `catch` rule for the last task of a `pipe` has no canonical rewrite",
        key.span if key is not None else handler.span,
        hint="no task follows to read the replacement as `_prev`: let the task continue "
        "(`do: continue`) and read its `outcome` in the next step",
    )


def _rule(handler: YMap, task: str, then: YMap | None = None) -> YNode:
    otherwise = handler.get("else")
    body = otherwise if isinstance(otherwise, YMap) else handler
    names = {"_err": "outcome.error", "_task": repr(task)}
    condition = "outcome.status == 'error'"
    when = handler.get("when")
    if otherwise is None and isinstance(when, YScalar) and when.value not in (None, True):
        condition += (
            " and (" + guard_body(rewrite_expression(as_guard(str(when.value)), names, {})) + ")"
        )
    then_items: list[tuple[YScalar, YNode]] = []
    for k, v in (then or body).items:
        if k.value in ("when", "else"):
            continue
        if k.value == "do" and isinstance(v, YScalar):
            v = YScalar(_DIRECTIVES.get(str(v.value), v.value), v.span)
        then_items.append((k, v))
    span = handler.span
    return YMap(
        (
            (YScalar("when", span), YScalar("{{ " + condition + " }}", span)),
            (YScalar("then", span), YMap(tuple(then_items), span)),
        ),
        span,
    )
