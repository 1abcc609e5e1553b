"""Task code away from the process that runs it: python tasks in warm child processes, shell
tasks with a clean environment, both under resource limits.

`noetl-vm serve`, `server` and `worker` call `configure("process", ...)` at start; `noetl-vm
run` and library use keep `inline` (the user's own code on the user's own terminal, nothing
to protect). In `process` mode:

* a python task runs in a runner: a `python` child started with a clean environment (`clean_env`:
  PATH, HOME, locale, TMPDIR... — never the credential key, the API token or the keychain
  variables), its argv `python -c <runner>` (nothing of the service's). Runners are started
  ahead (`spare` kept warm) and serve one task at a time over a pipe (length-prefixed JSON).
  A task that declares credentials (`auth:`) gets a runner that has run nothing before, and
  that runner is retired after it, so no other task's code ever shares a process with those
  values; a runner is also retired after a kill, a MemoryError or `MAX_USES` tasks.
* limits (`TaskLimits`): address space (RLIMIT_AS, set in the runner), CPU seconds per task
  (the parent reads the runner's CPU time and kills it past the limit; RLIMIT_CPU backs it
  up), open files (RLIMIT_NOFILE), output bytes (what the task prints and its result), and
  the task's `timeout` (wall clock): past any, the runner is killed and the task alone fails.
* what the task prints is captured (never written to the service's own output) and handed to
  `ctx.log(stream, text)` when the runtime gives one.

This is process separation for one user, not a sandbox: the task runs as the same Unix user,
so it can read that user's files (a key file included) and, run as root, any process's
memory. docs/runtime.md, "Task isolation", says what it is and is not.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from noetlc.stdlib_tools.envelope import error

MAX_USES = 500
MAX_IDLE = 8  # used runners kept for the next tasks; more are stopped when they come back
TAIL = 4000  # characters of each output stream kept in the outcome (`py.stdout`, `py.stderr`)
POLL = 0.05  # seconds between looks at the cancel flag and the runner's CPU time
HEADER = struct.Struct(">I")
# what a task's environment keeps of the service's (names; LC_* too)
ENV_KEEP = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TERM",
    "SHELL",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
_RUNNER = "from noetlc.stdlib_tools.task_runner import main; main()"


@dataclass(frozen=True)
class TaskLimits:
    memory_bytes: int = 2 * 1024**3
    cpu_seconds: float = 600.0
    open_files: int = 1024
    output_bytes: int = 16 * 1024**2


@dataclass(frozen=True)
class Policy:
    mode: str = "inline"  # or "process"
    limits: TaskLimits = TaskLimits()
    spare: int = 1


_policy = Policy()


def configure(mode: str, limits: TaskLimits | None = None, spare: int = 1) -> None:
    """Set how this process runs task code (`inline` or `process`); `process` starts the
    warm runners at once."""
    global _policy
    if mode not in ("inline", "process"):
        raise ValueError(f"isolation mode must be inline or process, not {mode!r}")
    _policy = Policy(mode, limits or TaskLimits(), max(0, spare))
    if mode == "process":
        pool().warm()


def policy() -> Policy:
    return _policy


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k in ENV_KEEP or (k.startswith("LC_") and "=" not in k)
    }
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


def set_limits(limits: TaskLimits, cpu_used: float = 0.0) -> None:
    """The limits of the calling process (a runner, or a shell task before exec)."""
    import resource

    def cap(kind: int, value: int) -> None:
        with contextlib.suppress(ValueError, OSError):
            _, hard = resource.getrlimit(kind)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(kind, (value, hard if kind == resource.RLIMIT_CPU else value))

    cap(resource.RLIMIT_AS, limits.memory_bytes)
    cap(resource.RLIMIT_NOFILE, limits.open_files)
    cap(resource.RLIMIT_CPU, int(cpu_used + limits.cpu_seconds) + 1)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process, from /proc (None where there is none)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Runner:
    """One warm python child serving tasks one at a time."""

    def __init__(self, limits: TaskLimits) -> None:
        self.limits = limits
        self.uses = 0
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _RUNNER, json.dumps(limits.__dict__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=clean_env(),
            cwd="/",
            start_new_session=True,  # a kill reaches what the task started, not us
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, 9)
        with contextlib.suppress(Exception):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.close()

    def call(
        self,
        request: dict[str, Any],
        timeout: float | None,
        cancelled: Callable[[], bool] | None,
    ) -> dict[str, Any]:
        """The task's reply `{outcome, stdout, stderr}`, or an `{outcome}` of the failure
        (the runner is then dead or must be retired: `self.alive()` / the outcome says)."""
        try:
            data = json.dumps(request, default=str).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            outcome = error("ToolArgumentError", f"the task's input is not JSON: {exc}")
            return {"outcome": outcome, "stdout": "", "stderr": ""}
        self.uses += 1
        assert self.proc.stdin is not None and self.proc.stdout is not None
        # the CPU baseline is read at the first poll, not here: most tasks end before it
        # (a task's first POLL seconds of CPU are thus not counted against its limit)
        start_cpu: float | None = None
        try:
            self.proc.stdin.write(HEADER.pack(len(data)) + data)
            self.proc.stdin.flush()
        except OSError:
            return self._failed("SubprocessError", "the task's process is gone", retire=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        buffer = bytearray()
        wanted: int | None = None
        limit = self.limits.output_bytes
        while True:
            step = POLL if deadline is None else max(0.0, min(POLL, deadline - time.monotonic()))
            ready, _, _ = select.select([fd], [], [], step)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return self._died()
                buffer += chunk
                if wanted is None and len(buffer) >= HEADER.size:
                    (wanted,) = HEADER.unpack(buffer[: HEADER.size])
                    if wanted > limit + 65536:
                        return self._failed(
                            "OutputLimit",
                            f"the task's output and result are {wanted} bytes, over the limit"
                            f" of {limit}",
                            retire=True,
                        )
                if wanted is not None and len(buffer) >= HEADER.size + wanted:
                    reply: dict[str, Any] = json.loads(bytes(buffer[HEADER.size :]))
                    return reply
                continue
            if deadline is not None and time.monotonic() >= deadline:
                return self._failed(
                    "Timeout",
                    f"the task did not finish within {timeout:g} s; its process was killed",
                    retire=True,
                    retryable=True,
                )
            if cancelled is not None and cancelled():
                return self._failed(
                    "Cancelled", "the task was cancelled; its process was killed", retire=True
                )
            used = cpu_seconds(self.proc.pid)
            if start_cpu is None:
                start_cpu = used
            elif used is not None and used - start_cpu > self.limits.cpu_seconds:
                return self._failed(
                    "ResourceLimit",
                    f"the task used more than {self.limits.cpu_seconds:g} s of CPU time; its"
                    " process was killed",
                    retire=True,
                )

    def _died(self) -> dict[str, Any]:
        code = self.proc.wait()
        why = f"signal {-code}" if code < 0 else f"exit code {code}"
        hint = " (a resource limit: memory or CPU time?)" if code in (-9, -24) else ""
        failed = self._failed(
            "SubprocessError", f"the task's process ended with {why}{hint}", retire=True
        )
        failed["outcome"]["py"]["exit_code"] = code
        return failed

    def _failed(self, kind: str, message: str, retire: bool, **fields: Any) -> dict[str, Any]:
        if retire:
            self.kill()
        outcome = error(kind, message, **fields)
        outcome["py"] = {"exception_type": kind}
        return {"outcome": outcome, "stdout": "", "stderr": "", "retire": True}


class Pool:
    """The warm runners of this process: `spare` fresh ones kept started ahead, and idle
    used ones kept for tasks without credentials."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fresh: list[Runner] = []
        self._used: list[Runner] = []
        self._starting = 0

    def warm(self) -> None:
        limits, spare = _policy.limits, _policy.spare
        with self._lock:
            missing = spare - len(self._fresh) - self._starting
            self._starting += max(0, missing)
        for _ in range(max(0, missing)):
            threading.Thread(target=self._start_one, args=(limits,), daemon=True).start()

    def _start_one(self, limits: TaskLimits) -> None:
        try:
            runner = Runner(limits)
        finally:
            with self._lock:
                self._starting -= 1
        with self._lock:
            self._fresh.append(runner)

    def take(self, fresh: bool) -> Runner:
        limits = _policy.limits
        with self._lock:
            while not fresh and self._used:
                runner = self._used.pop()
                if runner.alive() and runner.limits == limits:
                    return runner
                runner.kill()
            while self._fresh:
                runner = self._fresh.pop(0)
                if runner.alive() and runner.limits == limits:
                    break
                runner.kill()
            else:
                runner = None  # type: ignore[assignment]
        self.warm()
        return runner if runner is not None else Runner(limits)

    def give_back(self, runner: Runner, retire: bool) -> None:
        if retire or runner.uses >= MAX_USES or not runner.alive():
            runner.kill()
            return
        with self._lock:
            keep = len(self._used) < MAX_IDLE
            if keep:
                self._used.append(runner)
        if not keep:
            runner.kill()

    def close(self) -> None:
        with self._lock:
            runners = self._fresh + self._used
            self._fresh, self._used = [], []
        for runner in runners:
            runner.kill()


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool() -> Pool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = Pool()
        return _pool


