"""End-to-end embedded runs of the reference workflows, events per execution, and memory
per waiting execution.

Run: `python -m bench -k embedded`.

* Each workflow is compiled once, then run by `run_embedded` with the in-memory log
  (against the floor of calling the noop tool as often as the run does) and with the SQLite
  log, one database per run (against the in-memory run measured in the same test). The
  SQLite run commits as the runtime does: inline noop work in groups, each group one
  transaction at the store's durability level (runtime/group_commit.py, docs/runtime.md).
* Events per execution, against the floor of one event per tool call.
* Chains are linear: CPU µs per step of a 10,000-step noop chain against a 100-step one.
* A server adopting executions of one program: bytes and CPU per execution (one shared copy).
* Memory per waiting execution: N control VMs of one program, each started and parked on
  its first dispatched step (the state a server keeps while a worker runs the step),
  measured with tracemalloc; compared with `transitions` (N models parked in a state on one
  machine) when that peer is installed.
"""

from __future__ import annotations

import time
import tracemalloc
import uuid
from typing import Any

import pytest

from noetlc.bench import peers
from noetlc.bench.figures import quick, record, target
from noetlc.bench.workflows import WORKFLOWS, best_ms, label, payload, run, tool_calls
from noetlc.runtime.store_url import open_store
from noetlc.stdlib_tools.basic import call_tool
from noetlc.vm.control import ControlVM
from noetlc.vm.loaded_program import LoadedProgram

pytestmark = pytest.mark.bench

LOOP_TARGET = target("value", "<", 50, "target: < 50 ms")


def _floor_ms(calls: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            call_tool("noop", {"input": None}, None)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


@pytest.mark.parametrize("name", list(WORKFLOWS))
def test_embedded(benchmark: Any, name: str) -> None:
    n = WORKFLOWS[name][1]
    compiled = payload(name)
    repeat = 3 if quick() else 7
    summary = benchmark.pedantic(
        run, setup=lambda: ((compiled, open_store("memory:")), {}), rounds=repeat, iterations=1
    )
    memory_ms = benchmark.stats.stats.min * 1e3
    sqlite_ms, _ = best_ms(compiled, "sqlite", repeat)
    calls = tool_calls(name, n)
    goal = LOOP_TARGET if name == "loop" else None
    record(
        benchmark,
        figure=f"{label(name, n)}, in-memory log",
        value=memory_ms,
        unit="ms",
        against="floor: calling the noop tool as often",
        against_value=_floor_ms(calls, repeat),
        target=goal,
    )
    record(
        benchmark,
        figure=f"{label(name, n)}, SQLite log",
        value=sqlite_ms,
        unit="ms",
        against="the same run, in-memory log",
        against_value=memory_ms,
        target=goal,
    )
    record(
        benchmark,
        figure=f"events per execution: {label(name, n)}",
        value=summary["events"],
        unit="events",
        against="floor: one per tool call",
        against_value=calls,
        group="events",
    )


def parked_bytes(count: int) -> float:
    program = LoadedProgram(payload("chain", 10))
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    parked = []
    for _ in range(count):
        vm = ControlVM(program, dict(program.workload), execution_id=str(uuid.uuid4()))
        commands = vm.start().commands
        assert commands and not vm.finished()
        parked.append(vm)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    return sum(s.size_diff for s in after.compare_to(before, "filename")) / count


def test_memory_per_waiting_execution(benchmark: Any) -> None:
    count = 1_000
    ours = benchmark.pedantic(parked_bytes, args=(count,), rounds=1, iterations=1)
    against, theirs, fair = None, None, None
    try:
        result = peers.run("transitions", {"sizes": {}, "waiting": count}, timeout=120)
        against, theirs = (
            "transitions (a model parked in a state)",
            result["results"]["waiting"]["bytes"],
        )
        fair = "transitions keeps only the state name; we keep the marking, ctx and event log"
    except peers.PeerUnavailable as exc:
        fair = f"no peer: {exc}"
    record(
        benchmark,
        figure=f"memory per waiting execution ({count:,} parked control VMs)",
        value=ours,
        unit="B",
        against=against,
        against_value=theirs,
        target=target("value", "<", 10_000, "target: < 10 KB"),
        fair=fair,
        group="memory",
    )


def _cpu_us_per_step(compiled: Any, steps: int) -> float:
    """CPU time of the loop thread per step of one in-memory run (the load of the machine
    moves it far less than wall time)."""
    start = time.thread_time()
    run(compiled, open_store("memory:"))
    return (time.thread_time() - start) / steps * 1e6


def test_chain_is_linear(benchmark: Any) -> None:
    """µs per step of a long noop chain against a 100-step one, measured back to back in
    this process (rounds alternate): a per-step cost that grows with the finished steps (a
    scope copy per step, full collections scanning the program) shows as a ratio above 1."""
    short, long = 100, 2_000 if quick() else 10_000
    programs = {n: payload("chain", n) for n in (short, long)}
    best = {n: float("inf") for n in programs}

    def rounds() -> None:
        for _ in range(3):
            for n, compiled in programs.items():
                best[n] = min(best[n], _cpu_us_per_step(compiled, n))

    for compiled in programs.values():
        run(compiled, open_store("memory:"))  # warm: code objects, caches
    benchmark.pedantic(rounds, rounds=1, iterations=1)
    record(
        benchmark,
        figure=f"{long:,}-step noop chain, CPU µs per step, in-memory log",
        value=best[long],
        unit="µs",
        against=f"the {short}-step chain, the same run",
        against_value=best[short],
        target=target("ratio", "<=", 1.3, "target: ≤ 1.3× the 100-step chain"),
        group="linear",
    )


def adopted(count: int) -> tuple[float, float]:
    """(bytes, CPU ms) per execution a server adopts: its program from the first event (the
    same bytes for every execution), a driver, the VM started and parked."""
    import base64

    from noetlc.runtime.driver import Driver, program_from_requested
    from noetlc.runtime.stored_program import encode_program

    data = base64.b64encode(encode_program(payload("chain", 10))).decode()
    event = {"payload": {"program": data, "workload": {}}}
    program_from_requested(event)  # the server's first execution of it decodes it
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    parked = []
    for _ in range(count):
        program, workload = program_from_requested(event)
        parked.append(Driver(program, str(uuid.uuid4()), workload))
        parked[-1].start()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(s.size_diff for s in after.compare_to(before, "filename")) / count
    start = time.thread_time()
    for _ in range(count):
        program, workload = program_from_requested(event)
        Driver(program, str(uuid.uuid4()), workload).start()
    return size, (time.thread_time() - start) / count * 1e3


def test_adopted_execution(benchmark: Any) -> None:
    count = 300
    size, cpu_ms = benchmark.pedantic(adopted, args=(count,), rounds=1, iterations=1)
    record(
        benchmark,
        figure=f"server memory per adopted execution of one program ({count} parked)",
        value=size,
        unit="B",
        target=target("value", "<=", 10_000, "target: ≤ 10 KB"),
        group="memory",
    )
    record(
        benchmark,
        figure="server CPU to adopt an execution of a program it holds (decode, driver, start)",
        value=cpu_ms,
        unit="ms",
        target=target("value", "<=", 1.0, "target: ≤ 1 ms"),
        group="memory",
    )
