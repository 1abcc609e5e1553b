"""Graph helpers the lint rules share."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


def cyclic_components(successors: Mapping[N, Iterable[N]]) -> list[list[N]]:
    """The strongly connected components that hold a cycle (several nodes, or one node with an
    edge to itself), by Tarjan's algorithm without recursion (graphs of thousands of steps).
    The nodes are the keys of `successors`; an edge to a node that is not a key is ignored."""
    index: dict[N, int] = {}
    low: dict[N, int] = {}
    stack: list[N] = []
    on: set[N] = set()
    found: list[list[N]] = []
    counter = 0
    for root in successors:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on.add(node)
            succ = [s for s in successors[node] if s in successors]
            if i < len(succ):
                work.append((node, i + 1))
                nxt = succ[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in successors[node]:
                    found.append(component)
    return found
