"""The live progress line of `noetl-vm run` on a terminal: steps, loop iterations, retries.

It reads the same event batches the store receives (`on_events`) and redraws one status line
on standard error at most ten times a second; the final line stays. Nothing is printed when
standard error is not a terminal (CI logs stay clean) or with `--json`.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


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

    def __call__(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            name, step = event["name"], event.get("step")
            if name == "step.scheduled" or name == "loop.started":
                self.running[event.get("step_run_id") or ""] = step or ""
                if name == "loop.started":
                    self.loops[step or ""] = [0, int(event["payload"].get("count", 0))]
            elif name in ("loop.iteration.done", "loop.iteration.failed") and step in self.loops:
                self.loops[step][0] += 1
            elif name == "task.done":
                self.tasks += 1
            elif name == "task.retry":
                self.retries += 1
            elif name in ("step.done", "loop.done", "step.failed", "step.skipped"):
                self.running.pop(event.get("step_run_id") or "", None)
                (self.failed if name == "step.failed" else self.done).add(step or "")
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
