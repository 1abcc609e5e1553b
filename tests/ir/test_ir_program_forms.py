"""One typed program from `assemble` to the VM: its payload and bytes are made once, when
asked for, and kept; a decoded program keeps the bytes it was read from; positions come from
`Program.position_of`, not from YAML path strings."""

from __future__ import annotations

import pytest

from noetlc import FORMAT_VERSION
from noetlc.cli.vm_commands.run import failure_text
from noetlc.compiler.pipeline import compile_source
from noetlc.ir import nbc
from noetlc.ir.program import Program
from noetlc.vm.budgets import budgets_for, spec_with_budgets
from noetlc.vm.loaded_program import LoadedProgram

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: forms}
workload: {n: 1}
workflow:
  - step: start
    tool:
      - first: {kind: noop}
      - second: {kind: python, code: "result = 1"}
    next:
      - step: end
  - step: end
    tool: {kind: noop}
"""


def _program() -> Program:
    unit = compile_source(PLAYBOOK, "forms.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    assert unit.program is not None
    return unit.program


def test_the_payload_and_the_bytes_are_made_when_asked_for_and_kept() -> None:
    program = _program()
    assert "payload" not in vars(program) and "nbc" not in vars(program)  # assemble made neither
    data = program.encode()
    assert program.nbc is data and program.encode() is data  # encoded once
    assert program.payload is program.to_payload()


def test_a_decoded_program_keeps_the_bytes_it_was_read_from() -> None:
    data = _program().encode()
    decoded = Program.decode(data)
    assert decoded.nbc is data  # a store keeps them without encoding again
    _header, payload = nbc.decode(data, format_version=FORMAT_VERSION)
    assert decoded.payload == payload


def test_positions_come_from_the_typed_program() -> None:
    program = _program()
    step, first, second = (
        program.position_of("start"),
        program.position_of("start", "first"),
        program.position_of("start", "second"),
    )
    assert step is not None and first is not None and second is not None
    assert (step.file, step.line) == ("forms.yaml", 6)
    assert (first.line, second.line) == (8, 9)
    assert program.position_of("start", "nope") == step  # an unknown task: the step
    assert program.position_of("nowhere") is None
    error = {"code": "NOE850", "message": "boom", "step": "start", "task": "second"}
    assert failure_text(error, program).startswith(f"forms.yaml:9:{second.column}: ")
    assert failure_text(error, None).startswith("error[NOE850]")


@pytest.mark.parametrize("budgets", [{"events": 7}, {}])
def test_a_budget_gives_a_new_typed_program(budgets: dict[str, int]) -> None:
    program = _program()
    with_budgets = program.with_executor_spec(spec_with_budgets(program.executor_spec, budgets))
    assert budgets_for(with_budgets.executor_spec)["events"] == budgets.get("events", 250_000)
    assert LoadedProgram(with_budgets).budgets == budgets_for(with_budgets.executor_spec)
    decoded = Program.decode(with_budgets.encode())
    assert decoded.executor_spec == with_budgets.executor_spec
