"""Cancel: a cancelled python task running in a subprocess is killed and its worker slot is
free again (a `--concurrency 1` worker runs the next execution); the embedded runtime kills
it too."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore
from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.server import Server
from noetlc.runtime.stored_program import encode_program, requested_event
from noetlc.runtime.worker import Worker
from noetlc.vm.protocol import EventName, Source, envelope

STUCK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: stuck, path: t/stuck}
workload: {pidfile: ""}
workflow:
  - step: start
    tool:
      kind: python
      input: {pidfile: "{{ workload.pidfile }}"}
      spec: {isolation: subprocess, timeout: 3600}
      code: |
        import os, time
        open(pidfile, "w").write(str(os.getpid()))
        time.sleep(3600)
        result = 1
"""

QUICK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: quick, path: t/quick}
workflow:
  - step: start
    tool: {kind: python, code: "result = 42"}
"""


def _payload(text: str) -> dict[str, Any]:
    unit = compile_source(text, "t.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    payload: dict[str, Any] = unit.payload
    return payload


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a killed child that nobody reaped yet is a zombie: not running
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "zombie" in status.read_text())


def _wait_for_pid(pidfile: Path, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while not (pidfile.exists() and pidfile.read_text()):
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.05)
    return int(pidfile.read_text())


def test_a_cancelled_subprocess_task_is_killed_and_its_slot_freed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], int]:
        backend = MemoryBackend()
        stop = asyncio.Event()
        server = Server(backend, ttl=2.0, poll=0.05)
        worker = Worker(backend, concurrency=1, ttl=30.0, poll=0.05)
        tasks = [asyncio.create_task(server.run(stop)), asyncio.create_task(worker.run(stop))]
        try:
            stuck = await _submit(backend, _payload(STUCK), {"pidfile": str(pidfile)})
            pid = await asyncio.to_thread(_wait_for_pid, pidfile)
            await backend.events.append(
                stuck,
                [envelope(EventName.EXECUTION_CANCELLED, Source.CLIENT, event_id=f"{stuck}:c")],
            )
            cancelled = await _finished(backend, stuck)
            quick = await _submit(backend, _payload(QUICK), {})
            done = await _finished(backend, quick)  # the one slot is free again
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 15)
        return cancelled, done, pid

    cancelled, done, pid = asyncio.run(scenario())
    assert cancelled["status"] == "cancelled"
    assert done["status"] == "completed"
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, "the task's process was not killed"
        time.sleep(0.05)


def test_embedded_cancel_kills_the_subprocess(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    store = MemoryStore()
    execution_id = "exec-stuck"
    result: dict[str, Any] = {}

    def cancel_when_started() -> None:
        _wait_for_pid(pidfile)
        store.request(execution_id, "cancel")

    async def scenario() -> None:
        waiter = asyncio.create_task(asyncio.to_thread(cancel_when_started))
        result.update(
            await asyncio.to_thread(
                run_embedded,
                _payload(STUCK),
                {"pidfile": str(pidfile)},
                store,
                execution_id=execution_id,
            )
        )
        await waiter

    asyncio.run(scenario())
    assert result["status"] == "cancelled"
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, "the task's process was not killed"
        time.sleep(0.05)


async def _submit(backend: MemoryBackend, payload: dict[str, Any], workload: Any) -> str:
    execution_id = str(uuid.uuid4())
    name = payload["metadata"]["name"]
    await backend.events.create_execution(execution_id, name)
    first = requested_event(execution_id, name, encode_program(payload), workload, None)
    await backend.events.append(execution_id, [first])
    await backend.owners.offer([execution_id])
    return execution_id


async def _finished(backend: MemoryBackend, execution_id: str) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        record = await backend.events.execution(execution_id)
        assert record is not None
        if record["status"] != "running":
            return dict(record)
        assert asyncio.get_running_loop().time() < deadline, "never finished"
        await backend.events.wait_for_events(execution_id, record["last_seq"], 0.1)
