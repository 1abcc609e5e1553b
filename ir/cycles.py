"""Back edges of a step graph: the arcs that close a cycle.

Join inference (compiler) and dead-path elimination (control VM) both treat a cycle's back
edge differently from an alternative path into a step, so both take them from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def back_edges(
    roots: Iterable[str], successors: Mapping[str, Sequence[str]]
) -> set[tuple[str, str]]:
    """The edges `(u, v)` whose target is on the stack of an iterative depth-first walk that
    starts at each not yet visited root in turn and follows successors in their order."""
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        stack: list[tuple[str, list[str]]] = [(root, list(successors.get(root, ())))]
        while stack:
            node, todo = stack[-1]
            if not todo:
                state[node] = 2
                stack.pop()
                continue
            nxt = todo.pop(0)
            if state.get(nxt) == 1:
                back.add((node, nxt))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, list(successors.get(nxt, ()))))
    return back
