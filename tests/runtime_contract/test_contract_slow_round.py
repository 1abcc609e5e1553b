"""One execution's slow VM step does not hold a server's other executions (runtime/server.py
`tick`: each execution's adoption or round is a task of its own).

The slow step is made to wait, in its thread, until the healthy execution has completed: with
a server that advanced its executions one after the other, the healthy one could never
complete first (the test would time out); here it does, and the held one then completes too."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from noetlc.runtime.backend import EVENTS
from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.server import Server
from noetlc.runtime.worker import Worker
from tests.runtime_contract.cluster_helpers import compiled, submit, until_finished

T = TypeVar("T")

CHAIN = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: NAME, path: t/NAME}
workflow:
  - step: start
    tool: {kind: noop, result: 3}
    next: {arcs: [{step: end, when: "{{ start == 3 }}"}]}
  - step: end
    tool: {kind: python, code: "result = 'done'"}
"""


class HeldServer(Server):
    """Its VM steps of the `held` execution wait for `release` (in the step's thread)."""

    def __init__(self, backend: Any, release: threading.Event) -> None:
        super().__init__(backend, ttl=5.0, poll=0.05)
        self.release = release
        self.held: str | None = None
        self.waited = threading.Event()

    async def _within_deadline(self, execution_id: str, work: Callable[[], T]) -> T:
        if execution_id != self.held:
            return await super()._within_deadline(execution_id, work)

        def held() -> T:
            self.waited.set()
            assert self.release.wait(60), "never released"
            return work()

        return await super()._within_deadline(execution_id, held)


def test_a_held_execution_does_not_hold_the_others() -> None:
    async def scenario() -> tuple[str, str, bool]:
        backend = MemoryBackend()
        release = threading.Event()
        server = HeldServer(backend, release)
        stop = asyncio.Event()
        worker = Worker(backend, concurrency=2, ttl=5.0, poll=0.05)
        tasks = [asyncio.create_task(server.run(stop)), asyncio.create_task(worker.run(stop))]
        try:
            held_payload = compiled(CHAIN.replace("NAME", "held"))
            server.held = held_id = await submit(backend, held_payload)
            while not server.waited.is_set():  # its adoption waits in its thread now
                await asyncio.sleep(0.01)
            healthy = await submit(backend, compiled(CHAIN.replace("NAME", "healthy")))
            healthy_status = (await until_finished(backend, healthy, timeout=60))["status"]
            still_held = not release.is_set()
            release.set()
            held_status = (await until_finished(backend, held_id, timeout=60))["status"]
        finally:
            release.set()
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
        return healthy_status, held_status, still_held

    healthy, held, still_held = asyncio.run(scenario())
    assert healthy == "completed" and still_held
    assert held == "completed"


def test_a_round_that_found_nothing_new_wakes_nobody() -> None:
    """A round that ends within `tick` (nothing new to read: the job waits for a worker)
    does not wake the server: waking on it made the server read its inputs again at once,
    over and over, until a worker's result came (runtime/server.py `_run_for`)."""

    async def scenario() -> tuple[bool, bool]:
        backend = MemoryBackend()
        server = Server(backend, ttl=5.0, poll=0.05)
        await submit(backend, compiled(CHAIN.replace("NAME", "idle")))
        for _ in range(50):  # claimed and adopted; the first job waits for a worker
            await server.tick(5.0)
            if server.owned:
                break
        assert server.owned, "never adopted"
        await asyncio.sleep(0)  # the adoption's own callbacks
        server._wake.clear()
        progressed = await server.tick(5.0)  # a round that reads nothing new
        await asyncio.sleep(0)  # its task's done callbacks run
        return progressed, server._wake.is_set()

    progressed, woken = asyncio.run(scenario())
    assert not progressed
    assert not woken


def test_a_server_reads_an_execution_when_its_events_are_notified() -> None:
    """A round reads an execution's inputs when its events were notified since the last
    read, or `poll` seconds after it; not for another execution's events, and not because
    its own commit landed (the commit tells whether anyone appended meanwhile)."""

    async def scenario() -> list[int]:
        backend = MemoryBackend()
        server = Server(backend, ttl=30.0, poll=30.0)  # no polling read within the test
        notes = backend.notifications
        server._notified = notes.collect(EVENTS)  # what `run` does
        execution_id = await submit(backend, compiled(CHAIN.replace("NAME", "reads")))
        for _ in range(50):  # claimed and adopted; the first job waits for a worker
            await server.tick(5.0)
            if server.owned:
                break
        assert server.owned, "never adopted"
        reads = 0
        read_inputs = backend.events.read_inputs

        async def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal reads
            reads += 1
            return await read_inputs(*args, **kwargs)

        backend.events.read_inputs = counted  # type: ignore[method-assign]
        counts = []
        for notify in (None, None, "other", execution_id, None):
            if notify is not None:
                notes.notify(EVENTS, notify)
            await server.tick(5.0)
            counts.append(reads)
        notes.uncollect(EVENTS, server._notified)
        return counts

    # the first round reads what the adoption's own commit notified (the memory backend
    # notifies every append); then nothing until the execution's own notification
    assert asyncio.run(scenario()) == [1, 1, 1, 2, 2]
