"""The body of a python task runner (stdlib_tools/isolation.py starts it as `python -c`).

It sets its limits, then serves requests one at a time: a 4-byte big-endian length and a JSON
request on stdin; the same framing of `{outcome, stdout, stderr}` on stdout. File descriptors
0 and 1 are moved away first (to /dev/null), so nothing a task writes — `print`, a C
extension, a process it starts — can reach the protocol pipes; what Python code prints is
captured per task (bounded by the output limit) and returned.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
from typing import Any

HEADER = struct.Struct(">I")


class Capped(io.TextIOBase):
    """A text sink that keeps at most `limit` characters (and says it cut the rest)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.cut = False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.limit - self.size
        if room > 0:
            kept = text[:room]
            self.parts.append(kept)
            self.size += len(kept)
        if len(text) > max(room, 0):
            self.cut = True
        return len(text)

    def value(self) -> str:
        text = "".join(self.parts)
        return text + ("\n[output cut at the task's output limit]\n" if self.cut else "")


def _read_exact(stream: Any, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main() -> None:
    import contextlib
    import resource

    from noetlc.stdlib_tools.isolation import TaskLimits, set_limits

    limits = TaskLimits(**json.loads(sys.argv[1]))
    inbox = os.fdopen(os.dup(0), "rb", buffering=0)
    outbox = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    set_limits(limits)
    from noetlc.stdlib_tools.python_exec import execute

    here = "/"
    while True:
        header = _read_exact(inbox, HEADER.size)
        if header is None:
            return
        (size,) = HEADER.unpack(header)
        body = _read_exact(inbox, size)
        if body is None:
            return
        request = json.loads(body)
        cwd = request.pop("cwd", None) or "/"
        if cwd != here:
            try:
                os.chdir(cwd)
                here = cwd
            except OSError:
                os.chdir("/")
                here = "/"
        # this task's CPU time limit, from what the runner used so far (one setrlimit)
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu_limit = int(used.ru_utime + used.ru_stime + limits.cpu_seconds) + 1
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, resource.RLIM_INFINITY))
        out, err = Capped(limits.output_bytes), Capped(limits.output_bytes)
        sys.stdout, sys.stderr = out, err
        try:
            outcome = execute(request)
        except BaseException as exc:  # SystemExit or KeyboardInterrupt from task code
            from noetlc.stdlib_tools.envelope import error

            outcome = error(type(exc).__name__, f"the task raised {type(exc).__name__}: {exc}")
        finally:
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        reply: dict[str, Any] = {"outcome": outcome, "stdout": out.value(), "stderr": err.value()}
        error_type = ((outcome.get("error") or {}).get("type")) if outcome else None
        if error_type in ("MemoryError", "SystemExit", "KeyboardInterrupt"):
            reply["retire"] = True  # the runner's state may be broken: the next task gets another
        try:
            data = json.dumps(reply).encode("utf-8")
        except (TypeError, ValueError):
            data = json.dumps(reply, default=repr).encode("utf-8")
        except MemoryError:
            return
        outbox.write(HEADER.pack(len(data)) + data)
