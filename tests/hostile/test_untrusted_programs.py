"""Programs are untrusted data: a re-signed `.nbc` (valid checksums, crafted content) never
runs stored code, is refused by `run` and `submit` with a stable code, and a bad program that
reaches a server fails that execution only while the servers go on (two servers, a healthy
execution that must complete, a poisoned guard and a crafted program)."""

from __future__ import annotations

import asyncio
import base64
import builtins
import copy
import hashlib
import uuid
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main
from noetlc.compiler.pipeline import compile_source
from noetlc.diagnostics.errors import UserError
from noetlc.ir.program import Program as IRProgram
from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.server import Server
from noetlc.runtime.stored_program import encode_program, requested_event
from noetlc.runtime.worker import Worker
from tests.hostile.program_fuzz import CANARY, PAYLOAD_CODE, drive, resign, seeds

HEALTHY = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: healthy, path: t/healthy}
workload: {n: 3}
workflow:
  - step: start
    tool: {kind: noop, result: "{{ workload.n }}"}
    next: {arcs: [{step: middle, when: "{{ start == 3 }}"}]}
  - step: middle
    tool: {kind: python, code: "result = 41"}
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop, result: done}
"""

POISONED = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: poisoned, path: t/poisoned}
workload: {b: 10}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: end, when: "{{ (workload.b ** 9999) ** 9999 > 1 }}"}]}
  - step: end
    tool: {kind: noop}
"""


