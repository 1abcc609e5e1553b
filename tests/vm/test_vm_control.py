"""The control VM alone: pure, never raises, stable commands; its failure codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main as cli
from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.event_store import MemoryStore
from noetlc.vm.control import ControlVM, Token, action_id
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import envelope

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


def _program(text: str) -> LoadedProgram:
    unit = compile_source(text, "t.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    return LoadedProgram(unit.payload)


def _answer(vm: ControlVM, command: Any, result: Any = None) -> list[Any]:
    return vm.step(
        envelope(
            "step.done",
            "worker",
            step=command.step,
            step_run_id=command.step_run_id,
            payload={"result": result},
        )
    ).commands


def test_the_vm_never_raises() -> None:
    vm = ControlVM(_program(FORK), {}, "x")
    vm.start()
    # a payload that is not a dict: a bug in the caller
    step = vm.step(envelope("step.done", "worker", step_run_id="start#1", payload=[1]))  # type: ignore[arg-type]
    assert step.commands == [] and [e.name for e in step.events] == ["execution.failed"]
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
        [start] = vm.start().commands
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
    [start] = vm.start().commands
    branches = _answer(vm, start)
    assert _answer(vm, start) == []  # the same result again
    assert {c.step for c in branches} == {"left", "right"}
    assert vm.steps["start"].runs == 1


def test_a_join_that_cannot_fire_is_a_deadlock() -> None:
    vm = ControlVM(_program(FORK), {}, "x")
    [start] = vm.start().commands
    left, right = _answer(vm, start)
    # only one branch ever arrives (the other is lost, as a broken net would lose it)
    vm.runs.pop(right.step_run_id)
    _answer(vm, left)
    assert vm.status == "failed"
    assert vm.error is not None and vm.error["code"] == "NOE854" and vm.error["step"] == "merge"


def test_dead_token_reaches_the_join() -> None:
    vm = ControlVM(_program(FORK), {}, "x")
    vm.ready.append(("left", Token({}, dead=True)))
    [start] = vm.start().commands
    [right] = _answer(vm, start)[1:]
    [merge] = _answer(vm, right, "r")
    assert merge.step == "merge" and set(merge.args) == {"right"}


def test_unhandled_failure_names_the_task_line(capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).parent / "playbooks" / "failing.yaml"
    path.write_text(FAILING.lstrip())
    try:
        assert cli.main(["run", str(path), "--db", "memory:"]) == 1
    finally:
        path.unlink()
    err = capsys.readouterr().err
    # the exception type, the task, the step and the line of the task's code
    assert "error[NOE853]: ValueError: boom\n" in err
    assert "in task `boom_task` of step `boom`, line 1 of its code: raise ValueError" in err
    # the file line and column of the code line that raised (not the task's `kind:`, 10:7)
    assert f"{path}:12:9: error[NOE853]" in err


def test_execution_without_program(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from noetlc.runtime.event_store import SQLiteStore

    db = tmp_path / "old.db"
    store = SQLiteStore(str(db))
    store.create_execution("old", "p")
    store.close()
    assert cli.main(["replay", "old", "--db", f"sqlite:///{db}"]) == 4
    assert "error[NOE857]" in capsys.readouterr().err
    assert cli.main(["resume", "old", "--db", f"sqlite:///{db}"]) == 4
    assert "error[NOE857]" in capsys.readouterr().err
    assert MemoryStore().execution("old") is None


def test_a_loop_head_after_a_fork_is_not_a_join() -> None:
    """A back edge is not a branch: `page` loops on itself inside a fork branch (found by
    `noetlc lint` as NOE504, and a deadlock at run time before the fix)."""
    from noetlc.compiler.pipeline import compile_file
    from noetlc.runtime.embedded import run_embedded

    unit = compile_file(str(Path(__file__).parent / "playbooks" / "loop_head_in_fork.yaml"))
    joins = {j[0] for j in unit.payload["joins"]}
    assert joins == {"merge"}
    summary = run_embedded(unit.payload)
    assert summary["status"] == "completed", summary["error"]
    assert summary["steps"]["page"]["runs"] == 3 and summary["steps"]["merge"]["runs"] == 1


SHARED_GUARD = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: shared_guard, path: t/shared_guard}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: inclusive}
      arcs:
        - step: a
          when: "{{ (ctx.n | default(0)) < 1 }}"
          set: {ctx.n: 1}
        - step: b
          when: "{{ (ctx.n | default(0)) < 1 }}"
  - step: a
    tool: {kind: noop}
  - step: b
    tool: {kind: noop}
"""


def test_a_guard_shared_by_arcs_sees_the_ctx_written_by_an_earlier_arc() -> None:
    """Each distinct guard is evaluated once per decision, but again after a route writes ctx."""
    vm = ControlVM(_program(SHARED_GUARD), {}, "x")
    routes = vm.tables["start"].done_on["step.done"]
    assert routes[0].guards[0][0] is routes[1].guards[0][0]  # one expression, two arcs
    [start] = vm.start().commands
    assert [c.step for c in _answer(vm, start)] == ["a"]
    assert vm.ctx == {"n": 1}


LOOP = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: loop, path: t/loop}
workload: {numbers: [1, 2, 3]}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: each}]}
  - step: each
    loop: {in: "{{ workload.numbers }}", iterator: x, spec: {mode: parallel}}
    tool: {kind: noop}
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
"""


def test_command_action_ids_are_action_id_of_the_run_and_iteration() -> None:
    program = _program(LOOP)
    vm = ControlVM(program, dict(program.workload), "exec-7")
    queue = list(vm.start().commands)
    seen = 0
    while queue and not vm.finished():
        command = queue.pop(0)
        assert command.action_id == action_id("exec-7", command.step_run_id, command.iteration)
        seen += 1
        if command.iteration is None:
            queue.extend(_answer(vm, command))
        else:
            queue.extend(
                vm.step(
                    envelope(
                        "loop.iteration.done",
                        "worker",
                        step=command.step,
                        step_run_id=command.step_run_id,
                        iteration=command.iteration,
                        payload={"result": command.iteration},
                    )
                ).commands
            )
    assert vm.status == "completed" and seen == 5  # start, 3 iterations, end


EXCLUSIVE_WRITE = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: exclusive_write, path: t/exclusive_write}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: a
          when: "{{ (ctx.n | default(0)) < 1 }}"
          set: {ctx.n: 1}
        - step: b
          when: "{{ (ctx.n | default(0)) == 1 }}"
  - step: a
    tool: {kind: noop}
  - step: b
    tool: {kind: noop}
"""


def test_exclusive_fires_the_first_match_even_when_its_write_changes_ctx() -> None:
    """Regression: the second arc carries `not <first guard>`; re-evaluated after the first
    arc's write it passed, so both arcs fired."""
    vm = ControlVM(_program(EXCLUSIVE_WRITE), {}, "x")
    [start] = vm.start().commands
    assert [c.step for c in _answer(vm, start)] == ["a"]
    assert vm.ctx == {"n": 1}
