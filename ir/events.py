"""The event vocabulary: every event name an execution's log can hold, and the legacy names
that arc guards may still test. The compiler, the IR tools, the analyzer, the VMs, the
runtimes and the service all read the names here (no other module spells one as a string;
`tests/architecture/test_event_names.py` checks), and the web console's list is generated
from `EventName` (`scripts/gen_console_events.py`).

`EventName` is a `StrEnum`: a member *is* its dotted string, so it compares, hashes,
serializes and is stored exactly like the string. Code that builds IR or stores names takes
the member's `.value` (the plain `str`), so dumps and reprs stay the strings they were.
"""

from __future__ import annotations

import functools
from enum import StrEnum


class EventName(StrEnum):
    """Every event an execution's log can hold (the meaning of each: docs/runtime.md)."""

    # client events (submission, requests from other processes)
    EXECUTION_REQUESTED = "playbook.execution.requested"
    EXECUTION_RESUMED = "execution.resumed"
    EXECUTION_CANCELLED = "execution.cancelled"
    # distributed: a cancel asked for; the owning server answers it with the one
    # `execution.cancelled` once nothing of its own can follow (not an input of the VM)
    CANCEL_REQUESTED = "execution.cancel.requested"
    SIGNAL_RECEIVED = "signal.received"
    # timer events (a listener's timeout)
    TIMER_FIRED = "timer.fired"
    # server events: recorded by the control VM
    WORKFLOW_STARTED = "workflow.started"
    STEP_SCHEDULED = "step.scheduled"
    STEP_SKIPPED = "step.skipped"
    LOOP_STARTED = "loop.started"
    LOOP_ITERATION_STARTED = "loop.iteration.started"
    LOOP_DONE = "loop.done"
    NEXT_SELECTED = "next.selected"
    JOIN_FIRED = "join.fired"
    WORKFLOW_FINISHED = "workflow.finished"
    EXECUTION_FAILED = "execution.failed"
    # worker events (and, for listeners and failed loops, server events too)
    STEP_STARTED = "step.started"
    STEP_DONE = "step.done"
    STEP_FAILED = "step.failed"
    LOOP_ITERATION_DONE = "loop.iteration.done"
    LOOP_ITERATION_FAILED = "loop.iteration.failed"
    TASK_STARTED = "task.started"
    TASK_DONE = "task.done"
    TASK_RETRY = "task.retry"


class LegacyEventName(StrEnum):
    """The event names of NoETL's older forms, which no log holds: a guard that tests one is
    rewritten (`case:` rules, NOE408; arcs, NOE412) or, in the analyzer, read as its alias
    (`legacy_aliases`: the names an arc may test; `step.enter` is a `case` rule's only)."""

    CALL_DONE = "call.done"  # the step's call finished well
    CALL_ERROR = "call.error"  # the step's call failed
    STEP_EXIT = "step.exit"  # the step ended
    STEP_ENTER = "step.enter"  # the step is admitted (a `case` rule on it runs then)


# The boundary events a step ends with: its success (`step.done`, `loop.done` for a loop
# step) and its failure. Arcs are decided on them.
STEP_DONE = EventName.STEP_DONE.value
LOOP_DONE = EventName.LOOP_DONE.value
STEP_FAILED = EventName.STEP_FAILED.value
BOUNDARY_NAMES: tuple[str, ...] = (STEP_DONE, LOOP_DONE, STEP_FAILED)

# The events that end an execution's log (exactly one, nothing after it), with the
# execution status each gives.
TERMINAL_STATUS: dict[str, str] = {
    EventName.WORKFLOW_FINISHED.value: "completed",
    EventName.EXECUTION_FAILED.value: "failed",
    EventName.EXECUTION_CANCELLED.value: "cancelled",
}


def legacy_aliases(done: str) -> dict[str, str]:
    """What each legacy name means on an arc of a step whose success event is `done`
    (`step.done`, or `loop.done` for a loop step): the boundary event to test instead."""
    return {
        LegacyEventName.CALL_DONE.value: done,
        LegacyEventName.CALL_ERROR.value: STEP_FAILED,
        LegacyEventName.STEP_EXIT.value: done,
    }


@functools.cache
def spellings(event: str) -> frozenset[str]:
    """The names a guard may test that mean the boundary event `event` on an arc: the event
    itself and its legacy aliases (`legacy_aliases` read backwards)."""
    done = LOOP_DONE if event == LOOP_DONE else STEP_DONE
    return frozenset({event}) | {
        legacy for legacy, meant in legacy_aliases(done).items() if meant == event
    }


__all__ = [
    "BOUNDARY_NAMES",
    "LOOP_DONE",
    "STEP_DONE",
    "STEP_FAILED",
    "TERMINAL_STATUS",
    "EventName",
    "LegacyEventName",
    "legacy_aliases",
    "spellings",
]
