"""Poison pills: a server runs each step of a control VM under a deadline. An execution whose
step runs past it is failed once (NOE859) while both servers go on and a healthy execution
completes; no other server takes the poisoned execution over."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from noetlc.expr import limits
from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.server import Server
from noetlc.runtime.stored_program import encode_program
from noetlc.runtime.worker import Worker
from tests.hostile.test_untrusted_programs import HEALTHY, _finished, _payload, _submit

ARCS = 60  # distinct guards, each a bounded slow-path loop (within every expression limit)
SLOW = "\n".join(
    f'        - {{step: end, when: "{{% for i in range({100000 - k}) %}}{{% endfor %}}"}}'
    for k in range(ARCS)
)
SLOW_STEP = f"""
apiVersion: noetl.io/v2
kind: Playbook
metadata: {{name: slow, path: t/slow}}
workflow:
  - step: start
    tool: {{kind: noop}}
    next:
      arcs:
{SLOW}
        - {{step: end}}
  - step: end
    tool: {{kind: noop}}
"""


def test_a_step_past_the_deadline_fails_its_execution_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the step budget of one input event would stop SLOW_STEP first (see the next test):
    # lifted here, the deadline is what is tested
    monkeypatch.setattr(limits, "MAX_INPUT_STEPS", 10**12)

    async def scenario() -> dict[str, Any]:
        backend = MemoryBackend()
        stop = asyncio.Event()
        servers = [
            Server(backend, ttl=1.0, poll=0.05, owner=f"server-{i}", step_deadline=1.0)
            for i in (1, 2)
        ]
        worker = Worker(backend, concurrency=2, ttl=2.0, poll=0.05)
        tasks = [asyncio.create_task(s.run(stop)) for s in servers]
        tasks.append(asyncio.create_task(worker.run(stop)))
        try:
            slow = await _submit(backend, "slow", encode_program(_payload(SLOW_STEP)), {})
            healthy = await _submit(backend, "healthy", encode_program(_payload(HEALTHY)), {"n": 3})
            out = {
                "slow": await _finished(backend, slow),
                "healthy": await _finished(backend, healthy),
            }
            events = await backend.events.read(slow)
            out["failures"] = sum(1 for e in events if e["name"] == "execution.failed")
            assert not any(t.done() for t in tasks), "a server or the worker stopped"
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
        out["refused"] = sum(s.refused for s in servers)
        return out

    out = asyncio.run(scenario())
    assert out["healthy"]["status"] == "completed"
    assert out["slow"]["status"] == "failed"
    assert out["slow"]["summary"]["error"]["code"] == "NOE859", out["slow"]["summary"]
    assert out["failures"] == 1 and out["refused"] == 1


def test_a_step_of_many_heavy_guards_fails_on_its_step_budget() -> None:
    """Each of SLOW_STEP's guards is within the budget of one evaluation; all of them, caused
    by one input event, are not: NOE311 long before the server's deadline."""

    async def scenario() -> dict[str, Any]:
        backend = MemoryBackend()
        stop = asyncio.Event()
        server = Server(backend, ttl=5.0, poll=0.05, owner="server-1", step_deadline=None)
        worker = Worker(backend, concurrency=2, ttl=5.0, poll=0.05)
        tasks = [asyncio.create_task(server.run(stop)), asyncio.create_task(worker.run(stop))]
        try:
            slow = await _submit(backend, "slow", encode_program(_payload(SLOW_STEP)), {})
            healthy = await _submit(backend, "healthy", encode_program(_payload(HEALTHY)), {"n": 3})
            return {
                "slow": await _finished(backend, slow),
                "healthy": await _finished(backend, healthy),
            }
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 30)

    out = asyncio.run(scenario())
    assert out["healthy"]["status"] == "completed"
    assert out["slow"]["status"] == "failed"
    assert out["slow"]["summary"]["error"]["code"] == "NOE311", out["slow"]["summary"]
