"""Budgets across child executions: one root execution's tree of `kind: playbook` children.

A playbook that calls itself, or a fan-out of fan-outs, would otherwise start executions
until threads, memory or the store give out (344 levels ended in "can't start new thread"
and left an execution `running`; a 100×100×100 fan-out is a million executions). The root's
budgets (vm/budgets.py: `child_depth`, default 32; `child_executions`, default 2,000) bound
its whole tree: a call that would start a child past one of them does not start it, and the
calling step fails with NOE858 naming the budget. The parent then ends as its arcs say; its
other children are stopped with it (their calling actions' cancel flags), so nothing is left
`running`. A child that exists already (a resumed parent finds the child its first run
started) is not counted again; a resumed root counts the children its store holds.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from noetlc.vm.budgets import budgets_of, over_budget_error


class Records(Protocol):
    def execution(self, execution_id: str) -> dict[str, Any] | None: ...
    def executions(self) -> list[dict[str, Any]]: ...


class Family:
    """The counts of one root's tree, shared by every runtime of the tree (thread-safe)."""

    __slots__ = ("_lock", "children", "max_children", "max_depth", "root_id")

    def __init__(self, root_id: str, payload: Mapping[str, Any], children: int = 0) -> None:
        budgets = budgets_of(dict(payload))
        self.root_id = root_id
        self.max_depth = budgets["child_depth"]
        self.max_children = budgets["child_executions"]
        self.children = children
        self._lock = threading.Lock()

    def admit(self, depth: int) -> dict[str, Any] | None:
        """Count a new child at `depth` (1: the root's own children); the NOE858 error when
        it would go over a budget (then nothing is counted)."""
        if self.max_depth and depth > self.max_depth:
            return over_budget_error(
                "child_depth", depth, self.max_depth, f"the child executions of {self.root_id}"
            )
        with self._lock:
            if self.max_children and self.children + 1 > self.max_children:
                return over_budget_error(
                    "child_executions",
                    self.children + 1,
                    self.max_children,
                    f"the child executions of {self.root_id}",
                )
            self.children += 1
        return None


def lineage(store: Records, execution_id: str) -> tuple[str, int]:
    """(the root of an execution's tree, its depth below the root), from the parent links."""
    depth = 0
    current = execution_id
    seen = {current}
    while True:
        record = store.execution(current)
        parent = None if record is None else record.get("parent_id")
        if not parent or str(parent) in seen:
            return current, depth
        current = str(parent)
        seen.add(current)
        depth += 1


def descendants(store: Records, root_id: str) -> int:
    """How many executions of the store descend from `root_id`."""
    children: dict[str, list[str]] = {}
    for record in store.executions():
        parent = record.get("parent_id")
        if parent:
            children.setdefault(str(parent), []).append(str(record["execution_id"]))
    count, todo = 0, [root_id]
    while todo:
        for child in children.get(todo.pop(), ()):
            count += 1
            todo.append(child)
    return count


def started_children(store: Records, events: list[dict[str, Any]]) -> list[str]:
    """The children a parent's log says it started without waiting (NoETL's playbook tool
    without `return_step`: the call's outcome is `child_status: started`) that are still
    `running` in the store with their program: after a crash nothing runs them, and a replay
    does not call again (the call is done). In NoETL a child is an execution of its own that
    its server goes on with after a restart, whatever became of the parent's run."""
    out: list[str] = []
    for event in events:
        outcome = (event.get("payload") or {}).get("outcome")
        meta = outcome.get("meta") if isinstance(outcome, dict) else None
        if not isinstance(meta, dict) or meta.get("child_status") != "started":
            continue
        child = meta.get("child_execution_id")
        record = store.execution(str(child)) if child else None
        if (
            record is not None
            and record.get("status") == "running"
            and record.get("program") is not None
            and str(child) not in out
        ):
            out.append(str(child))
    return out


__all__ = ["Family", "descendants", "lineage", "started_children"]
