"""Replay: check that an execution's event log reproduces itself.

The control VM is a function of its input events (vm/protocol.py `is_input`): feeding the
recorded inputs, in log order, to a fresh VM must reproduce every event the server recorded,
in the same order. `check` reports the first divergence (a log written by another compiler or
VM version, a corrupted log, or a non-deterministic VM). Resume and takeover rebuild the VM the
same way (`Driver.replay`).

`check` feeds the inputs through a `Driver` (runtime/driver.py), as the run did: the values of the
references an input event carries are loaded from the run's result store before the VM takes
it, so a guard or an arc's args that read a large result evaluate as they did in the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from noetlc.runtime.driver import Driver
from noetlc.runtime.results import ResultStore
from noetlc.vm.control import ControlVM
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import Event, Source, is_input

# what two server events must agree on (ids, seq and timestamps are the log's business)
COMPARED = ("name", "step", "step_run_id", "iteration", "payload")


@dataclass
class ReplayReport:
    """The outcome of a replay."""

    vm: ControlVM
    inputs: int
    compared: int
    divergence: dict[str, Any] | None = None
    commands: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.divergence is None


def check(
    program: LoadedProgram,
    execution_id: str,
    workload: dict[str, Any],
    events: Sequence[Mapping[str, Any]],
    results: ResultStore | None = None,
) -> ReplayReport:
    """Replay the inputs and compare the regenerated server events with the recorded ones."""
    recorded = [e for e in events if e.get("source") == Source.SERVER]
    driver = Driver(program, execution_id, workload, results=results)
    first = driver.start()
    produced: list[Event] = list(first.events)
    commands = [c.key() for c in first.commands]
    inputs = 0
    for record in events:
        event = Event.from_record(record)
        if is_input(event):
            inputs += 1
            step = driver.feed(event)
            commands.extend(c.key() for c in step.commands)
            produced.extend(step.events)
    report = ReplayReport(driver.vm, inputs, min(len(recorded), len(produced)))
    report.commands = [f"{k[0]} {k[2]}" + ("" if k[3] is None else f"[{k[3]}]") for k in commands]
    for index, (want, got) in enumerate(zip(recorded, produced, strict=False)):
        if any(_norm(want.get(f)) != _norm(getattr(got, f)) for f in COMPARED):
            report.divergence = {
                "index": index,
                "seq": want.get("seq"),
                "recorded": {f: want.get(f) for f in COMPARED},
                "replayed": {f: getattr(got, f) for f in COMPARED},
            }
            return report
    if len(recorded) != len(produced):
        if len(recorded) > len(produced):
            extra = recorded[report.compared]
            seq, want_fields, got_fields = extra.get("seq"), _fields(extra), None
        else:
            seq, want_fields = None, None
            got_fields = _fields(produced[report.compared]._asdict())
        report.divergence = {
            "index": report.compared,
            "seq": seq,
            "recorded": want_fields,
            "replayed": got_fields,
        }
    return report


def _fields(event: Mapping[str, Any]) -> dict[str, Any]:
    return {f: event.get(f) for f in COMPARED}


def _norm(value: Any) -> Any:
    """Values as the log gives them back (JSON: tuples are lists, keys are strings)."""
    import json

    return json.loads(json.dumps(value, default=str, sort_keys=True))
