"""The console's step graph of a stored program (service/graph.py): read from the container's
payload without re-verifying the whole program (seconds for 10,000 steps), the same graph as
the verified program gives, and a bad program still refused with its NOE70x code."""

from __future__ import annotations

import pytest

from noetlc import FORMAT_VERSION
from noetlc.compiler.pipeline import compile_source
from noetlc.ir import nbc
from noetlc.ir.program import Program
from noetlc.runtime.stored_program import decode_program, encode_program
from noetlc.service import graph as graph_module
from noetlc.service.graph import step_graph

PLAYBOOK = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: shapes, path: t/shapes}
workload: {go: true}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      arcs:
        - {step: each, when: "{{ workload.go }}"}
        - {step: done}
  - step: each
    loop: {in: [1, 2, 3], iterator: n}
    tool: {kind: python, input: {n: "{{ iter.n }}"}, code: "result = n"}
    next: done
  - step: done
    tool: {kind: noop}
"""


def _program() -> bytes:
    unit = compile_source(PLAYBOOK, "shapes.yaml")
    assert unit.program is not None, [d.message for d in unit.reporter.diagnostics]
    return encode_program(unit.program)


def test_the_graph_is_read_without_decoding_the_program(monkeypatch: pytest.MonkeyPatch) -> None:
    program = _program()
    verified = graph_module._graph(decode_program(program))

    def refuse(*_args: object, **_kwargs: object) -> Program:
        raise AssertionError("the whole program was decoded and verified")

    monkeypatch.setattr(Program, "decode", classmethod(refuse))
    drawn = step_graph(program)
    assert drawn == verified
    assert [s["name"] for s in drawn["steps"]] == ["start", "each", "done"]
    assert [s["loop"] for s in drawn["steps"]] == [False, True, False]
    assert (
        drawn["steps"][0]["entry"] and drawn["steps"][0]["line"] == 7
    )  # `- step: start` (the text opens with a newline)
    assert {(e["source"], e["target"]) for e in drawn["edges"]} >= {
        ("start", "each"),
        ("start", "done"),
        ("each", "done"),
    }


def test_a_bad_program_is_still_refused_with_its_code() -> None:
    with pytest.raises(nbc.BytecodeError) as corrupt:
        step_graph(b"not a program")
    assert corrupt.value.code == "NOE701"
    odd = nbc.encode(
        {"steps": "no"}, format_version=FORMAT_VERSION, compiler_version="x", source_sha256=""
    )
    with pytest.raises(nbc.BytecodeError) as shape:
        step_graph(odd)
    assert shape.value.code.startswith("NOE70")
