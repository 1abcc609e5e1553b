"""Runaway expressions and poison executions, measured (docs/expressions.md, "Limits").

Two measurements, each run in a child process under an address-space cap so that a runaway
that is not bounded fails there, not on the machine:

* `runaway`: each payload of `PAYLOADS` evaluated once: how it ended (the error's code), CPU
  seconds and the child's peak RSS;
* `poison`: one server (in-memory backend) and one worker; a poison execution (a runaway arc
  guard, or sixty heavy ones) is submitted, a healthy execution 2 s later; the figure is how
  much longer the healthy one took than when it runs alone.

    python -m noetlc.bench.poison runaway      # one JSON line per payload
    python -m noetlc.bench.poison poison       # one JSON line: alone, with poison, delay
    python -m noetlc.bench.poison poison 0.1   # the healthy one 0.1 s after the poison

The file imports only `noetlc.expr` and `noetlc.runtime` public names, so it also measures an
older checkout (`PYTHONPATH` pointing at it), which is how the figures before the limits were
taken. `bench/test_bench_poison.py` records both as benchmark figures.
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import time
from typing import Any

CAP_BYTES = 2 * 2**30  # the child's address space: a runaway ends in MemoryError there
CHILD_TIMEOUT = 120.0

_SLOW = "{% if true %}{% endif %}"
PAYLOADS: dict[str, str] = {
    # the three of the audit: `~` and `+` doubling in a loop, the text a `{% for %}` renders
    "concat_doubling": "{% set ns = namespace(s='x' * 1000) %}{% for i in range(40) %}"
    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    "plus_doubling": "{% set ns = namespace(s=[0] * 1000) %}{% for i in range(40) %}"
    "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}",
    "for_render": "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
    # the compiled path: many values, each within the size limit
    "many_values": "{{ [" + ", ".join(["'x' * 999999"] * 3000) + "] | length }}",
    # a structure that shares itself, printed
    "shared_structure": "{% set ns = namespace(a=[1]) %}{% for i in range(40) %}"
    "{% set ns.a = [ns.a, ns.a] %}{% endfor %}{{ ns.a }}",
    # powers the old pre-check let through (printed: Python refuses 4,300+ digits)
    "power_3_14000": "{{ 3 ** 14000 }} ",
    "power_10_4300": "{{ 10 ** 4300 }} ",
}


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))


def _child_runaway(name: str) -> dict[str, Any]:
    from noetlc.expr.compile import compile_expression
    from noetlc.expr.runtime import ExpressionError, compile_entry

    evaluate = compile_entry(compile_expression(PAYLOADS[name]).to_entry())
    started = time.process_time()
    try:
        value = evaluate({})
        outcome = f"value of {len(str(value)):,} characters"
    except ExpressionError as exc:
        outcome = f"{exc.code} {type(exc.cause).__name__}"
    except MemoryError:
        outcome = "MemoryError (outside the evaluation)"
    except Exception as exc:  # what an older checkout raised: the figure says which
        outcome = f"internal {type(exc).__name__}"
    cpu = time.process_time() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"payload": name, "outcome": outcome, "cpu_s": round(cpu, 2), "peak_mb": round(peak)}


def _in_child(args: list[str]) -> dict[str, Any]:
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", *args],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT,
            preexec_fn=_cap,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"args": args, "outcome": f"still running after {CHILD_TIMEOUT:g} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"args": args, "outcome": f"child died ({proc.returncode}): {tail}"}
    result: dict[str, Any] = json.loads(lines[-1])
    result["wall_s"] = round(time.monotonic() - started, 2)
    return result


def runaway() -> list[dict[str, Any]]:
    return [_in_child(["runaway", name]) for name in PAYLOADS]


HEALTHY = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: healthy, path: bench/healthy}
workflow:
  - step: start
    tool: {kind: noop, result: 3}
    next: {arcs: [{step: end, when: "{{ start == 3 }}"}]}
  - step: end
    tool: {kind: noop, result: done}
"""

POISON = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: poison, path: bench/poison}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      arcs:
ARCS
        - {step: end}
  - step: end
    tool: {kind: noop}
