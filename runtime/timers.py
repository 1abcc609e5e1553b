"""Listener timers, shared by the embedded runtime and the server (through runtime/driver.py).

A `timer` command asks for `timer.fired` after `delay` seconds counted from the listener's
`step.started`. A runtime that rebuilt the execution from its log (resume, takeover) knows
when that was and arms the timer for the time that remains.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from noetlc.ir.events import EventName
from noetlc.vm.protocol import Command, CommandKind, Event, Source, envelope


def started_times(events: Iterable[dict[str, Any]]) -> dict[str, float]:
    """step_run_id -> when the server recorded the listener's `step.started` (stored records)."""
    return {
        e["step_run_id"]: float(e["ts"])
        for e in events
        if e["name"] == EventName.STEP_STARTED
        and e.get("source") == Source.SERVER
        and e.get("step_run_id")
    }


def timer(execution_id: str, command: Command, started_at: dict[str, float]) -> tuple[float, Event]:
    """(seconds from now, the `timer.fired` event to deliver then)."""
    delay = float(command.delay or 0)
    started = started_at.get(command.step_run_id)
    if started is not None:
        delay = max(0.0, started + delay - time.time())
    event = envelope(
        EventName.TIMER_FIRED,
        Source.TIMER,
        event_id=f"{execution_id}:timer:{command.step_run_id}",
        step=command.step,
        step_run_id=command.step_run_id,
        payload={"delay": command.delay},
    )
    return delay, event


class Handle(Protocol):
    def cancel(self) -> None: ...


CallLater = Callable[[float, Callable[[Event], None], Event], Handle]


def _asyncio_call_later(delay: float, fn: Callable[[Event], None], event: Event) -> Handle:
    import asyncio  # the server's loop; the embedded runtime brings its own clock

    return asyncio.get_running_loop().call_later(delay, fn, event)


class Timers:
    """One execution's armed timers: `timer` commands arm one, `cancel` commands and
    `timer.fired` disarm it. `deliver` gets the `timer.fired` event when it is due (the
    embedded loop's queue; a server appends it to the log). `call_later` arms a timer: the
    running asyncio loop's (the server) unless given (the embedded loop's clock)."""

    __slots__ = ("call_later", "deliver", "execution_id", "handles", "started_at")

    def __init__(
        self,
        execution_id: str,
        deliver: Callable[[Event], None],
        call_later: CallLater | None = None,
    ) -> None:
        self.execution_id = execution_id
        self.deliver = deliver
        self.call_later = call_later or _asyncio_call_later
        self.handles: dict[str, Handle] = {}  # step_run_id -> its timer
        self.started_at: dict[str, float] = {}  # listener step runs: when they started

    def noted(self, events: Iterable[Event], now: float) -> None:
        """The server events just logged: a listener's `step.started` starts its clock."""
        for event in events:
            if event.name == EventName.STEP_STARTED and event.step_run_id:
                self.started_at[event.step_run_id] = now

    def apply(self, command: Command) -> None:
        """Arm a `timer` command; disarm the timer a `cancel` command stops."""
        if command.kind == CommandKind.TIMER:
            delay, event = timer(self.execution_id, command, self.started_at)
            self.handles[command.step_run_id] = self.call_later(delay, self.deliver, event)
        elif command.kind == CommandKind.CANCEL:
            self.disarm(command.step_run_id)

    def disarm(self, step_run_id: str | None) -> None:
        handle = self.handles.pop(step_run_id or "", None)
        if handle is not None:
            handle.cancel()

    def fired(self, event: Event) -> None:
        """`timer.fired` reached the VM: its timer is spent."""
        self.handles.pop(event.step_run_id or "", None)

    def close(self) -> None:
        for handle in self.handles.values():
            handle.cancel()
        self.handles.clear()
