"""The control VM's firing rate and the embedded runtime end to end.

Run: `.venv/bin/python -m pytest bench/test_bench_vm.py -m bench -q -s`

* control VM firings/s on a 1,000-step noop chain, fed its results directly (no tools), with
  the events kept in memory, and with every batch of 64 inputs committed to SQLite (WAL, one
  transaction per batch). Floor: a bare list-marking token game over the same chain, measured
  in the same run (DESIGN §5 reference: 65–180 ns per firing). Targets: ≥ 1,000,000/s in
  memory, ≥ 100,000/s with SQLite.
* a 1,000-iteration loop of noop tasks end to end (`run_embedded`, in-memory store and
  SQLite). Target: < 50 ms.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.store import SQLiteStore
from noetlc.vm.control import ControlVM
from noetlc.vm.program import Program

pytestmark = pytest.mark.bench

STEPS = 1_000


def _chain(n: int) -> str:
    lines = [
        "apiVersion: noetl.io/v2",
        "kind: Playbook",
        "metadata: {name: chain, path: bench/chain}",
        "workflow:",
    ]
    for i in range(n):
        name = "start" if i == 0 else f"s{i}"
        lines.append(f"  - step: {name}")
        lines.append("    tool: {kind: noop}")
        if i + 1 < n:
            lines.append(f"    next: {{arcs: [{{step: s{i + 1}}}]}}")
    return "\n".join(lines) + "\n"


def _loop(n: int) -> str:
    return (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: loop, path: bench/loop}\n"
        f"workload: {{items: {list(range(n))}}}\n"
        "workflow:\n  - step: start\n"
        '    loop: {in: "{{ workload.items }}", iterator: x}\n'
        "    tool: {kind: noop}\n"
    )


def _payload(source: str) -> dict[str, Any]:
    unit = compile_source(source, "bench.yaml")
    assert not unit.reporter.has_errors
    payload: dict[str, Any] = unit.artifacts["payload"]
    return payload


def drive(program: Program, store: SQLiteStore | None = None, batch: int = 64) -> tuple[int, float]:
    """Run the chain through the control VM alone; return (firings, seconds)."""
    vm = ControlVM(program, {}, "bench")
    log: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    start = time.perf_counter()
    commands = vm.start()
    inputs = 0
    counter = 0
    while commands:
        command = commands.pop()
        counter += 1
        event = {
            "event_id": f"i{counter}",
            "name": "step.done",
            "source": "worker",
            "step": command.step,
            "step_run_id": command.step_run_id,
            "payload": {"result": None},
        }
        commands.extend(vm.step(event))
        if store is None:
            log.append(event)
            log.extend(vm.take_events())
            continue
        pending.append(event)
        for out in vm.take_events():
            counter += 1
            out["event_id"] = f"s{counter}"
            pending.append(out)
        inputs += 1
        if inputs % batch == 0 or not commands:
            store.append("bench", pending)
            pending = []
    elapsed = time.perf_counter() - start
    assert vm.status == "completed", vm.error
    return vm.firings, elapsed


def floor(n: int) -> tuple[int, float]:
    """A bare token game on list marking: consume one place, produce the next (DESIGN §5)."""
    marking = [0] * (3 * n + 1)
    arcs = [(i, i + 1) for i in range(3 * n)]
    start = time.perf_counter()
    marking[0] = 1
    fired = 0
    for source, target in arcs:
        if marking[source]:
            marking[source] -= 1
            marking[target] += 1
            fired += 1
    return fired, time.perf_counter() - start


def _best(fn: Any, *args: Any, rounds: int = 5) -> tuple[int, float]:
    results: list[tuple[int, float]] = [fn(*args) for _ in range(rounds)]
    return min(results, key=lambda r: r[1])


def test_control_vm_firings(capsys: pytest.CaptureFixture[str]) -> None:
    program = Program(_payload(_chain(STEPS)))
    firings, memory_s = _best(drive, program)
    floor_firings, floor_s = _best(floor, STEPS)
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_results = []
        for i in range(3):
            store = SQLiteStore(str(Path(tmp) / f"b{i}.db"))
            store.create_execution("bench", "chain")
            sqlite_results.append(drive(program, store))
            store.close()
        _, sqlite_s = min(sqlite_results, key=lambda r: r[1])
    rows = [
        ("control VM, in-memory log", firings / memory_s, 1_000_000),
        ("control VM, SQLite log (batch 64)", firings / sqlite_s, 100_000),
        ("floor: bare list-marking firing", floor_firings / floor_s, None),
    ]
    with capsys.disabled():
        print(f"\n1,000-step chain: {firings} firings per run")
        print("| workload | firings/s | target | vs floor |")
        print("|---|---:|---:|---:|")
        for name, rate, target in rows:
            ratio = (floor_firings / floor_s) / rate
            print(
                f"| {name} | {rate:,.0f} | {f'{target:,}' if target else '-'} | {ratio:.1f}× slower |"
            )
    assert firings >= 2 * STEPS


def test_embedded_noop_loop(capsys: pytest.CaptureFixture[str]) -> None:
    payload = _payload(_loop(1_000))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        summary = run_embedded(payload)
        times.append(time.perf_counter() - start)
        assert summary["status"] == "completed"
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_times = []
        for i in range(3):
            store = SQLiteStore(str(Path(tmp) / f"l{i}.db"))
            start = time.perf_counter()
            run_embedded(payload, store=store)
            sqlite_times.append(time.perf_counter() - start)
            store.close()
    with capsys.disabled():
        print("\n| 1,000-iteration noop loop | best ms | target |")
        print("|---|---:|---:|")
        print(f"| in-memory store | {min(times) * 1000:.1f} | < 50 |")
        print(f"| SQLite store | {min(sqlite_times) * 1000:.1f} | - |")
