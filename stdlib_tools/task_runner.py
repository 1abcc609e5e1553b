"""The body of a python task runner (stdlib_tools/isolation.py starts it as `python -c`).

It sets its limits, then serves requests one at a time: a 4-byte big-endian length and a JSON
request on stdin; the same framing of `{outcome, stdout, stderr}` on stdout. File descriptors
0 and 1 are moved away first (to /dev/null), so nothing a task writes — `print`, a C
extension, a process it starts — can reach the protocol pipes; what Python code prints is
captured per task (bounded by the output limit) and returned.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import struct
import sys
from typing import Any

HEADER = struct.Struct(">I")


class Capped(io.TextIOBase):
    """A text sink that keeps at most `limit` characters (and says it cut the rest).

    It has what code expects of `sys.stdout`: an `encoding`, and a `buffer` for bytes
    (`sys.stdout.buffer.write(b"...")`), decoded as UTF-8 across writes; bytes that are not
    UTF-8 become lone surrogates, which the task log escapes (`\\xff`)."""

    encoding = "utf-8"
    errors = "surrogateescape"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.cut = False
        self.buffer = BytesInto(self.write)

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
        self.buffer.flush()  # an incomplete UTF-8 sequence at the end, escaped
        text = "".join(self.parts)
        return text + ("\n[output cut at the task's output limit]\n" if self.cut else "")


class BytesInto(io.RawIOBase):
    """A binary stream that hands what it gets, decoded, to a text `write`."""

    def __init__(self, write: Any) -> None:
        self._write = write
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(memoryview(data))  # as a real binary stream: bytes-like only
        text = self._decoder.decode(chunk)
        if text:
            self._write(text)
        return len(chunk)

    def flush(self) -> None:
        text = self._decoder.decode(b"", final=True)
        if text:
            self._write(text)


class Baseline:
    """What a task may change in its runner that the next task (maybe of another execution)
    would see, as it was before the first task; `restore` puts it back after each task.

    Restored (cheap: a comparison when nothing changed): `os.environ`, the `builtins`
    namespace, `sys.path`, the working directory (set per task anyway), the `os.umask`.
    Refused (the runner is retired, `restore` returns False): threads the task left running,
    a trace or profile function, signal handlers it installed, child processes it left.
    Kept, on purpose: imported modules (a re-import per task would cost what the pool saves;
    see docs/runtime.md, "Task isolation")."""

    def __init__(self) -> None:
        import _signal as signal  # the C module: no enum conversion per call
        import builtins
        import threading

        self.environ = dict(os.environ)
        self.raw_environ = _raw_environ()
        self.builtins = dict(vars(builtins))
        self.path = list(sys.path)
        self.threads = threading.active_count()
        self.umask = os.umask(0o077)
        os.umask(self.umask)
        self.signals = {
            sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)
        }

    def restore(self) -> bool:
        import _signal as signal  # the C module: no enum conversion per call
        import builtins
        import threading

        if threading.active_count() > self.threads:
            return False  # a thread of the task's: nothing is touched under it
        if getattr(os.environ, "_data", os.environ) != self.raw_environ:  # encoded: 100× faster
            os.environ.clear()
            os.environ.update(self.environ)
        names = vars(builtins)
        if names != self.builtins:
            names.clear()
            names.update(self.builtins)
        if sys.path != self.path:
            sys.path[:] = self.path
        os.umask(self.umask)
        if sys.gettrace() is not None or sys.getprofile() is not None:
            return False
        if any(signal.getsignal(s) != h for s, h in self.signals.items()):
            return False
        while True:  # children the task left: ended ones are reaped, a running one retires
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid == 0:
                return False


def _raw_environ() -> dict[Any, Any]:
    """CPython's encoded copy of the environment (what `os.environ` decodes on each read)."""
    return dict(getattr(os.environ, "_data", os.environ))


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

    baseline = Baseline()
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
        try:  # every time: the task before may have moved elsewhere (one system call)
            os.chdir(cwd)
        except OSError:
            os.chdir("/")
        # this task's CPU time limit, from what the runner used so far (one setrlimit)
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu_limit = int(used.ru_utime + used.ru_stime + limits.cpu_seconds) + 1
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, resource.RLIM_INFINITY))
        out, err = Capped(limits.output_bytes), Capped(limits.output_bytes)
        sys.stdout, sys.stderr = out, err
        try:
            if "tool" in request:  # a plugin's call (its kind asked for isolation)
                from noetlc.stdlib_tools.tool_exec import run_call

                outcome = run_call(request["tool"])
            else:
                outcome = execute(request)
        except BaseException as exc:  # SystemExit or KeyboardInterrupt from task code
            from noetlc.stdlib_tools.envelope import error

            outcome = error(type(exc).__name__, f"the task raised {type(exc).__name__}: {exc}")
        finally:
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        reply: dict[str, Any] = {"outcome": outcome, "stdout": out.value(), "stderr": err.value()}
        error_type = ((outcome.get("error") or {}).get("type")) if outcome else None
        if error_type == "MemoryError" and not outcome["error"].get("message"):
            # Python's MemoryError has no text: say which limit it met
            outcome["error"]["message"] = (
                f"the task ran out of memory (its limit: {limits.memory_bytes // 2**20} MB"
                " of address space, --task-memory-mb)"
            )
        if error_type in ("MemoryError", "SystemExit", "KeyboardInterrupt"):
            reply["retire"] = True  # the runner's state may be broken: the next task gets another
        if not baseline.restore():
            reply["retire"] = True  # the task left something running that would see the next
        try:
            data = json.dumps(reply).encode("utf-8")
        except (TypeError, ValueError):
            data = json.dumps(reply, default=repr).encode("utf-8")
        except MemoryError:
            return
        outbox.write(HEADER.pack(len(data)) + data)