"""

# Two poisons: one guard that grows without end (gigabytes before the limits), and sixty
# guards each within the limits of one evaluation (a loop of 100,000) that together held the
# server for its whole step deadline (30 s).
POISON_GUARDS = {
    "runaway_guard": [PAYLOADS["concat_doubling"].replace("{{ ns.s | length }}", "{{ ns.s }}")],
    "many_guards": [f"{{% for i in range({100000 - k}) %}}{{% endfor %}}" for k in range(60)],
}


def _poison_source(kind: str) -> str:
    arcs = "\n".join(
        f"        - {{step: end, when: {json.dumps(guard)}}}" for guard in POISON_GUARDS[kind]
    )
    return POISON.replace("ARCS", arcs)


def _program(source: str) -> bytes:
    from noetlc.compiler.pipeline import compile_source
    from noetlc.runtime.stored_program import encode_program

    unit = compile_source(source, "bench.yaml")
    if unit.reporter.has_errors or unit.payload is None:
        raise SystemExit(f"the benchmark's playbook does not compile: {unit.reporter.sorted()}")
    return encode_program(unit.payload)


async def _submit(backend: Any, name: str, program: bytes) -> str:
    from noetlc.runtime.stored_program import requested_event

    execution_id = str(time.time_ns())  # ids are opaque digits
    await backend.events.create_execution(execution_id, name)
    await backend.events.append(
        execution_id, [requested_event(execution_id, name, program, {}, None)]
    )
    await backend.owners.offer([execution_id])
    return execution_id


async def _wait(backend: Any, execution_id: str, limit: float) -> tuple[str, float]:
    started = time.monotonic()
    while time.monotonic() - started < limit:
        record = await backend.events.execution(execution_id)
        if record is not None and record["status"] != "running":
            return str(record["status"]), time.monotonic() - started
        await asyncio.sleep(0.01)
    return "running", limit


async def _scenario(kind: str | None, after: float = 2.0) -> dict[str, Any]:
    from noetlc.runtime.memory_backend import MemoryBackend
    from noetlc.runtime.server import Server
    from noetlc.runtime.worker import Worker

    backend: Any = MemoryBackend()  # a `Backend` (the protocols are structural)
    stop = asyncio.Event()
    server = Server(backend, ttl=5.0, poll=0.05, owner="bench-server")
    worker = Worker(backend, concurrency=2, ttl=5.0, poll=0.05)
    tasks = [asyncio.create_task(server.run(stop)), asyncio.create_task(worker.run(stop))]
    out: dict[str, Any] = {}
    try:
        healthy_program = _program(HEALTHY)
        # warm up (imports, the program cache) so both runs measure the same thing
        out["warmup"] = (await _wait(backend, await _submit(backend, "w", healthy_program), 30))[0]
        poison_id = None
        poison_ended: asyncio.Task[tuple[str, float]] | None = None
        if kind is not None:
            poison_id = await _submit(backend, "poison", _program(_poison_source(kind)))
            poison_ended = asyncio.create_task(_wait(backend, poison_id, 120))
            await asyncio.sleep(after)
        healthy_id = await _submit(backend, "healthy", healthy_program)
        out["healthy"], out["healthy_s"] = await _wait(backend, healthy_id, 90)
        if poison_id is not None and poison_ended is not None:
            out["poison"], out["poison_s"] = await poison_ended
            record = await backend.events.execution(poison_id)
            error = ((record or {}).get("summary") or {}).get("error") or {}
            out["poison_code"] = error.get("code")
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
    return out


def _child_poison(which: str, after: float) -> dict[str, Any]:
    result = asyncio.run(_scenario(None if which == "alone" else which, after))
    result["run"] = which
    result["peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return result


def poison(after: float = 2.0) -> dict[str, Any]:
    """The healthy execution alone, then `after` seconds after each poison: the delay each
    poison causes."""
    alone = _in_child(["poison", "alone", "0"])
    out: dict[str, Any] = {"alone": alone}
    for kind in POISON_GUARDS:
        poisoned = _in_child(["poison", kind, str(after)])
        out[kind] = poisoned
        if "healthy_s" in alone and "healthy_s" in poisoned:
            poisoned["delay_s"] = round(max(0.0, poisoned["healthy_s"] - alone["healthy_s"]), 2)
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        kind, name = argv[1], argv[2]
        if kind == "runaway":
            result = _child_runaway(name)
        else:
            result = _child_poison(name, float(argv[3]))
        print(json.dumps(result), flush=True)
        return 0
    if argv[:1] == ["runaway"]:
        for line in runaway():
            print(json.dumps(line), flush=True)
        return 0
    if argv[:1] == ["poison"]:
        print(json.dumps(poison(float(argv[1]) if len(argv) > 1 else 2.0)), flush=True)
        return 0
    print("usage: python -m noetlc.bench.poison runaway|poison [SECONDS]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
