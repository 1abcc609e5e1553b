"""One program per process: executions whose first event carries the same program bytes share
one decoded, verified copy (keyed by the bytes' SHA-256); other bytes get their own; bytes that
do not verify are refused every time and never kept; the cache is bounded."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.ir.nbc import BytecodeError
from noetlc.runtime import driver
from noetlc.runtime.driver import Driver, program_from_requested, shared_program
from noetlc.runtime.stored_program import encode_program


def _bytes(name: str) -> bytes:
    text = f"""\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {{name: {name}, path: tests/{name}}}
workload: {{n: 1}}
workflow:
  - step: start
    tool: {{kind: noop}}
"""
    unit = compile_source(text, f"{name}.yaml")
    assert unit.program is not None, unit.reporter.diagnostics
    return encode_program(unit.program)


def _requested(data: bytes, workload: dict[str, Any]) -> dict[str, Any]:
    return {"payload": {"program": base64.b64encode(data).decode(), "workload": workload}}


def test_executions_of_one_program_share_its_decoded_copy() -> None:
    data = _bytes("shared_a")
    first, w1 = program_from_requested(_requested(data, {"n": 1}))
    second, w2 = program_from_requested(_requested(bytes(data), {"n": 2}))
    assert first is second
    assert (w1, w2) == ({"n": 1}, {"n": 2})  # the workload stays each execution's own
    other, _ = program_from_requested(_requested(_bytes("shared_b"), {}))
    assert other is not first
    # two executions of the shared copy run independently
    one, two = Driver(first, "1", w1), Driver(second, "2", w2)
    one.start()
    two.start()
    assert one.vm.scope["workload"] == {"n": 1} and two.vm.scope["workload"] == {"n": 2}


def test_bytes_that_do_not_verify_are_refused_and_not_kept() -> None:
    data = bytearray(_bytes("shared_c"))
    data[-1] ^= 0xFF
    for _ in range(2):
        with pytest.raises(BytecodeError):
            shared_program(bytes(data))


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "SHARED_PROGRAMS", 2)
    programs = [shared_program(_bytes(f"bounded_{i}")) for i in range(3)]
    assert len(driver._programs) <= 2
    assert shared_program(_bytes("bounded_2")) is programs[2]  # the most recent stays
    assert shared_program(_bytes("bounded_0")) is not programs[0]  # the oldest was dropped
