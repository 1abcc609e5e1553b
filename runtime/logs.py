"""Task output: what a task printed (stdout, stderr), bounded, escaped, redacted, stored.

A tool reports output through `ToolContext.log(stream, text)` (the python tool captures the
task's `print`s, the shell tool its commands' output). `ActionLog` is one action's writer
(a step run, or one iteration): it keeps at most `PER_TASK` characters per task call and the
execution at most `PER_EXECUTION` (`Budget`, shared by the actions of one execution in one
process), then writes one marker line and drops the rest. Text is made safe before it is
kept — invalid UTF-8 and lone surrogates become `\\xNN` escapes, control characters other
than tab and newline `\\xNN` — and redacted with the execution's keychain, like events.

Rows go to a `Sink` in chunks: when a chunk holds a whole line and 0.2 s passed since the
last one (or it reached 8 KiB), and when the action ends, so a follower sees output while a
long task runs. The runtime's sink stores them with the execution (`logs` table, SQLite and
PostgreSQL), where `GET /api/executions/{id}/logs` reads them; nothing is printed to the
runtime's own output.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from noetlc.stdlib_tools.text import clean

PER_TASK = 64 * 1024  # characters kept per task call (per attempt)
PER_EXECUTION = 1024 * 1024  # characters kept per execution (per process running it)
CHUNK = 8 * 1024
INTERVAL = 0.2  # seconds between chunks of one action, while a line is complete
STREAMS = ("stdout", "stderr")

Row = dict[str, Any]
Sink = Callable[[list[Row]], None]


class Budget:
    """The characters an execution may still keep in this process."""

    def __init__(self, limit: int = PER_EXECUTION) -> None:
        self.left = limit
        self.limit = limit
        self.marked = False
        self._lock = threading.Lock()

    def mark(self) -> bool:
        """True once: the execution's cut marker is to be written now."""
        with self._lock:
            first, self.marked = not self.marked, True
            return first

    def take(self, want: int) -> int:
        with self._lock:
            got = min(want, max(self.left, 0))
            self.left -= got
            return got


class ActionLog:
    """The output of one action's task calls, written to `sink` in chunks."""

    def __init__(
        self,
        sink: Sink,
        budget: Budget,
        step: str,
        action_id: str,
        iteration: int | None,
        redact: Callable[[Any], Any] | None = None,
        per_task: int = PER_TASK,
    ) -> None:
        self.sink = sink
        self.budget = budget
        self.base = {"step": step, "action_id": action_id, "iteration": iteration}
        self.redact = redact
        self.per_task = per_task
        self.pending: list[Row] = []
        self.size = 0
        self.last = time.monotonic()
        self.kept: dict[tuple[str, int], int] = {}  # (task, attempt) -> characters kept
        self.cut: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def writer(self, task: str, attempt: int) -> Callable[[str, str], None]:
        """The `ToolContext.log` of one task call."""

        def log(stream: str, text: str) -> None:
            self.write(task, attempt, stream, text)

        return log

    def write(self, task: str, attempt: int, stream: str, text: Any) -> None:
        if not text:
            return
        stream = stream if stream in STREAMS else "stdout"
        text = clean(text)
        key = (task, attempt)
        with self._lock:
            if key in self.cut:
                return
            allowed = min(len(text), max(self.per_task - self.kept.get(key, 0), 0))
            keep = self.budget.take(allowed)
            if keep < len(text):
                self.cut.add(key)
                if keep == allowed:
                    size, limit = self.per_task, "task"
                elif self.budget.mark():
                    size, limit = self.budget.limit, "execution"
                else:  # the execution's marker is written already
                    return
                text = text[:keep] + (
                    f"\n[output cut: the {limit}'s log limit of {size:,} characters was"
                    " reached; the rest is not kept]\n"
                )
            self.kept[key] = self.kept.get(key, 0) + keep
            self._add(task, attempt, stream, text)
            now = time.monotonic()
            if self.size >= CHUNK or (now - self.last >= INTERVAL and "\n" in text):
                self._flush(now)

    def _add(self, task: str, attempt: int, stream: str, text: str) -> None:
        last = self.pending[-1] if self.pending else None
        if last is not None and last["task"] == task and last["stream"] == stream:
            last["text"] += text  # consecutive writes of one stream: one row
        else:
            self.pending.append(
                {
                    **self.base,
                    "task": task,
                    "attempt": attempt,
                    "stream": stream,
                    "ts": time.time(),
                    "text": text,
                }
            )
        self.size += len(text)

    def flush(self) -> None:
        with self._lock:
            self._flush(time.monotonic())

    def _flush(self, now: float) -> None:
        rows, self.pending, self.size, self.last = self.pending, [], 0, now
        if not rows:
            return
        if self.redact is not None:
            for row in rows:
                row["text"] = self.redact(row["text"])
        self.sink(rows)


class ExecutionLogs:
    """What a runtime lends the actions of one execution: the sink and the budget."""

    def __init__(self, sink: Sink, redact: Callable[[Any], Any] | None = None) -> None:
        self.sink = sink
        self.redact = redact
        self.budget = Budget()

    def action(self, step: str, action_id: str, iteration: int | None) -> ActionLog:
        return ActionLog(self.sink, self.budget, step, action_id, iteration, self.redact)


def log_rows_view(rows: list[Row]) -> list[Row]:
    """Stored rows as the API shows them (the store's `seq` is the follow cursor)."""
    return [
        {
            "seq": int(r["seq"]),
            "ts": r.get("ts"),
            "step": r.get("step"),
            "iteration": r.get("iteration"),
            "task": r.get("task"),
            "attempt": r.get("attempt"),
            "stream": r.get("stream"),
            "text": r.get("text") or "",
        }
        for r in rows
    ]
