"""NOE510: a cycle of steps whose exits are decided by values that never change.

The steps' `next` arcs make a graph; each strongly connected component with a cycle is a
loop of steps. Its exits are the arcs from a member to a step outside. When every exit is
guarded and every exit guard reads only `workload` (or nothing: a literal), the decision is
the same on every turn: the cycle is either never entered again or never left (it runs until
an execution budget stops it). A guard that reads ctx, a step's result, an iterator or the
event can change between turns and is not reported.
"""

from __future__ import annotations

from noetlc.analysis.context import LintContext
from noetlc.analysis.graphs import cyclic_components

IMMUTABLE = frozenset({"workload"})


def run(ctx: LintContext) -> None:
    workflow = ctx.playbook.workflow
    successors: dict[str, list[str]] = {
        step.name: [arc.step for arc in step.next.arcs] if step.next is not None else []
        for step in workflow
    }
    steps = {step.name: step for step in workflow}
    reachable = ctx.reachable_steps
    for component in cyclic_components(successors):
        members = set(component)
        if not members & reachable:
            continue  # no execution enters it (NOE501 says so)
        exits = []
        static = True
        for name in component:
            step = steps[name]
            for i, arc in enumerate(step.next.arcs if step.next is not None else ()):
                if arc.step in members:
                    continue
                exits.append(arc)
                if arc.when is None:
                    static = False
                    continue
                index = ctx.pool.by_path.get(("workflow", name, "next", i, "when"))
                entry = ctx.pool.entries[index] if index is not None else None
                if entry is None or not set(entry.names) <= IMMUTABLE:
                    static = False
        if exits and static:
            first = exits[0]
            cycle = " -> ".join(sorted(members))
            ctx.report(
                "NOE510",
                f"the cycle {cycle} leaves only by guards that read nothing but workload and "
                "literals: the same decision is taken on every turn, so it never ends or "
                "never loops",
                first.when.span if first.when is not None else first.span,
                hint="make an exit guard read something the cycle changes (ctx, a step's "
                "result), or bound it with a loop over a list",
            )
