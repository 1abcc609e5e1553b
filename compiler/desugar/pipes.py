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

`set_prev` (replacing a failed task's result) has no canonical rewrite and is refused
(NOE410). Only `noetlc migrate` rewrites `pipe`: `check` rejects it (NOE105) and points at
`migrate`.
"""

from __future__ import annotations

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
        written = [r for r in cond.items if isinstance(r, YMap)] if isinstance(cond, YSeq) else []
        handlers = [h for h in written if not _replaces_result(h, reporter)]
        tasks = entry.get("pipe")
        last: str | None = None
        for item in tasks.items if isinstance(tasks, YSeq) else ():
            out.append(_with_handlers(item, handlers))
            if isinstance(item, YMap) and len(item.items) == 1:
                last = str(item.items[0][0].value)
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


def _with_handlers(item: YNode, handlers: list[YMap]) -> YNode:
    """A named pipe task `{name: {tool: {...}}}` with the catch rules as its policy rules."""
    if not (isinstance(item, YMap) and len(item.items) == 1 and handlers):
        return item
    name_key, body = item.items[0]
    if not isinstance(body, YMap):
        return item
    tool = body.get("tool")
    target = tool if isinstance(tool, YMap) else body
    rules = [_rule(h, str(name_key.value)) for h in handlers]
    if not rules:
        return item
    target = add_policy_rules(target, rules, first=False)
    new_body = body.with_item("tool", target) if isinstance(tool, YMap) else target
    return YMap(((name_key, new_body),), item.span)


def _replaces_result(handler: YMap, reporter: Reporter) -> bool:
    otherwise = handler.get("else")
    body = otherwise if isinstance(otherwise, YMap) else handler
    set_prev = body.key_node("set_prev")
    if set_prev is None:
        return False
    reporter.report(
        "NOE410",
        "`set_prev` of a `catch` rule (replacing a failed task's result) has no canonical rewrite",
        set_prev.span,
        hint="let the task continue (`do: continue`) and have the next task read "
        "`outcome`/its input with a default",
    )
    return True


def _rule(handler: YMap, task: str) -> YNode:
    otherwise = handler.get("else")
    body = otherwise if isinstance(otherwise, YMap) else handler
    names = {"_err": "outcome.error", "_task": repr(task)}
    condition = "outcome.status == 'error'"
    when = handler.get("when")
    if otherwise is None and isinstance(when, YScalar) and when.value not in (None, True):
        condition += (
            " and (" + guard_body(rewrite_expression(as_guard(str(when.value)), names, {})) + ")"
        )
    then: list[tuple[YScalar, YNode]] = []
    for k, v in body.items:
        if k.value in ("when", "else"):
            continue
        if k.value == "do" and isinstance(v, YScalar):
            v = YScalar(_DIRECTIVES.get(str(v.value), v.value), v.span)
        then.append((k, v))
    span = handler.span
    return YMap(
        (
            (YScalar("when", span), YScalar("{{ " + condition + " }}", span)),
            (YScalar("then", span), YMap(tuple(then), span)),
        ),
        span,
    )
