"""The invariants of an execution's event log, checked over a stored log (and its children).

Replay (runtime/replay.py) checks that the log reproduces itself; this module checks that it
is a log a correct runtime could have written, whatever happened to its processes:

* `seq`: the log's seq numbers are 1, 2, 3, ... without a gap or a repeat;
* `terminal`: an ended execution has exactly one terminal event (`workflow.finished`,
  `execution.failed`, `execution.cancelled`), a running one none;
* `after-terminal`: nothing is appended after the terminal event;
* `duplicate-result`: an action (its `action_id`) is done or failed at most once, unless a
  `task.retry` of that action lies between the two results;
* `unstarted-result`: every result follows the event that started it (`step.scheduled`, a
  listener's `step.started`, `loop.started`, `loop.iteration.started`);
* `row-state`: the execution's row agrees with its log (`running` without a terminal event,
  else the status the terminal event names);
* `child`: a child execution (its row names the parent) whose parent ended has ended too,
  and a call whose outcome is `ok` names a child that completed.

Any other event name (one a newer runtime adds) is only counted in `seq`: the rules name the
events they are about. `noetl-vm replay ID` and `replay --all` run it after the replay and
fail on a violation; the runtime, chaos and fault tests assert it on every store they wrote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from noetlc.ir.events import TERMINAL_STATUS, EventName
from noetlc.vm.protocol import RESULT_NAMES, Source, folded_task

TERMINAL = TERMINAL_STATUS
_STARTERS = {
    # a result's name -> the events that start it (matched on step_run_id, and iteration)
    EventName.STEP_DONE.value: (
        EventName.STEP_SCHEDULED.value,
        EventName.STEP_STARTED.value,
    ),
    EventName.STEP_FAILED.value: (
        EventName.STEP_SCHEDULED.value,
        EventName.STEP_STARTED.value,
        EventName.LOOP_STARTED.value,
    ),
    EventName.LOOP_ITERATION_DONE.value: (EventName.LOOP_ITERATION_STARTED.value,),
    EventName.LOOP_ITERATION_FAILED.value: (EventName.LOOP_ITERATION_STARTED.value,),
    EventName.LOOP_DONE.value: (EventName.LOOP_STARTED.value,),
}
_ITERATION_NAMES = frozenset(
    {
        EventName.LOOP_ITERATION_STARTED.value,
        EventName.LOOP_ITERATION_DONE.value,
        EventName.LOOP_ITERATION_FAILED.value,
    }
)
_TASK_RETRY = EventName.TASK_RETRY.value
_TASK_DONE = EventName.TASK_DONE.value
_WORKER = Source.WORKER.value


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: the execution, the rule, the event's seq (if one) and what."""

    execution_id: str
    rule: str
    seq: int | None
    message: str

    def __str__(self) -> str:
        at = "" if self.seq is None else f" at seq {self.seq}"
        return f"{self.execution_id}{at}: [{self.rule}] {self.message}"


class LogStore(Protocol):
    """What the checker reads from a store (every store of runtime/ has it)."""

    def read(self, execution_id: str, after_seq: int = 0) -> list[dict[str, Any]]: ...
    def executions(self) -> list[dict[str, Any]]: ...


def terminal_status(events: Sequence[Mapping[str, Any]]) -> str | None:
    """The status the log's first terminal event names, or None while it has none."""
    for event in events:
        status = TERMINAL.get(str(event.get("name")))
        if status is not None:
            return status
    return None


