"""The live progress line of `noetl-vm run` on a terminal: steps, loop iterations, retries.

It reads the same event batches the store receives (`on_events`) and redraws one status line
on standard error at most ten times a second; the final line stays. Nothing is printed when
standard error is not a terminal (CI logs stay clean) or with `--json`.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from noetlc.ir.events import EventName
from noetlc.vm.protocol import Event

_ITERATION_ENDS = frozenset({EventName.LOOP_ITERATION_DONE, EventName.LOOP_ITERATION_FAILED})
_TERMINAL = frozenset(
    {
        EventName.STEP_DONE,
        EventName.STEP_FAILED,
        EventName.LOOP_ITERATION_DONE,
        EventName.LOOP_ITERATION_FAILED,
    }
)
_STEP_ENDS = frozenset(
    {EventName.STEP_DONE, EventName.LOOP_DONE, EventName.STEP_FAILED, EventName.STEP_SKIPPED}
)


class Progress:
    def __init__(self, total_steps: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total_steps = total_steps
        self.done: set[str] = set()
        self.failed: set[str] = set()
        self.running: dict[str, str] = {}  # step_run_id -> step
        self.loops: dict[str, list[int]] = {}  # step -> [done, total]
        self.retries = 0
        self.tasks = 0
        self.last_draw = 0.0
        self.started = time.monotonic()

    def __call__(self, events: list[Event]) -> None:
        for event in events:
            name, step = event.name, event.step
            if name == EventName.STEP_SCHEDULED or name == EventName.LOOP_STARTED:
                self.running[event.step_run_id or ""] = step or ""
                if name == EventName.LOOP_STARTED:
                    self.loops[step or ""] = [0, int(event.data.get("count", 0))]
                continue
            if name == EventName.TASK_DONE:
                self.tasks += 1
            elif name == EventName.TASK_RETRY:
                self.retries += 1
            elif name in _TERMINAL and "call" in event.data:
                self.tasks += 1  # the last task's record, folded into the terminal event
            if name in _ITERATION_ENDS and step in self.loops:
                self.loops[step][0] += 1
            elif name in _STEP_ENDS:
                self.running.pop(event.step_run_id or "", None)
                (self.failed if name == EventName.STEP_FAILED else self.done).add(step or "")
        now = time.monotonic()
        if now - self.last_draw >= 0.1:
            self.last_draw = now
            self.draw()

    def line(self) -> str:
        parts = [f"steps {len(self.done)}/{self.total_steps}", f"tasks {self.tasks}"]
        for step, (done, total) in self.loops.items():
            if done < total:
                parts.append(f"{step} {done}/{total}")
        if self.retries:
            parts.append(f"retries {self.retries}")
        if self.failed:
            parts.append(f"failed {', '.join(sorted(self.failed))}")
        running = sorted(set(self.running.values()))
        if running:
            parts.append(f"running {', '.join(running[:3])}{'…' if len(running) > 3 else ''}")
        parts.append(f"{time.monotonic() - self.started:.1f}s")
        return " · ".join(parts)

    def draw(self) -> None:
        self.stream.write("\r\x1b[2K" + self.line())
        self.stream.flush()

    def close(self) -> None:
        self.draw()
        self.stream.write("\n")
        self.stream.flush()
