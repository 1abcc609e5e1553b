"""What in-process task code prints, sent to the task's log (`ToolContext.log`).

Tools run on several threads of one process at once, so `sys.stdout`/`sys.stderr` cannot
be swapped per call (`contextlib.redirect_stdout` is process-wide). Instead both are wrapped
once by a router that sends a write to the log of the task running on the writing thread,
and anything else (the process's own output, threads the task started) where it went
before. Output of a task is therefore never printed by the process running it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

Log = Callable[[str, str], None]
_local = threading.local()
_install = threading.Lock()


class _Router:
    """A text stream that sends writes of a capturing thread to its log."""

    def __init__(self, name: str, real: TextIO) -> None:
        self._name = name
        self._real = real

    def write(self, text: str) -> int:
        log: Log | None = getattr(_local, "log", None)
        if log is None:
            return self._real.write(text)
        log(self._name, text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if getattr(_local, "log", None) is None:
            self._real.flush()

    def isatty(self) -> bool:
        return False if getattr(_local, "log", None) is not None else self._real.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _routed() -> None:
    with _install:
        if not isinstance(sys.stdout, _Router):
            sys.stdout = _Router("stdout", sys.stdout)
        if not isinstance(sys.stderr, _Router):
            sys.stderr = _Router("stderr", sys.stderr)


@contextmanager
def captured(log: Log | None) -> Iterator[None]:
    """While the block runs, this thread's prints go to `log` (None: unchanged)."""
    if log is None:
        yield
        return
    _routed()
    outer = getattr(_local, "log", None)
    _local.log = log
    try:
        yield
    finally:
        _local.log = outer
