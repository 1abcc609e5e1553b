"""What in-process task code prints, sent to the task's log (`ToolContext.log`).

Tools run on several threads of one process at once, so `sys.stdout`/`sys.stderr` cannot
be swapped per call (`contextlib.redirect_stdout` is process-wide). Instead both are wrapped
once by a router that sends a write to the log of the task running on the writing thread,
and anything else (the process's own output, threads the task started) where it went
before. Output of a task is therefore never printed by the process running it.
"""

from __future__ import annotations

import codecs
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
        self.buffer = _BytesRouter(self)

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


class _BytesRouter:
    """`sys.stdout.buffer` of the router: bytes a capturing thread writes go to its log,
    decoded as UTF-8 (bytes that are not become lone surrogates, which the log escapes);
    anything else to the real stream's buffer."""

    def __init__(self, router: _Router) -> None:
        self._router = router

    def write(self, data: Any) -> int:
        log: Log | None = getattr(_local, "log", None)
        if log is None:
            written: int = self._router._real.buffer.write(data)
            return written
        chunk = bytes(memoryview(data))  # as a real binary stream: bytes-like only
        decoders = _local.decoders
        name = self._router._name
        if name not in decoders:
            decoders[name] = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        text = decoders[name].decode(chunk)
        if text:
            log(name, text)
        return len(chunk)

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        if getattr(_local, "log", None) is None:
            self._router._real.buffer.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._router._real.buffer, name)


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
    outer_decoders = getattr(_local, "decoders", None)
    _local.log, _local.decoders = log, {}
    try:
        yield
    finally:
        for name, decoder in _local.decoders.items():  # an incomplete sequence at the end
            rest = decoder.decode(b"", final=True)
            if rest:
                log(name, rest)
        _local.log, _local.decoders = outer, outer_decoders
