"""What a server keeps per owned execution (`Owned`) and how it reads an execution's log:
the new input events and cancel requests of a read, the constants of a round, and the small
asyncio helpers the server's modules share (runtime/server.py, runtime/server_commit.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from noetlc.diagnostics.errors import UserError
from noetlc.ir.events import EventName
from noetlc.runtime.bundles import BundleIndex
from noetlc.runtime.driver import Driver
from noetlc.runtime.timers import Timers
from noetlc.vm.control import ControlVM
from noetlc.vm.protocol import Command, CommandKind, Event, is_input

STEP_DEADLINE = 30.0  # seconds one VM step (a batch of inputs, or a replay) may take


class StepDeadline(UserError):
    """A VM step ran past the server's deadline (NOE859)."""


@dataclass
class Owned:
    execution_id: str
    driver: Driver
    after_seq: int
    server_events: int  # the server events the log holds (the VM numbers them from 1)
    timers: Timers
    # step -> its pipeline runs here, inside the round (noop-only); empty: nothing does
    inline: dict[str, bool]
    # ids of the action events we ran inline and appended past a gap in the log (another
    # process appended in between), or whose commit is in flight: a read may return them;
    # they are not fed again
    appended_inline: set[str]
    # the last round's commit, still in flight: the next round reads and feeds the VM
    # meanwhile, and commits after it (`advance`); None when there is none
    committing: asyncio.Future[bool] | None = None
    # the job of each action of a bundle in flight (a cancel names actions; runtime/bundles.py)
    bundles: BundleIndex = field(default_factory=BundleIndex)
    # its jobs were cancelled because it ended (before the terminal event was appended)
    ended: bool = False
    # when the server last read its log (time.monotonic(); `Server._needs_read`)
    read_at: float = 0.0

    @property
    def vm(self) -> ControlVM:
        return self.driver.vm


# how long a round waits for the executions' tasks before it goes on without the slow ones
ROUND_SLICE = 0.05

# inline actions per round at most (one transaction): the rest are enqueued for the workers
INLINE_ACTIONS = 1000

# the action events that carry results (stored by reference when large, as a worker does)
SHRUNK = frozenset({EventName.TASK_DONE, EventName.STEP_DONE, EventName.LOOP_ITERATION_DONE})


_CANCEL_REQUESTED = EventName.CANCEL_REQUESTED.value


def new_inputs(owned: Owned, records: list[dict[str, Any]]) -> tuple[list[Event], Event | None]:
    """The input events of `records` the VM has not had yet, and the first cancel request
    among them (None: none)."""
    inputs = []
    request = None
    bundles = owned.bundles
    for record in records:
        event = Event.from_record(record)
        if owned.appended_inline and event.event_id in owned.appended_inline:
            owned.appended_inline.discard(event.event_id)  # ours: the VM has it already
            continue
        if bundles:
            bundles.done(event.action_id)
        if is_input(event):
            if event.name == EventName.TIMER_FIRED:
                owned.timers.fired(event)
            inputs.append(event)
        elif request is None and event.name == _CANCEL_REQUESTED:
            request = event
    return inputs, request


def pending_cancel(records: list[dict[str, Any]]) -> Event | None:
    """A log's cancel request not answered yet (a server died before its answer)."""
    for record in records:
        if record["name"] == _CANCEL_REQUESTED:
            return Event.from_record(record)
    return None


def feed_inputs(owned: Owned, inputs: list[Event]) -> list[Event]:
    """Feed inputs once a cancel is asked for: the events they cause, no command run."""
    out: list[Event] = []
    for event in inputs:
        out.extend(owned.driver.feed(event).events)
    return out


def snapshot(vm: ControlVM, commands: list[Command]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Copies of the VM's ctx and results for the jobs of `commands` (they change before the
    jobs are enqueued when actions run inline in between); none when nothing is to run."""
    if not any(c.kind == CommandKind.RUN for c in commands):
        return {}, {}
    return dict(vm.ctx), dict(vm.results)


def retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def first_of(waits: list[Any], timeout: float) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
