"""A server round whose commit fails with a database error the server retries (the database
went away past the event log's own retries) lost the events and jobs its VM decided: the VM
was ahead of the log and nothing would ever wake it again, so the execution stayed `running`
for good (found looking into executions a process-kill chaos run left running).
The server now drops that execution and adopts it again from the log (runtime/server.py
`_advance_or_refuse`, `_rebuild_dropped`)."""

from __future__ import annotations

import asyncio
from typing import Any

from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.postgres.errors import DatabaseError
from noetlc.runtime.server import Server
from noetlc.runtime.worker import Worker
from tests.runtime_contract.cluster_helpers import compiled, submit, until_finished

CHAIN = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: chain, path: t/chain}
workflow:
  - step: start
    tool: {kind: python, code: "result = 3"}
    next: end
  - step: end
    tool: {kind: python, code: "result = 'done'"}
"""


def test_a_round_whose_commit_failed_is_decided_again_from_the_log() -> None:
    async def scenario() -> str:
        backend = MemoryBackend()
        calls = 0
        real = backend.events.append_and_enqueue

        async def flaky(*args: Any, **kw: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise DatabaseError("NOE800", "the database went away", "retry")
            return await real(*args, **kw)

        backend.events.append_and_enqueue = flaky  # type: ignore[method-assign]  # the second commit fails
        server = Server(backend, ttl=2.0, poll=0.05)
        worker = Worker(backend, concurrency=2, ttl=2.0, poll=0.05)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(server.run(stop)), asyncio.create_task(worker.run(stop))]
        try:
            eid = await submit(backend, compiled(CHAIN))
            return (await until_finished(backend, eid, timeout=20))["status"]
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 30)

    assert asyncio.run(scenario()) == "completed"
