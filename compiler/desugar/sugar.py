"""Authoring sugar inside a task list: `choose`, `while`, `until` (docs/sugar.md).

Each block becomes canonical noop tasks with policy rules that `jump`, with stable names
derived from the block's `name:` (or `choose_1`, `while_2`, … numbered per step) and an explicit
merge task `<block>__end`, so no branch ever falls through into another. Generated noop tasks
pass the previous task's result through (`input: "{{ _prev }}"`), so `_prev` inside a branch
or loop body still means the task before the block. Blocks nest.
"""

from __future__ import annotations

from typing import Any

from noetlc.compiler.desugar.common import as_guard, map_step_list, node, step_name
from noetlc.compiler.shapes import task_entry
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter, Span

PASS_THROUGH = "{{ _prev }}"


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        tool = step.get("tool")
        if not isinstance(tool, YSeq) or not any(_sugar_kind(t) for t in tool.items):
            return None
        counter = [0]
        tasks = _expand(list(tool.items), step_name(step), counter, reporter)
        return step.with_item("tool", YSeq(tuple(tasks), tool.span))

    return map_step_list(doc, fix)


def _sugar_kind(item: YNode) -> str | None:
    return task_entry(item).block


def _expand(items: list[YNode], step: str, counter: list[int], reporter: Reporter) -> list[YNode]:
    out: list[YNode] = []
    for item in items:
        kind = _sugar_kind(item)
        if kind is None:
            out.append(item)
            continue
        assert isinstance(item, YMap)
        counter[0] += 1
        given = item.get("name")
        block = str(given.value) if isinstance(given, YScalar) else f"{kind}_{counter[0]}"
        if kind == "choose":
            out.extend(_choose(item, block, step, counter, reporter))
        else:
            out.extend(_loop(item, kind, block, step, counter, reporter))
    return out


def _noop(name: str, rules: list[dict[str, Any]], span: Span) -> YNode:
    task: dict[str, Any] = {"name": name, "kind": "noop", "input": PASS_THROUGH}
    if rules:
        task["spec"] = {"policy": {"rules": rules}}
    return node(task, span)


def _first_name(tasks: list[YNode], fallback: str) -> str:
    for task in tasks:
        if isinstance(task, YMap):
            name = task.get("name")
            if isinstance(name, YScalar):
                return str(name.value)
    return fallback


def _body(value: YNode | None, where: str, span: Span, reporter: Reporter) -> list[YNode]:
    if isinstance(value, YSeq):
        return list(value.items)
    if isinstance(value, YMap):
        return [value]
    reporter.report("NOE411", f"{where} needs a list of tasks", span)
    return []


def _choose(
    item: YMap, block: str, step: str, counter: list[int], reporter: Reporter
) -> list[YNode]:
    span = item.span
    branches = item.get("choose")
    end = f"{block}__end"
    dispatch_rules: list[dict[str, Any]] = []
    body: list[YNode] = []
    has_else = False
    for i, branch in enumerate(branches.items if isinstance(branches, YSeq) else ()):
        if not isinstance(branch, YMap):
            continue
        if "else" in branch:
            tasks = _expand(
                _body(branch.get("else"), f"`else` of `{block}`", branch.span, reporter),
                step,
                counter,
                reporter,
            )
            label = f"{block}__else"
            has_else = True
            when = None
        else:
            condition = branch.get("when")
            if not isinstance(condition, YScalar):
                reporter.report("NOE411", f"branch {i + 1} of `{block}` needs `when:`", branch.span)
                continue
            tasks = _expand(
                _body(branch.get("then"), f"`then` of `{block}`", branch.span, reporter),
                step,
                counter,
                reporter,
            )
            label = f"{block}__then_{i + 1}"
            when = as_guard(str(condition.value))
        if not tasks:
            tasks = [_noop(label, [], branch.span)]
        target = _first_name(tasks, label)
        rule: dict[str, Any] = {"then": {"do": "jump", "to": target}}
        dispatch_rules.append({"when": when, **rule} if when else {"else": rule})
        body.extend(tasks)
        body.append(
            _noop(f"{label}__exit", [{"else": {"then": {"do": "jump", "to": end}}}], branch.span)
        )
    if not has_else:
        dispatch_rules.append({"else": {"then": {"do": "jump", "to": end}}})
    if not isinstance(branches, YSeq) or not branches.items:
        reporter.report("NOE411", f"`{block}` needs a list of `when`/`then` branches", span)
    return [_noop(block, dispatch_rules, span), *body, _noop(end, [], span)]


def _loop(
    item: YMap, kind: str, block: str, step: str, counter: list[int], reporter: Reporter
) -> list[YNode]:
    span = item.span
    condition = item.get(kind)
    if not isinstance(condition, YScalar) or condition.value is None:
        reporter.report("NOE411", f"`{kind}:` needs a condition", span)
        return []
    guard = as_guard(str(condition.value))
    body = _expand(
        _body(item.get("do"), f"`do` of `{block}`", span, reporter), step, counter, reporter
    )
    end = f"{block}__end"
    if kind == "while":
        head = _noop(
            block,
            [
                {"when": guard, "then": {"do": "continue"}},
                {"else": {"then": {"do": "jump", "to": end}}},
            ],
            span,
        )
        back = _noop(f"{block}__next", [{"else": {"then": {"do": "jump", "to": block}}}], span)
        return [head, *body, back, _noop(end, [], span)]
    head = _noop(block, [], span)
    check = _noop(
        f"{block}__check",
        [
            {"when": guard, "then": {"do": "jump", "to": end}},
            {"else": {"then": {"do": "jump", "to": block}}},
        ],
        span,
    )
    return [head, *body, check, _noop(end, [], span)]