def run_python(
    request: dict[str, Any],
    *,
    timeout: float | None,
    cancelled: Callable[[], bool] | None,
    log: Callable[[str, str], None] | None,
    cwd: str | None,
) -> dict[str, Any]:
    """Run a python task's request (python_exec's shape) in a runner; the outcome."""
    fresh = bool(request.get("auth"))
    runner = pool().take(fresh)
    try:
        reply = runner.call({**request, "cwd": cwd}, timeout, cancelled)
    except BaseException:
        runner.kill()
        raise
    retire = fresh or bool(reply.get("retire"))
    pool().give_back(runner, retire)
    outcome: dict[str, Any] = reply["outcome"]
    deliver(log, reply.get("stdout") or "", reply.get("stderr") or "")
    py = outcome.setdefault("py", {})
    if isinstance(py, dict):
        py.setdefault("stdout", (reply.get("stdout") or "")[-TAIL:])
        py.setdefault("stderr", (reply.get("stderr") or "")[-TAIL:])
    return outcome


def deliver(log: Callable[[str, str], None] | None, stdout: str, stderr: str) -> None:
    """A task's captured output to the runtime's log (never to this process's output)."""
    if log is None:
        return
    for stream, text in (("stdout", stdout), ("stderr", stderr)):
        if text:
            with contextlib.suppress(Exception):  # a log that fails must not fail the task
                log(stream, text)


def with_limits(limits: TaskLimits, **changes: Any) -> TaskLimits:
    return replace(limits, **changes)


def scrub_process(secrets: list[str]) -> None:
    """Overwrite `secrets` where /proc/<pid>/environ and /proc/<pid>/cmdline read them (the
    memory the kernel shows there, which outlives `os.environ` changes), and drop the
    variables from `os.environ`: a task's process, started by this one, cannot find them
    there. Linux only; elsewhere (or where /proc/self/mem cannot be written) nothing happens."""
    wanted = [s.encode() for s in secrets if s and len(s) >= 4]
    if not wanted or not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        # arg_start, arg_end, env_start, env_end: fields 48-51 (1-based), here from field 3
        spans = [(int(fields[45]), int(fields[46])), (int(fields[47]), int(fields[48]))]
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            for start, end in spans:
                mem.seek(start)
                block = mem.read(end - start)
                changed = block
                for secret in wanted:
                    changed = changed.replace(secret, b"*" * len(secret))
                if changed != block:
                    mem.seek(start)
                    mem.write(changed)
    except (OSError, ValueError, IndexError):
        return