def check_log(
    execution_id: str, events: Sequence[Mapping[str, Any]], status: str | None = None
) -> list[Violation]:
    """The violations of one execution's log; `status` is its row's, when it has one."""
    out: list[Violation] = []

    def bad(rule: str, seq: Any, message: str) -> None:
        out.append(Violation(execution_id, rule, seq if isinstance(seq, int) else None, message))

    terminals: list[Mapping[str, Any]] = []
    started: set[tuple[str, Any, Any]] = set()  # (name, step_run_id, iteration)
    results: dict[str, int] = {}  # action_id -> seq of its result
    retried: dict[str, int] = {}  # action_id -> seq of its last task.retry
    expected = 1
    for index, event in enumerate(events, 1):
        seq = event.get("seq")
        name = str(event.get("name"))
        if seq != expected:
            what = "a gap" if isinstance(seq, int) and seq > expected else "a repeat"
            bad("seq", seq, f"{what}: seq {seq} where {expected} was expected")
        expected = seq + 1 if isinstance(seq, int) else expected + 1
        if terminals:
            bad(
                "after-terminal",
                seq,
                f"{name} appended after the terminal event {terminals[0].get('name')}"
                f" (seq {terminals[0].get('seq')})",
            )
        if name in TERMINAL:
            terminals.append(event)
            continue
        run_id = event.get("step_run_id")
        iteration = event.get("iteration") if name in _ITERATION_NAMES else None
        starters = _STARTERS.get(name)
        if starters is None:
            started.add((name, run_id, iteration))
            if name == _TASK_RETRY and event.get("action_id"):
                retried[str(event["action_id"])] = int(seq or index)
            continue
        if not any((s, run_id, iteration) in started for s in starters):
            what = str(run_id) if iteration is None else f"{run_id}[{iteration}]"
            bad("unstarted-result", seq, f"{name} of {what} without {' or '.join(starters)}")
        action_id = event.get("action_id")
        if name in RESULT_NAMES and event.get("source") == _WORKER and action_id:
            action = str(action_id)
            before = results.get(action)
            if before is not None and retried.get(action, 0) < before:
                bad(
                    "duplicate-result",
                    seq,
                    f"{name} of {run_id}"
                    + ("" if iteration is None else f"[{iteration}]")
                    + f": action {action} already ended at seq {before}",
                )
            results[action] = int(seq or index)
    ended = terminal_status(terminals)
    if len(terminals) > 1:
        seqs = ", ".join(str(t.get("seq")) for t in terminals)
        bad("terminal", terminals[1].get("seq"), f"{len(terminals)} terminal events (seq {seqs})")
    if status is not None:
        if status == "running" and ended is not None:
            bad("row-state", terminals[0].get("seq"), f"the row is running, the log {ended}")
        elif status != "running" and ended is None:
            bad("row-state", None, f"the row is {status}, the log has no terminal event")
        elif status != "running" and ended != status:
            bad("row-state", terminals[0].get("seq"), f"the row is {status}, the log {ended}")
    return out


def child_calls(events: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The calls of `kind: playbook` a log records: child execution id -> the call's outcome
    (from `task.done` events and the task records folded into results)."""
    calls: dict[str, Mapping[str, Any]] = {}
    for event in events:
        payload = event.get("payload") or {}
        if not isinstance(payload, Mapping):
            continue
        if event.get("name") == _TASK_DONE:
            outcome = payload.get("outcome")
        elif event.get("name") in RESULT_NAMES:
            record = folded_task(dict(payload))
            outcome = None if record is None else record.get("outcome")
        else:
            continue
        meta = outcome.get("meta") if isinstance(outcome, Mapping) else None
        child = meta.get("child_execution_id") if isinstance(meta, Mapping) else None
        if child is not None and isinstance(outcome, Mapping):
            calls[str(child)] = outcome
    return calls


def check_children(
    parent: Mapping[str, Any],
    events: Sequence[Mapping[str, Any]],
    children: Iterable[Mapping[str, Any]],
) -> list[Violation]:
    """A child's end against its parent's: an ended parent leaves no child running (unless
    the call gave up waiting: a `Timeout`, the child is an execution of its own), and a call
    whose outcome is `ok` names a child that completed."""
    out: list[Violation] = []
    parent_ended = terminal_status(events) is not None
    calls = child_calls(events)
    for child in children:
        child_id = str(child["execution_id"])
        call = calls.get(child_id)
        status = child.get("status")
        timed_out = call is not None and (call.get("error") or {}).get("type") == "Timeout"
        if parent_ended and status == "running" and not timed_out:
            out.append(
                Violation(
                    child_id,
                    "child",
                    None,
                    f"still running after its parent {parent['execution_id']} ended",
                )
            )
        if call is not None and call.get("status") == "ok" and status != "completed":
            out.append(
                Violation(
                    child_id,
                    "child",
                    None,
                    f"the parent's call took it as ok, its status is {status}",
                )
            )
    return out


def check_execution(store: LogStore, record: Mapping[str, Any]) -> list[Violation]:
    """Every rule over one stored execution (its log, its row, its children)."""
    execution_id = str(record["execution_id"])
    events = store.read(execution_id)
    out = check_log(execution_id, events, record.get("status"))
    children = [r for r in store.executions() if str(r.get("parent_id")) == execution_id]
    if children:
        out.extend(check_children(record, events, children))
    return out


def check_store(store: LogStore) -> dict[str, list[Violation]]:
    """Every execution of a store: execution id -> its violations (empty when it holds)."""
    records = store.executions()
    by_parent: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        if record.get("parent_id"):
            by_parent.setdefault(str(record["parent_id"]), []).append(record)
    report: dict[str, list[Violation]] = {}
    for record in records:
        execution_id = str(record["execution_id"])
        events = store.read(execution_id)
        found = check_log(execution_id, events, record.get("status"))
        children = by_parent.get(execution_id)
        if children:
            found.extend(check_children(record, events, children))
        report[execution_id] = found
    return report


def violations(store: LogStore) -> list[Violation]:
    """Every violation of a store, flat (the tests' one assertion: it is empty)."""
    return [v for found in check_store(store).values() for v in found]


__all__ = [
    "TERMINAL",
    "LogStore",
    "Violation",
    "check_children",
    "check_execution",
    "check_log",
    "check_store",
    "child_calls",
    "terminal_status",
    "violations",
]
