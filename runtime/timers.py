"""Listener timers, shared by the embedded runtime and the server.

A `timer` command asks for `timer.fired` after `delay` seconds counted from the listener's
`step.started`. A runtime that rebuilt the execution from its log (resume, takeover) knows
when that was and arms the timer for the time that remains.
"""

from __future__ import annotations

import time
from typing import Any

from noetlc.vm.control import Command


def started_times(events: list[dict[str, Any]]) -> dict[str, float]:
    """step_run_id -> when the server recorded the listener's `step.started`."""
    return {
        e["step_run_id"]: float(e["ts"])
        for e in events
        if e["name"] == "step.started" and e.get("source") == "server" and e.get("step_run_id")
    }


def timer(
    execution_id: str, command: Command, started_at: dict[str, float]
) -> tuple[float, dict[str, Any]]:
    """(seconds from now, the `timer.fired` event to deliver then)."""
    delay = float(command.delay or 0)
    started = started_at.get(command.step_run_id)
    if started is not None:
        delay = max(0.0, started + delay - time.time())
    event = {
        "event_id": f"{execution_id}:timer:{command.step_run_id}",
        "name": "timer.fired",
        "source": "timer",
        "step": command.step,
        "step_run_id": command.step_run_id,
        "payload": {"delay": command.delay},
    }
    return delay, event
