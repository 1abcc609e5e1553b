"""Replay: rebuild an execution's control VM from its event log, and check it (DESIGN §4).

The control VM is a function of its input events (vm/control.py `is_input`): feeding the
recorded inputs, in log order, to a fresh VM must reproduce every event the server recorded,
in the same order. `check` reports the first divergence (a log written by another compiler or
VM version, a corrupted log, or a non-deterministic VM); `rebuild` is what `resume` starts from.

Both take the scope entries the run had that are not in the log: the reference resolver
(`$resolve`) above all. A guard or an arc's args that read a result stored by reference
(runtime/results.py) evaluate to something else without it, so replay must read the same
result store as the run (`store_scope`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noetlc.expr.runtime import RESOLVER_KEY
from noetlc.runtime.results import References, ResultStore
from noetlc.vm.control import ControlVM, is_input
from noetlc.vm.program import Program

# what two server events must agree on (ids, seq and timestamps are the log's business)
COMPARED = ("name", "step", "step_run_id", "iteration", "payload")


@dataclass
class ReplayReport:
    vm: ControlVM
    inputs: int
    compared: int
    divergence: dict[str, Any] | None = None
    commands: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.divergence is None


def store_scope(store: ResultStore) -> dict[str, Any]:
    """The scope entries replay needs from the run's store: references resolve through it."""
    return {RESOLVER_KEY: References(store, None).resolve}


def rebuild(
    program: Program,
    execution_id: str,
    workload: dict[str, Any],
    events: list[dict[str, Any]],
    scope: dict[str, Any] | None = None,
) -> ControlVM:
    vm = ControlVM(program, workload, execution_id)
    vm.scope.update(scope or {})
    vm.start()
    for event in events:
        if is_input(event):
            vm.step(event)
    return vm


def check(
    program: Program,
    execution_id: str,
    workload: dict[str, Any],
    events: list[dict[str, Any]],
    scope: dict[str, Any] | None = None,
) -> ReplayReport:
    """Replay the inputs and compare the regenerated server events with the recorded ones."""
    recorded = [e for e in events if e.get("source") == "server"]
    vm = ControlVM(program, workload, execution_id)
    vm.scope.update(scope or {})
    produced: list[dict[str, Any]] = []
    commands = [c.key() for c in vm.start()]
    produced.extend(vm.take_events())
    inputs = 0
    for event in events:
        if is_input(event):
            inputs += 1
            commands.extend(c.key() for c in vm.step(event))
            produced.extend(vm.take_events())
    report = ReplayReport(vm, inputs, min(len(recorded), len(produced)))
    report.commands = [f"{k[0]} {k[2]}" + ("" if k[3] is None else f"[{k[3]}]") for k in commands]
    for index, (want, got) in enumerate(zip(recorded, produced, strict=False)):
        if any(_norm(want.get(f)) != _norm(got.get(f)) for f in COMPARED):
            report.divergence = {
                "index": index,
                "seq": want.get("seq"),
                "recorded": {f: want.get(f) for f in COMPARED},
                "replayed": {f: got.get(f) for f in COMPARED},
            }
            return report
    if len(recorded) != len(produced):
        longer = recorded if len(recorded) > len(produced) else produced
        extra = longer[report.compared]
        report.divergence = {
            "index": report.compared,
            "seq": extra.get("seq"),
            "recorded": {f: extra.get(f) for f in COMPARED} if longer is recorded else None,
            "replayed": {f: extra.get(f) for f in COMPARED} if longer is produced else None,
        }
    return report


def _norm(value: Any) -> Any:
    """Values as the log gives them back (JSON: tuples are lists, keys are strings)."""
    import json

    return json.loads(json.dumps(value, default=str, sort_keys=True))
