"""NOE503: pipelines whose `do: jump` cycles only an error can leave.

Each task of a step's pipeline is a node; its policy's rules give the edges: `continue` to the
next task (or the pipeline's end), `jump` to its target, `break` to the end, `fail` and
`retry` (bounded by `attempts`) out of the pipeline. A rule whose guard folds to false never
matches; an `else` or an always-true guard hides the rules after it. When no rule need match,
the default applies: an ok outcome continues (on_unmatched `continue` too). A cycle of tasks
with a jump edge and no edge leaving it is reported; leaving only because a tool errors does
not count as an exit.
"""

from __future__ import annotations

from noetlc.analysis.context import LintContext
from noetlc.analysis.graphs import cyclic_components
from noetlc.analysis.guards import truth
from noetlc.compiler import tree
from noetlc.diagnostics.report import Span

END = -1


def run(ctx: LintContext) -> None:
    for step in ctx.playbook.workflow:
        _pipeline(ctx, step)


def _pipeline(ctx: LintContext, step: tree.Step) -> None:
    tasks = step.tasks
    names = {t.name: i for i, t in enumerate(tasks)}
    edges: list[list[int]] = []
    jumps: list[list[tuple[int, Span]]] = []
    for i, task in enumerate(tasks):
        out, jumped = _edges(ctx, step, i, task, names, len(tasks))
        edges.append(out)
        jumps.append(jumped)
    successors = {i: [e for e in out if e != END] for i, out in enumerate(edges)}
    for component in cyclic_components(successors):
        members = set(component)
        leaves = any(e not in members for i in component for e in edges[i])
        jump_spans = [span for i in component for target, span in jumps[i] if target in members]
        if leaves or not jump_spans:
            continue
        cycle = " -> ".join(tasks[i].name for i in sorted(component))
        ctx.report(
            "NOE503",
            f"the jump cycle {cycle} -> {tasks[min(component)].name} in step `{step.name}` has "
            "no way out but a tool error (no break, fail, continue past it, or unmatched "
            "fall-through)",
            jump_spans[0],
        )


def _edges(
    ctx: LintContext,
    step: tree.Step,
    i: int,
    task: tree.Task,
    names: dict[str, int],
    count: int,
) -> tuple[list[int], list[tuple[int, Span]]]:
    following = i + 1 if i + 1 < count else END
    if task.policy is None:
        return [following], []
    out: list[int] = []
    jumps: list[tuple[int, Span]] = []
    pool = ctx.pool
    exhaustive = False
    base = ("workflow", step.name, "tasks", task.name, "rules")
    for r, rule in enumerate(task.policy.rules):
        value: bool | None = True
        if rule.when is not None:
            index = pool.by_path.get((*base, r, "when"))
            value = truth(pool.entries[index], None) if index is not None else None
        if value is False:
            continue
        action = rule.action
        if action.do == "continue":
            out.append(following)
        elif action.do == "jump" and action.to in names:
            out.append(names[action.to])
            jumps.append((names[action.to], action.to_span))
        else:  # break, fail, retry (bounded): the pipeline is left
            out.append(END)
        if value is True:
            exhaustive = True
            break
    if not exhaustive:
        out.append(following)  # nothing matched: an ok outcome continues
    return out, jumps
