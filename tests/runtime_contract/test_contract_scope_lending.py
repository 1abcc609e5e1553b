"""A run that borrows its scope (`execute(..., borrow_scope=True)`, the embedded runtime's inline
noop steps) does not copy it, sees exactly what a copy would show, and gives
it back unchanged: the scope gains an entry per finished step, so a copy per step made a chain
quadratic."""

from __future__ import annotations

from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.execute import execute
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import Command, CommandKind, Event

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: lend, path: tests/lend}
workload: {n: 2}
workflow:
  - step: start
    tool: {kind: noop}
    next: work
  - step: work
    tool:
      - first: {kind: noop, input: {seen: "{{ start }}", n: "{{ workload.n }}"}}
      - second: {kind: noop, input: {prev: "{{ _prev.n }}", first: "{{ first.seen }}"}}
    set: {total: "{{ second.prev }}"}
"""


class NoCopy(dict[str, Any]):
    """A scope that refuses to be copied or walked: `dict(scope)` of a subclass whose
    `__iter__` is its own calls `keys()`."""

    def __iter__(self) -> Any:
        raise AssertionError("the borrowed scope was walked")

    def keys(self) -> Any:
        raise AssertionError("the borrowed scope was copied")


def _run(program: LoadedProgram, scope: dict[str, Any], borrow: bool) -> list[Event]:
    events: list[Event] = []
    execute(
        program,
        Command(CommandKind.RUN, "work", "work:1", {}, "work:1:a"),
        scope,
        events.append,
        borrow_scope=borrow,
    )
    return events


def _scope() -> dict[str, Any]:
    # names a run writes already hold values of the caller's: they must come back
    return {
        "workload": {"n": 2},
        "ctx": {"old": 1},
        "start": {"from": "start"},
        "first": "earlier first",
        "outcome": "earlier outcome",
        "_prev": "earlier prev",
        "event": {"name": "step.done"},
        "execution_id": "7",
    }


@pytest.mark.parametrize("preset", [True, False])
def test_a_borrowed_scope_is_not_copied_and_comes_back_unchanged(preset: bool) -> None:
    unit = compile_source(PLAYBOOK, "lend.yaml")
    assert unit.program is not None, unit.reporter.diagnostics
    program = LoadedProgram(unit.program)
    base = _scope() if preset else {"workload": {"n": 2}, "start": {"from": "start"}}
    copied = _run(program, dict(base), borrow=False)
    lent = NoCopy(base)
    borrowed = _run(program, lent, borrow=True)
    assert dict(lent.items()) == base
    assert [(e.name, e.payload) for e in borrowed] == [(e.name, e.payload) for e in copied]
    assert borrowed[-1].name == "step.done"
    assert borrowed[-1].payload["result"] == {"prev": 2, "first": {"from": "start"}}