def _payload(source: str) -> dict[str, Any]:
    unit = compile_source(source, "t.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    payload: dict[str, Any] = unit.payload
    return payload


def _crafted(payload: dict[str, Any], how: str) -> dict[str, Any]:
    """The payload with its expression pool rewritten to carry Python of the attacker's."""
    p = copy.deepcopy(payload)
    entries = p["expressions"]
    index = next(i for i, e in enumerate(entries) if e["kind"] == "code")
    entry = entries[index]
    if how == "code_and_its_hash":  # the pool of an older format, which stored code
        entry["code"] = PAYLOAD_CODE
        entry["sha256"] = hashlib.sha256(PAYLOAD_CODE.encode()).hexdigest()
    elif how == "python_as_source":
        entry["source"] = PAYLOAD_CODE
    elif how == "jinja_kind_with_python":
        entry.update(kind="jinja_expression", jinja=PAYLOAD_CODE, source="__import__('os')")
    elif how == "extra_code_key":  # the genuine hash: the entry runs, the stored code never
        entry["code"] = PAYLOAD_CODE
    elif how == "const_with_code":
        entry.update(kind="const", value={"code": PAYLOAD_CODE})
        entry.pop("sha256", None)
    return p


HOW = [
    "code_and_its_hash",
    "python_as_source",
    "jinja_kind_with_python",
    "extra_code_key",
    "const_with_code",
]


@pytest.fixture(autouse=True)
def _no_canary() -> Any:
    builtins.__dict__.pop(CANARY, None)
    yield
    assert CANARY not in builtins.__dict__, "stored code was executed"


@pytest.mark.parametrize("how", HOW)
def test_a_crafted_pool_never_runs_its_code(how: str) -> None:
    data = resign(_crafted(_payload(HEALTHY), how))
    try:
        program = IRProgram.decode(data)
        drive(program)  # if it verifies, it runs what its sources compile to
    except UserError as exc:
        assert exc.code in ("NOE704", "NOE705"), exc


@pytest.mark.parametrize("how", ["code_and_its_hash", "python_as_source"])
def test_run_and_submit_refuse_a_crafted_nbc(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "crafted.nbc"
    path.write_bytes(resign(_crafted(_payload(HEALTHY), how)))
    assert vm_main.main(["run", str(path), "--db", "memory:"]) == 1
    err = capsys.readouterr().err
    assert "error[NOE705]" in err and "Traceback" not in err, err
    # refused before any database is contacted
    status = vm_main.main(["submit", str(path), "--db", "postgresql://nobody@127.0.0.1:1/x"])
    err = capsys.readouterr().err
    assert status == 1 and "error[NOE705]" in err, err


async def _submit(backend: MemoryBackend, name: str, program: bytes, workload: Any) -> str:
    execution_id = str(uuid.uuid4())
    await backend.events.create_execution(execution_id, name)
    first = requested_event(execution_id, name, program, workload, None)
    await backend.events.append(execution_id, [first])
    await backend.owners.offer([execution_id])
    return execution_id


async def _finished(backend: MemoryBackend, execution_id: str) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        record = await backend.events.execution(execution_id)
        assert record is not None
        if record["status"] != "running":
            return dict(record)
        assert asyncio.get_running_loop().time() < deadline, f"{execution_id} never finished"
        await backend.events.wait_for_events(execution_id, record["last_seq"], 0.1)


def test_two_servers_fail_poisoned_executions_and_finish_the_healthy_one() -> None:
    healthy = _payload(HEALTHY)
    crafted = resign(_crafted(healthy, "code_and_its_hash"))
    unverifiable = copy.deepcopy(healthy)
    unverifiable["entry"] = "nowhere"

    async def scenario() -> dict[str, dict[str, Any]]:
        backend = MemoryBackend()
        stop = asyncio.Event()
        servers = [Server(backend, ttl=1.0, poll=0.05, owner=f"server-{i}") for i in (1, 2)]
        worker = Worker(backend, concurrency=2, ttl=2.0, poll=0.05)
        tasks = [asyncio.create_task(s.run(stop)) for s in servers]
        tasks.append(asyncio.create_task(worker.run(stop)))
        try:
            ids = {
                "crafted": await _submit(backend, "crafted", crafted, {}),
                "unverifiable": await _submit(backend, "bad", resign(unverifiable), {}),
                "garbage": await _submit(backend, "garbage", b"\x89NBC\r\n\x1a\nxx", {}),
                "poisoned": await _submit(
                    backend, "poisoned", encode_program(_payload(POISONED)), {"b": 10}
                ),
                "healthy": await _submit(backend, "healthy", encode_program(healthy), {"n": 3}),
            }
            records = {name: await _finished(backend, i) for name, i in ids.items()}
            events = {name: await backend.events.read(i) for name, i in ids.items()}
            assert not any(t.done() for t in tasks), "a server or the worker stopped"
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 10)
        for name, record in records.items():
            record["failures"] = sum(1 for e in events[name] if e["name"] == "execution.failed")
        records["servers"] = {"refused": sum(s.refused for s in servers)}
        return records

    records = asyncio.run(scenario())
    assert records["healthy"]["status"] == "completed"
    assert records["healthy"]["summary"]["steps"]["end"]["result"] == "done"
    expected = {"crafted": "NOE705", "unverifiable": "NOE704", "garbage": "NOE702"}
    for name, code in expected.items():
        record = records[name]
        assert record["status"] == "failed", (name, record)
        assert record["summary"]["error"]["code"] == code, (name, record["summary"])
        assert record["failures"] == 1  # recorded once, not retried by the other server
    assert records["servers"]["refused"] == 3
    poisoned = records["poisoned"]
    assert poisoned["status"] == "failed" and poisoned["summary"]["error"]["code"] == "NOE311"


def test_stored_programs_are_rebuilt_not_trusted() -> None:
    """A program whose every expression entry was given someone else's code and hash."""
    for payload in seeds()[:5]:
        p = copy.deepcopy(payload)
        changed = False
        for entry in p["expressions"]:
            if entry["kind"] == "code":
                entry["code"] = PAYLOAD_CODE
                entry["sha256"] = hashlib.sha256(PAYLOAD_CODE.encode()).hexdigest()
                changed = True
        if not changed:
            continue
        with pytest.raises(UserError) as info:
            IRProgram.decode(resign(p)) and drive(IRProgram.decode(resign(p)))
        assert info.value.code == "NOE705"
    assert base64  # the requested event stores the program base64-encoded


def test_a_join_with_a_branch_named_twice_is_refused() -> None:
    """Found by the fuzz suite: it verified, then failed inside the VM (NOE850)."""
    payload = next(p for p in seeds() if p["joins"])
    crafted = copy.deepcopy(payload)
    crafted["joins"][0][3].append(crafted["joins"][0][3][0])
    with pytest.raises(UserError) as info:
        IRProgram.decode(resign(crafted))
    assert info.value.code == "NOE704" and "branch named twice" in str(info.value)
