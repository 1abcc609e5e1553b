"""NOE507: `set_ctx` writes that iterations of a parallel loop make concurrently.

In a parallel loop the pipeline runs once per element at the same time, so a ctx key written
by a task (its `set:` or a policy rule's `set_ctx`) is written by every iteration. Allowed:
`{append: ...}` accumulation, and constants (every iteration writes the same value).
"""

from __future__ import annotations

from noetlc.analysis.context import LintContext
from noetlc.compiler import tree
from noetlc.compiler.ynodes import YMap, YNode, walk_scalars


def run(ctx: LintContext) -> None:
    for step in ctx.playbook.workflow:
        if step.loop is None or step.loop.mode != "parallel":
            continue
        reported: set[str] = set()
        for task in step.tasks:
            for writes in _writes(task):
                for key, value in writes.items:
                    name = str(key.value)
                    if name in reported or _safe(value):
                        continue
                    reported.add(name)
                    ctx.report(
                        "NOE507",
                        f"every iteration of the parallel loop of step `{step.name}` writes "
                        f"`ctx.{name}` (task `{task.name}`): the writes conflict",
                        key.span,
                    )


def _writes(task: tree.Task) -> list[YMap]:
    out = [task.set_ctx] if task.set_ctx is not None else []
    for rule in task.policy.rules if task.policy is not None else ():
        if rule.action.set_ctx is not None:
            out.append(rule.action.set_ctx)
    return out


def _safe(value: YNode) -> bool:
    if isinstance(value, YMap) and value.keys() == ["append"]:
        return True
    return all(
        not (isinstance(s.value, str) and ("{{" in s.value or "{%" in s.value))
        for _, s in walk_scalars(value)
    )
