"""The embedded loop's helpers: a thread pool and a clock of timers without asyncio, and the
cyclic garbage collector kept off what lives through the run.

The embedded runtime's loop is one thread waiting on a queue: tools run in pool threads and
hand their events to that queue, timers are due times the loop itself checks between waits.
Neither needs an event loop, so `noetl-vm run` does not import asyncio, which drags in ssl,
`concurrent.futures` and logging (about a fifth of a cold start, measured with
`python -X importtime`; docs/cli.md).

The collector: a run's full collections scanned everything the process holds, the program's
tables included, so a 10,000-step chain spent a third of its time in three of them
(`gc.callbacks`; docs/runtime.md). What exists when the run starts lives through it: it is
frozen (exempt from collections) until the run ends.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class ThreadPool:
    """Up to `max_workers` daemon-less threads, started as work arrives; `shutdown` waits for
    what was submitted. The callables handle their own failures (they answer with events)."""

    __slots__ = ("_idle", "_jobs", "_lock", "_max", "_name", "_threads")

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        self._max = max_workers
        self._name = thread_name_prefix
        self._jobs: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1  # an idle thread takes it
            elif len(self._threads) < self._max:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}_{len(self._threads)}"
                )
                self._threads.append(thread)
                thread.start()
            self._jobs.put((fn, args))

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, args = job
            try:
                fn(*args)
            finally:
                with self._lock:
                    self._idle += 1

    def cancel_pending(self) -> None:
        """Drop what was submitted and not started yet (an execution taken over by another
        process: nothing queued may start)."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is None:  # a shutdown's marker stays
                self._jobs.put(None)
                return

    def shutdown(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        self._threads.clear()


class TimerHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    """Timers the loop thread fires itself: `call_later` arms one, `run_due` calls those that
    are due, `next_due` says how long the loop may wait. Only the loop thread uses it."""

    __slots__ = ("_heap", "_order")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, TimerHandle, Callable[[Any], None], Any]] = []
        self._order = itertools.count()  # equal due times fire in arming order

    def call_later(self, delay: float, fn: Callable[[Any], None], arg: Any) -> TimerHandle:
        handle = TimerHandle()
        due = time.monotonic() + max(0.0, delay)
        heapq.heappush(self._heap, (due, next(self._order), handle, fn, arg))
        return handle

    def next_due(self) -> float | None:
        """Seconds until the next armed timer is due (0 if one is); None when none is armed."""
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return max(0.0, heap[0][0] - time.monotonic()) if heap else None

    def run_due(self) -> None:
        heap = self._heap
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            _, _, handle, fn, arg = heapq.heappop(heap)
            if not handle.cancelled:
                handle.cancelled = True  # spent
                fn(arg)


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection while a program's tables are built: they all live on, and the
    young collections on the way would scan them for nothing. Reference counting goes on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def heap_frozen() -> Iterator[None]:
    """What exists now is left out of collections until the block ends (`gc.freeze`): the
    run's full collections scan only what the run allocates. Unfreezing at the end returns
    it to the oldest generation (a nested or concurrent run unfreezing early only costs a
    scan; freezing never changes what is freed, only when)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


__all__ = ["Clock", "ThreadPool", "TimerHandle", "collector_paused", "heap_frozen"]
