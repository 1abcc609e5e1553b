"""The control VM alone: pure, never raises, stable commands; its failure codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.store import MemoryStore
from noetlc.vm import cli
from noetlc.vm.control import ControlVM, Token
from noetlc.vm.program import Program

FORK = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fork, path: t/fork}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: inclusive}
      arcs:
        - step: left
        - step: right
  - step: left
    tool: {kind: noop}
    next: {arcs: [{step: merge}]}
  - step: right
    tool: {kind: noop}
    next: {arcs: [{step: merge}]}
  - step: merge
    tool: {kind: noop}
"""

FAILING = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: failing, path: t/failing}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: boom}]}
  - step: boom
    tool:
      kind: python
      code: |
        raise ValueError("boom")
"""


def _program(text: str) -> Program:
    unit = compile_source(text, "t.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    return Program(unit.artifacts["payload"])


def _answer(vm: ControlVM, command: Any, result: Any = None) -> list[Any]:
    return vm.step(
        {
            "name": "step.done",
            "source": "worker",
            "step": command.step,
            "step_run_id": command.step_run_id,
            "payload": {"result": result},
        }
    )


def test_the_vm_never_raises() -> None:
    vm = ControlVM(_program(FORK), {}, "x")
    vm.start()
    assert vm.step({"source": "worker"}) == []  # no name: a bug in the caller
    assert vm.status == "failed"
    assert vm.error is not None and vm.error["code"] == "NOE850"


def test_no_admission_rule() -> None:
    vm = ControlVM(_program(FORK), {}, "x")
    vm.tables["start"].admission.clear()  # hand-made bytecode without a default rule
    vm.start()
    assert vm.status == "failed" and vm.error is not None and vm.error["code"] == "NOE852"


def test_commands_and_action_ids_are_stable() -> None:
    program = _program(FORK)
    runs = []
    for _ in range(2):
        vm = ControlVM(program, {}, "same-id")
        [start] = vm.start()
        commands = _answer(vm, start)
        runs.append([(c.kind, c.step_run_id, c.action_id) for c in commands])
        for command in commands:
            _answer(vm, command)
        [merge] = [c for c in vm.outstanding()]
        assert merge.step == "merge" and set(merge.args) == {"left", "right"}
    assert runs[0] == runs[1] and len(runs[0]) == 2
    assert len({a for _, _, a in runs[0]}) == 2


def test_duplicate_and_late_results_are_ignored() -> None:
    vm = ControlVM(_program(FORK), {}, "x")
    [start] = vm.start()
    branches = _answer(vm, start)
    assert _answer(vm, start) == []  # the same result again
    assert {c.step for c in branches} == {"left", "right"}
    assert vm.steps["start"].runs == 1


def test_a_join_that_cannot_fire_is_a_deadlock() -> None:
    vm = ControlVM(_program(FORK), {}, "x")
    [start] = vm.start()
    left, right = _answer(vm, start)
    # only one branch ever arrives (the other is lost, as a broken net would lose it)
    vm.runs.pop(right.step_run_id)
    _answer(vm, left)
    assert vm.status == "failed"
    assert vm.error is not None and vm.error["code"] == "NOE854" and vm.error["step"] == "merge"


def test_dead_token_reaches_the_join() -> None:
    vm = ControlVM(_program(FORK), {}, "x")
    vm.ready.append(("left", Token({}, dead=True)))
    [start] = vm.start()
    [right] = _answer(vm, start)[1:]
    [merge] = _answer(vm, right, "r")
    assert merge.step == "merge" and set(merge.args) == {"right"}


def test_unhandled_failure_names_the_step_line(capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).parent / "playbooks" / "failing.yaml"
    path.write_text(FAILING.lstrip())
    try:
        assert cli.main(["run", str(path), "--db", "memory:"]) == 1
    finally:
        path.unlink()
    err = capsys.readouterr().err
    assert "error[NOE853]: boom (step boom)" in err
    assert f"{path}:8:5" in err


def test_execution_without_program(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from noetlc.runtime.store import SQLiteStore

    db = tmp_path / "old.db"
    store = SQLiteStore(str(db))
    store.create_execution("old", "p")
    store.close()
    assert cli.main(["replay", "old", "--db", f"sqlite:///{db}"]) == 1
    assert "error[NOE857]" in capsys.readouterr().err
    assert cli.main(["resume", "old", "--db", f"sqlite:///{db}"]) == 1
    assert "error[NOE857]" in capsys.readouterr().err
    assert MemoryStore().execution("old") is None
