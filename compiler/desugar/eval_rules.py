"""Task `eval:` (an older NoETL form) -> task policy rules (`spec.policy.rules`).

`eval:` is a list of `{expr: COND, do: DIRECTIVE, ...}` entries and at most one
`{else: {do: DIRECTIVE, ...}}`, evaluated in order after each call of the task. Each entry
becomes a rule `{when: COND, then: {do, ...}}` (the else entry `{else: {then: {...}}}`) with the
same directive fields (`attempts`, `delay`, `backoff`, `max_delay`, `jitter`, `to`, `set_iter`,
`set_ctx`); `set_vars` is the older name of `set_ctx` and `{{ vars.x }}` reads `ctx.x`. The
rules go after the task's existing rules.

Only `noetlc migrate` rewrites it: `check` rejects `eval:` in a file (NOE105) and points at
`migrate`.
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import add_policy_rules, map_step_list, rewrite_node, step_name
from noetlc.compiler.shapes import task_maps, with_task_maps
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter

_RENAMED = {"set_vars": "set_ctx", "expr": "when"}


def run(doc: YMap, reporter: Reporter) -> YMap:
    renamed: list[bool] = []

    def fix(step: YMap) -> YMap | None:
        tasks = task_maps(step)
        if not any("eval" in t for t in tasks):
            return None
        new_tasks: list[YMap] = []
        for task in tasks:
            source = task.get("eval")
            key = task.key_node("eval")
            if source is None or key is None:
                new_tasks.append(task)
                continue
            rules = _rules(source, reporter)
            if _mentions(source, "set_vars"):
                renamed.append(True)
            if rules is None:
                new_tasks.append(task)  # reported; the entry stays for check to show
                continue
            reporter.report(
                "NOE413",
                f"`eval:` of a task in step `{step_name(step)}` is policy rules now",
                key.span,
            )
            task = task.without("eval")
            new_tasks.append(add_policy_rules(task, rules, first=False) if rules else task)
        return with_task_maps(step, new_tasks)

    doc = map_step_list(doc, fix)
    if not renamed:
        return doc
    # `set_vars` wrote the older `vars` namespace: `{{ vars.x }}` reads the ctx key now
    workflow = doc.get("workflow")
    return (
        doc.with_item("workflow", rewrite_node(workflow, {"vars": "ctx"}, {})) if workflow else doc
    )


def _rules(source: YNode, reporter: Reporter) -> list[YNode] | None:
    entries = source.items if isinstance(source, YSeq) else (source,)
    out: list[YNode] = []
    for entry in entries:
        if not isinstance(entry, YMap):
            reporter.report(
                "NOE410",
                "an `eval:` entry must be a mapping `{expr: ..., do: ...}` or `{else: {do: ...}}`",
                entry.span,
                hint="write `- expr: \"{{ outcome.status == 'error' }}\"` with `do: retry`",
            )
            return None
        otherwise = entry.get("else")
        if otherwise is not None:
            body = otherwise if isinstance(otherwise, YMap) else YMap((), entry.span)
            then = _then(body)
            else_key = entry.key_node("else")
            assert else_key is not None
            branch = YMap(((YScalar("then", else_key.span), then),), body.span)
            out.append(YMap(((else_key, branch),), entry.span))
            continue
        condition = entry.get("expr") or entry.get("when")
        fields = YMap(
            tuple((k, v) for k, v in entry.items if k.value not in ("expr", "when")), entry.span
        )
        items: list[tuple[YScalar, YNode]] = []
        if condition is not None:
            items.append((YScalar("when", condition.span), condition))
        items.append((YScalar("then", entry.span), _then(fields)))
        out.append(YMap(tuple(items), entry.span))
    return out


def _mentions(node: YNode, key: str) -> bool:
    if isinstance(node, YMap):
        return any(k.value == key or _mentions(v, key) for k, v in node.items)
    if isinstance(node, YSeq):
        return any(_mentions(i, key) for i in node.items)
    return False


def _then(body: YMap) -> YMap:
    """The directive fields, `set_vars` renamed to `set_ctx` (a `then:` wrapper is unwrapped)."""
    inner = body.get("then")
    if isinstance(inner, YMap):
        body = inner
    items = tuple(
        (YScalar(_RENAMED.get(str(k.value), str(k.value)), k.span), v) for k, v in body.items
    )
    return YMap(items, body.span)
