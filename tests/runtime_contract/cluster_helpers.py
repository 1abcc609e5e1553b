"""What the cluster tests over the in-memory backend share: compile, submit, wait."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.stored_program import encode_program, requested_event


def compiled(source: str) -> dict[str, Any]:
    unit = compile_source(source, "t.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    payload: dict[str, Any] = unit.payload
    return payload


async def submit(backend: MemoryBackend, payload: dict[str, Any]) -> str:
    """What `noetl-vm submit` does: the execution, its first event, the offer."""
    execution_id = str(uuid.uuid4())
    name = payload["metadata"]["name"]
    await backend.events.create_execution(execution_id, name)
    first = requested_event(
        execution_id, name, encode_program(payload), dict(payload["workload"] or {}), None
    )
    await backend.events.append(execution_id, [first])
    await backend.owners.offer([execution_id])
    return execution_id


async def until_finished(backend: MemoryBackend, execution_id: str, timeout: float = 20) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        record = await backend.events.execution(execution_id)
        assert record is not None
        if record["status"] != "running":
            return record
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await backend.events.wait_for_events(execution_id, record["last_seq"], 0.2)


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": summary["status"],
        "steps": summary["steps"],
        "ctx": summary["ctx"],
        "error": (summary["error"] or {}).get("code"),
    }
