"""The net, the programs and the .nbc file: goldens, determinism, round trips, fuzzing.

Rewrite the goldens with `NOETLC_UPDATE_GOLDEN=1 pytest tests/ir`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noetlc import FORMAT_VERSION
from noetlc.cli import noetlc_main as cli
from noetlc.compiler.pipeline import compile_file
from noetlc.ir import nbc
from noetlc.ir.dis import disassemble
from noetlc.ir.net import Net, Transition, dump, verify
from noetlc.ir.opcodes import BY_CODE, OPCODES, reference_markdown, verify_code
from noetlc.ir.program import Program
from tests.conftest import CONFORMANCE as CONFORMANCE_DIR
from tests.conftest import CONFORMANCE_CASES, NOETL_FILES, noetl_params

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("NOETLC_UPDATE_GOLDEN") == "1"
CONFORMANCE = CONFORMANCE_CASES
CORPUS = noetl_params(NOETL_FILES)


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE or not path.exists():
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", CONFORMANCE, ids=lambda p: p.stem)
def test_net_and_dis_goldens(path: Path) -> None:
    unit = compile_file(path)
    assert not unit.reporter.has_errors
    net = unit.net
    assert verify(net) == []
    _golden(f"{path.stem}.net.txt", dump(net))
    _golden(f"{path.stem}.dis.txt", disassemble(unit.payload))


@pytest.mark.parametrize("path", CONFORMANCE + CORPUS, ids=lambda p: p.name)
def test_compiling_twice_gives_identical_bytes(path: Path) -> None:
    a = compile_file(path).nbc
    b = compile_file(path).nbc
    assert a == b


@pytest.mark.parametrize("path", CONFORMANCE + CORPUS, ids=lambda p: p.name)
def test_every_compiled_playbook_round_trips_and_verifies(path: Path, tmp_path: Path) -> None:
    unit = compile_file(path)
    data = unit.nbc
    if data is None:
        assert unit.reporter.has_errors
        return
    header, payload = nbc.decode(data, format_version=FORMAT_VERSION)
    assert payload == unit.payload
    assert header["format"] == FORMAT_VERSION
    pools = {
        "expr": len(payload["expressions"]),
        "value": len(payload["values"]),
        "name": len(payload["names"]),
    }
    assert Program.from_payload(payload).verify() == []  # the control records among them
    for _step, code, _pos in payload["pipelines"]:
        assert verify_code(code, "pipeline", {**pools, "label": len(code)}) == []
    out = tmp_path / "p.nbc"
    out.write_bytes(data)
    for argv in (
        ["dis", str(out)],
        ["graph", str(out)],
        ["graph", str(out), "--format", "mermaid", "--level", "net"],
    ):
        assert cli.main(argv) == 0


def test_compile_cli_writes_nbc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c01.nbc"
    assert cli.main(["compile", str(CONFORMANCE[0]), "-o", str(out)]) == 0
    assert out.read_bytes().startswith(nbc.MAGIC)
    assert cli.main(["compile", str(CONFORMANCE[0]), "--emit", "ir"]) == 0
    assert capsys.readouterr().out.startswith("net c01_chain")
    assert cli.main(["compile", str(CONFORMANCE[0]), "--dump-after", "all"]) == 0
    text = capsys.readouterr().out
    for stage in (
        "# after load",
        "# after desugar",
        "# after normalize",
        "# after net",
        "# after assemble",
    ):
        assert stage in text


def test_compile_cli_reports_unwritable_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # a regular file where the output's folder should be: no folder can be made there, even as
    # root, whatever the machine has at fixed paths
    (tmp_path / "file").write_text("", encoding="utf-8")
    out = tmp_path / "file" / "dir" / "out.nbc"
    assert cli.main(["compile", str(CONFORMANCE[0]), "-o", str(out)]) == 2
    assert "error[NOE802]" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda b: b"not bytecode at all", "NOE701"),
        (lambda b: b[:40], "NOE702"),
        (lambda b: b[:-3] + b"xyz", "NOE702"),
        (
            lambda b: b.replace(b"\xa6format" + bytes([FORMAT_VERSION]), b"\xa6format\x63"),
            "NOE703",
        ),
    ],
)
def test_bad_bytecode_is_reported(mutate: object, code: str) -> None:
    data = compile_file(CONFORMANCE[0]).nbc
    with pytest.raises(nbc.BytecodeError) as err:
        nbc.decode(mutate(data), format_version=FORMAT_VERSION)  # type: ignore[operator]
    assert err.value.code == code


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fuzzed_bytecode_never_crashes_the_loader(data: st.DataObject) -> None:
    original = compile_file(CONFORMANCE[2]).nbc
    raw = bytearray(original)
    for _ in range(data.draw(st.integers(1, 8))):
        index = data.draw(st.integers(0, len(raw) - 1))
        raw[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(nbc.BytecodeError):
        nbc.decode(bytes(raw[:cut]), format_version=FORMAT_VERSION)
    with contextlib.suppress(nbc.BytecodeError):
        Program.decode(bytes(raw[:cut]))


def test_verifier_rejects_broken_nets() -> None:
    net: Net = compile_file(CONFORMANCE[2]).net
    broken_ref = dataclasses.replace(
        net,
        transitions=(
            *net.transitions,
            Transition("x", "route", "start", ("nowhere",), ("start.done",), target="start"),
        ),
    )
    assert any("unknown place nowhere" in p for p in verify(broken_ref))
    stranded = dataclasses.replace(
        net, transitions=tuple(t for t in net.transitions if "start.done" not in t.consume)
    )
    assert any("start.done has no consumer" in p for p in verify(stranded))
    no_target = dataclasses.replace(
        net,
        transitions=(
            *net.transitions,
            Transition("y", "route", "start", ("start.done",), ("left.entry",)),
        ),
    )
    assert any("has no target" in p for p in verify(no_target))
    duplicate = dataclasses.replace(net, places=(*net.places, net.places[0]))
    assert any("duplicate place" in p for p in verify(duplicate))


def test_code_verifier_rejects_bad_instructions() -> None:
    assert verify_code([[999]], "pipeline", {}) == ["0: unknown opcode [999]"]
    assert verify_code([[BY_CODE[33].code]], "pipeline", {})[0].startswith("0: RULE takes 2")
    assert "unknown opcode" in verify_code([[2, 0]], "pipeline", {"expr": 1})[0]  # format 3's
    assert "out of range" in verify_code([[33, 7, 0]], "pipeline", {"expr": 3, "label": 1})[0]


def test_opcode_table_is_consistent_and_documented() -> None:
    codes = [op.code for op in OPCODES]
    assert len(codes) == len(set(codes))
    readme = (Path(__file__).resolve().parents[2] / "vm" / "README.md").read_text(encoding="utf-8")
    begin, end = "<!-- opcodes:begin -->", "<!-- opcodes:end -->"
    assert begin in readme and end in readme
    section = readme.split(begin)[1].split(end)[0].strip()
    assert section == reference_markdown(), (
        "run: python -m noetlc.ir.opcodes and paste into vm/README.md"
    )


def test_joins_and_forks_are_visible() -> None:
    payload = compile_file(CONFORMANCE_DIR / "c03_fanout_join.yaml").payload
    assert payload["joins"] == [["merge", "all", "start", ["left", "right"]]]
    assert "join all" in __import__("noetlc.ir.graph", fromlist=["to_dot"]).to_dot(payload)
