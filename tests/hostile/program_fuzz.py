"""Crafted and mutated programs: the helpers of the program tests and the fuzz suite.

`resign(payload)` makes `.nbc` bytes whose checksums are valid for any payload (what an
attacker who can write a program file or a database row can do). `mutate` changes one to three
places of a valid payload. `drive` runs a decoded program with the control VM and the pipeline
VM in this thread, tools answered by a stub and no waiting, for a bounded number of commands:
what a server does with a program, without I/O.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from noetlc.compiler.pipeline import compile_file
from noetlc.ir import nbc
from noetlc.ir.program import FORMAT_VERSION
from noetlc.ir.program import Program as IRProgram
from noetlc.runtime.execute import execute
from noetlc.vm.control import ControlVM
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import CommandKind

ROOT = Path(__file__).resolve().parents[2]
SEED_FILES = sorted((ROOT / "examples").glob("*.yaml")) + sorted(
    (ROOT / "tests" / "vm" / "playbooks").glob("*.yaml")
)
CANARY = "noetlc-fuzz-canary"
# Python that would leave a trace if anything ever executed it.
PAYLOAD_CODE = (
    "def _e(s):\n    import builtins\n    builtins.__dict__['"
    + CANARY
    + "'] = True\n    return 1\n"
)

_SEEDS: list[dict[str, Any]] = []


def seeds() -> list[dict[str, Any]]:
    """The payloads of the example and test playbooks (compiled once per process)."""
    if not _SEEDS:
        for path in SEED_FILES:
            unit = compile_file(str(path))
            if unit.program is not None and not unit.reporter.has_errors:
                _SEEDS.append(unit.program.to_payload())
    return _SEEDS


def resign(payload: dict[str, Any]) -> bytes:
    return nbc.encode(
        payload, format_version=FORMAT_VERSION, compiler_version="x", source_sha256=""
    )


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


VALUES: list[Any] = [
    None, -1, 0, 1, 2, 7, 10**6, 2**63, -(2**63), 1.5, float("nan"), float("inf"), "", "x",
    "start", "__import__('os').system('true')", PAYLOAD_CODE, [], [0], [[]], {}, {"$e": 0},
    {"$e": 999}, {"$e": "x"}, True, False, b"\x00",
    {"kind": "code", "source": "{{ 1 }}", "mode": "template", "code": PAYLOAD_CODE},
]  # fmt: skip


def mutate(payload: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    p = copy.deepcopy(payload)
    for _ in range(rng.randint(1, 3)):
        found = [q for q in _paths(p) if q]
        q = rng.choice(found)
        parent: Any = p
        for k in q[:-1]:
            parent = parent[k]
        k = q[-1]
        r = rng.random()
        if r < 0.35:
            parent[k] = copy.deepcopy(rng.choice(VALUES))
        elif (r < 0.45 and isinstance(parent, list)) or (r < 0.55 and isinstance(parent, dict)):
            del parent[k]
        elif r < 0.95 and type(parent[k]) is int:
            parent[k] = parent[k] + rng.choice([-1, 1, 2, 100])
        elif isinstance(parent, list):
            parent.append(copy.deepcopy(parent[k]))
    return p


def _tool(kind: str, args: dict[str, Any], spec: Any, task: str, attempt: int) -> dict[str, Any]:
    return {"status": "ok", "result": {"x": 1, "items": [1, 2]}, "error": None, "meta": {}}


def drive(program: IRProgram, max_commands: int = 200) -> ControlVM:
    """Run `program` with stub tools and no waiting; return the VM (finished or not)."""
    vm_program = LoadedProgram(program)
    vm = ControlVM(vm_program, dict(program.workload), "fuzz")
    pending = list(vm.start().commands)
    done = 0
    while pending and done < max_commands and not vm.finished():
        command = pending.pop(0)
        done += 1
        if command.kind != CommandKind.RUN:
            continue
        terminal = execute(
            vm_program,
            command,
            vm.scope,
            lambda event: None,
            call_tool=_tool,
            wait=lambda seconds: False,
        )
        pending.extend(vm.step(terminal).commands)
    return vm
