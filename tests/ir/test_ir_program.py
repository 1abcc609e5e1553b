"""The program object: `.nbc` round trip, structural verification, and loading without running
stored code (a tampered expression pool is refused, Python put into a pool never runs)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest

from noetlc import FORMAT_VERSION
from noetlc.cli import noetlc_main, vm_main
from noetlc.compiler.pipeline import compile_source
from noetlc.diagnostics.errors import InternalCompilerError
from noetlc.ir import nbc
from noetlc.ir.opcodes import BY_MNEMONIC
from noetlc.ir.program import Program
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import SQLiteStore
from noetlc.runtime.stored_program import decode_program
from noetlc.vm.loaded_program import LoadedProgram

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: guarded}
workload: {amount: 5}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'n': 1}"}
    next:
      - step: big
        when: "{{ workload.amount > 3 }}"
      - step: small
  - step: big
    tool: {kind: noop}
  - step: small
    tool: {kind: noop}
"""


def _compiled() -> tuple[Program, bytes]:
    unit = compile_source(PLAYBOOK, "guarded.yaml")
    assert not unit.reporter.has_errors, unit.reporter.diagnostics
    return unit.program, unit.nbc


def _rewrite(data: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    """Edit the payload and fix the container's checksum, as an attacker would."""
    header, body = msgpack.unpackb(data[len(nbc.MAGIC) :], raw=False)
    payload = msgpack.unpackb(body, raw=False, strict_map_key=False)
    change(payload)
    body = msgpack.packb(payload, use_bin_type=True)
    header["payload_sha256"] = hashlib.sha256(body).hexdigest()
    return nbc.MAGIC + msgpack.packb([header, body], use_bin_type=True)


def _guard_entry(payload: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in payload["expressions"] if e["kind"] == "code")


def test_a_program_round_trips_through_its_container() -> None:
    program, data = _compiled()
    decoded = Program.decode(data)
    assert decoded == program and decoded.encode() == data
    assert decoded.verify() == []
    header, payload = nbc.decode(data, format_version=FORMAT_VERSION)
    assert header["format"] == FORMAT_VERSION
    # the pool keeps sources and hashes of the generated code, never code
    assert all("code" not in e for e in payload["expressions"])
    assert all(len(e["sha256"]) == 64 for e in payload["expressions"] if e["kind"] != "const")


def test_stores_keep_the_container(tmp_path: Path) -> None:
    _, data = _compiled()
    store = SQLiteStore(str(tmp_path / "events.db"))
    try:
        summary = run_embedded(Program.decode(data).to_payload(), store=store)
        stored = store.execution(summary["execution_id"])
        assert stored is not None and bytes(stored["program"]).startswith(nbc.MAGIC)
        assert decode_program(stored["program"]) == Program.decode(data)
    finally:
        store.close()


def test_a_tampered_pool_is_refused_by_every_loader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, data = _compiled()

    def edit_source(payload: dict[str, Any]) -> None:  # the hash no longer matches
        _guard_entry(payload)["source"] = "{{ workload.amount > 300 }}"

    def edit_hash(payload: dict[str, Any]) -> None:  # another code generator's output
        _guard_entry(payload)["sha256"] = "0" * 64

    for change in (edit_source, edit_hash):
        tampered = _rewrite(data, change)
        # the runtime loader (embedded resume, replay, servers, workers)
        with pytest.raises(nbc.BytecodeError) as err:
            LoadedProgram(decode_program(tampered))
        assert err.value.code == "NOE705" and err.value.hint
        # the command line
        path = tmp_path / "tampered.nbc"
        path.write_bytes(tampered)
        assert vm_main.main(["run", str(path), "--db", "memory:", "--quiet"]) == 1
        err_text = capsys.readouterr().err
        assert "error[NOE705]" in err_text and "hint:" in err_text
        assert "Traceback" not in err_text


def test_python_put_into_the_pool_never_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, data = _compiled()
    marker = tmp_path / "pwned"
    payload_code = f"def _e(s):\n    open({str(marker)!r}, 'w').write('x')\n    return True\n"

    def stored_code(payload: dict[str, Any]) -> None:  # code next to a valid entry
        entry = _guard_entry(payload)
        entry["code"] = payload_code
        entry["sha256"] = hashlib.sha256(payload_code.encode()).hexdigest()

    def python_source(payload: dict[str, Any]) -> None:  # Python as the source text
        entry = _guard_entry(payload)
        entry["source"] = f"{{{{ __import__('os').system('touch {marker}') }}}}"

    def jinja_code(payload: dict[str, Any]) -> None:  # a slow-path entry with stored text
        entry = _guard_entry(payload)
        entry["kind"] = "jinja_expression"
        entry["jinja"] = f"cycler.__init__.__globals__.os.system('touch {marker}')"

    for change in (stored_code, python_source, jinja_code):
        path = tmp_path / "crafted.nbc"
        path.write_bytes(_rewrite(data, change))
        assert vm_main.main(["run", str(path), "--db", "memory:", "--quiet"]) == 1
        assert "error[NOE70" in capsys.readouterr().err
        assert not marker.exists()


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda p: p["control"][0][5].append([99, False]), "guard 99"),
        (
            lambda p: p["pipelines"][0][1].insert(0, [BY_MNEMONIC["TASK"].code, 99, 0, 0, None]),
            "TASK",
        ),
        (lambda p: p["control"][0][11].append("x.entry"), "x.entry"),
        (lambda p: p["pipelines"][0][1].pop(), "positions"),
        (lambda p: p["pipelines"].pop(), "pipeline block"),
        (lambda p: p.update(entry="nowhere"), "entry step"),
        (lambda p: p["values"].append({"$e": 1000}), "expression 1000"),
        (lambda p: p.update(control="not a list"), "malformed payload"),
        (lambda p: p["expressions"].append({"kind": "code"}), "malformed payload"),
    ],
)
def test_a_program_that_does_not_verify_is_refused(
    change: Callable[[dict[str, Any]], None],
    problem: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, data = _compiled()
    broken = _rewrite(data, change)
    with pytest.raises(nbc.BytecodeError) as err:
        Program.decode(broken)
    assert err.value.code == "NOE704" and problem in str(err.value), str(err.value)
    path = tmp_path / "broken.nbc"
    path.write_bytes(broken)
    for main, argv in (
        (noetlc_main.main, ["dis", str(path)]),
        (vm_main.main, ["run", str(path), "--db", "memory:", "--quiet"]),
    ):
        assert main(argv) == 1
        err_text = capsys.readouterr().err
        assert "error[NOE704]" in err_text and "Traceback" not in err_text


def test_a_stored_program_of_an_old_format_asks_to_recompile() -> None:
    program, _ = _compiled()
    old = nbc.encode(
        program.to_payload(), format_version=2, compiler_version="0.0.1", source_sha256=""
    )
    with pytest.raises(nbc.BytecodeError) as err:
        decode_program(old)
    assert err.value.code == "NOE703" and "recompile" in (err.value.hint or "")


def test_a_pass_that_builds_a_broken_program_is_an_internal_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from noetlc.compiler.passes import lower

    original = lower.Lowerer.transition

    def broken(self: lower.Lowerer, t: Any) -> Any:
        record = original(self, t)
        return dataclasses.replace(record, guards=(*record.guards, (12345, False)))

    monkeypatch.setattr(lower.Lowerer, "transition", broken)
    with pytest.raises(InternalCompilerError) as err:
        compile_source(PLAYBOOK, "guarded.yaml")
    assert err.value.pass_name == "assemble" and "does not verify" in str(err.value)


def test_a_broken_net_is_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from noetlc.compiler.passes import net as net_pass

    original = net_pass.run

    def broken(unit: Any) -> None:
        original(unit)
        net = unit.net
        unit.net = dataclasses.replace(net, places=(*net.places, net.places[0]))

    monkeypatch.setattr(net_pass, "run", broken)
    with pytest.raises(InternalCompilerError) as err:
        compile_source(PLAYBOOK, "guarded.yaml")
    assert err.value.pass_name == "net" and "duplicate place" in str(err.value)
