"""What runs now: each step's state, loop progress and attempts, folded from the events.

The API keeps one `StepProgress` per running execution and feeds it only the events after
`after`. A step is `scheduled` once its run command is issued (`step.scheduled`,
`loop.started`), `running` from the first `task.started` of one of its actions (the worker
took it) until its terminal event, then `done`, `failed`, `skipped` or `cancelled`. A loop
counts its iterations: `total` (`loop.started`), `done`, `failed` and `in_flight` (issued and
not finished), and `running` (a worker took them). `attempts` is the highest attempt seen.
"""

from __future__ import annotations

from typing import Any

from noetlc.ir.events import EventName

_E = EventName
_TERMINAL_STEP = {_E.STEP_DONE.value: "done", _E.STEP_FAILED.value: "failed"}
_ITERATION_END = {_E.LOOP_ITERATION_DONE.value, _E.LOOP_ITERATION_FAILED.value}


class StepProgress:
    def __init__(self) -> None:
        self.after = 0
        self.current: str | None = None
        self.last_step: str | None = None
        self.completed: list[str] = []
        self.steps: dict[str, dict[str, Any]] = {}
        self.loops: dict[str, dict[str, int]] = {}
        self.running: dict[str, str] = {}  # action_id -> step, for actions a worker took
        self.cancelled = False

    def _step(self, name: str) -> dict[str, Any]:
        found = self.steps.get(name)
        if found is None:
            found = self.steps[name] = {"state": "pending", "runs": 0, "attempts": 0}
        return found

    def feed(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self.after = max(self.after, int(event["seq"]))
            name = event["name"]
            if name == _E.EXECUTION_CANCELLED:
                self.cancelled = True
            step = event.get("step")
            if not step:
                continue
            self.last_step = step
            info = self._step(step)
            payload = event.get("payload") or {}
            attempt = event.get("attempt")
            if isinstance(attempt, int) and attempt > info["attempts"]:
                info["attempts"] = attempt
            action = event.get("action_id")
            if name in (_E.STEP_SCHEDULED, _E.LOOP_STARTED):
                info["state"] = "scheduled"
                info["runs"] += 1
                if name == _E.LOOP_STARTED:
                    count = payload.get("count")
                    self.loops[step] = {
                        "total": count if isinstance(count, int) else 0,
                        "done": 0,
                        "failed": 0,
                        "in_flight": 0,
                        "running": 0,
                    }
            elif name == _E.LOOP_ITERATION_STARTED:
                self._loop(step)["in_flight"] += 1
            elif name == _E.TASK_STARTED:
                info["state"] = "running"
                self.current = step
                if action and action not in self.running:
                    self.running[action] = step
                    if event.get("iteration") is not None:
                        self._loop(step)["running"] += 1
            elif name == _E.STEP_STARTED and payload.get("listener"):
                info["state"] = "running"  # a listener waits for its signal
            elif name in _TERMINAL_STEP:
                info["state"] = _TERMINAL_STEP[name]
                self._finished(action)
                if name == _E.STEP_DONE and step not in self.completed:
                    self.completed.append(step)
            elif name in _ITERATION_END:
                loop = self._loop(step)
                loop["done" if name == _E.LOOP_ITERATION_DONE else "failed"] += 1
                loop["in_flight"] = max(0, loop["in_flight"] - 1)
                if self._finished(action):
                    loop["running"] = max(0, loop["running"] - 1)
            elif name == _E.LOOP_DONE:
                info["state"] = "failed" if payload.get("failed") else "done"
                loop = self._loop(step)
                loop["in_flight"] = loop["running"] = 0
                if step not in self.completed:
                    self.completed.append(step)
            elif name == _E.STEP_SKIPPED:
                info["state"] = "skipped"

    def _loop(self, step: str) -> dict[str, int]:
        found = self.loops.get(step)
        if found is None:
            found = self.loops[step] = {
                "total": 0,
                "done": 0,
                "failed": 0,
                "in_flight": 0,
                "running": 0,
            }
        return found

    def _finished(self, action: Any) -> bool:
        return bool(action) and self.running.pop(action, None) is not None

    def in_state(self, state: str) -> list[str]:
        return sorted(name for name, info in self.steps.items() if info["state"] == state)

    def view(self, ended: bool, cancelled: bool) -> dict[str, Any]:
        """`running_steps` (a worker runs them), `scheduled_steps` (issued, not taken yet),
        `steps` ({state, runs, attempts}) and `loops` for the status."""
        steps = {name: dict(info) for name, info in self.steps.items()}
        if ended:  # nothing runs once the execution ended: what did not finish was stopped
            for info in steps.values():
                if info["state"] in ("running", "scheduled"):
                    info["state"] = "cancelled" if cancelled else "failed"
        loops = {name: dict(loop) for name, loop in self.loops.items()}
        if ended:  # a fail-fast loop ends the run with iterations in flight: they were stopped
            for loop in loops.values():
                loop["in_flight"] = loop["running"] = 0
        return {
            "running_steps": [] if ended else self.in_state("running"),
            "scheduled_steps": [] if ended else self.in_state("scheduled"),
            "steps": steps,
            "loops": loops,
        }
