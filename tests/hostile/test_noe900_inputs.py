"""Inputs that used to end in an internal error (NOE900): each is a located user error with a
stable code, a non-zero exit and no traceback, through every command that reads it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgpack
import pytest

from noetlc.cli import noetlc_main, vm_main
from noetlc.compiler.pipeline import compile_source
from noetlc.ir import nbc

HELLO = Path(__file__).resolve().parents[2] / "examples" / "hello.yaml"


def _playbook(workload_line: str) -> str:
    return (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p, path: t/p}\n"
        f"workload:\n  {workload_line}\n"
        "workflow:\n  - step: start\n    tool: {kind: noop}\n"
    )


def _no_internal_error(err: str) -> None:
    assert "NOE900" not in err and "Traceback" not in err and "bug in noetlc" not in err, err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("n: !!bool abc", "not a valid !!bool"),
        ("n: !!timestamp hello", "not a valid !!timestamp"),
        ("n: 18446744073709551616", "64 bits"),
        ("n: -9223372036854775809", "64 bits"),
    ],
)
def test_a_playbook_scalar_is_a_located_error_in_every_command(
    line: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _playbook(line)
    unit = compile_source(text, "p.yaml")
    [diag] = [d for d in unit.reporter.diagnostics if d.is_error]
    assert diag.code == "NOE006" and message in diag.message, diag
    assert (diag.span.line, diag.span.column) == (5, 6)
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    commands = [
        (noetlc_main.main, ["check", str(path)]),
        (noetlc_main.main, ["compile", str(path), "-o", str(tmp_path / "p.nbc")]),
        (noetlc_main.main, ["migrate", str(path)]),
        (vm_main.main, ["run", str(path), "--db", "memory:"]),
    ]
    for main, argv in commands:
        status = main(argv)
        captured = capsys.readouterr()
        err = captured.out + captured.err  # `check` prints its diagnostics on stdout
        _no_internal_error(err)
        assert status in (1, 2), (argv, status, err)
        assert "NOE006" in err and f"{path}:5:6" in err, (argv, err)


def test_integers_of_64_bits_still_compile_and_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for value in (2**64 - 1, -(2**63)):
        path = tmp_path / "p.yaml"
        path.write_text(_playbook(f"n: {value}"), encoding="utf-8")
        assert vm_main.main(["run", str(path), "--db", "memory:"]) == 0, capsys.readouterr().err


def test_a_folded_expression_too_big_for_the_bytecode_is_not_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _playbook("n: 1").replace(
        "tool: {kind: noop}", "tool: {kind: noop}\n    set: {ctx: {big: '{{ 2 ** 70 }}'}}"
    )
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    status = noetlc_main.main(["compile", str(path), "-o", str(tmp_path / "p.nbc")])
    _no_internal_error(capsys.readouterr().err)
    assert status == 0


@pytest.mark.parametrize("option", ["--workload", "--keychain"])
def test_a_bad_bool_in_a_data_file_is_located(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "data.yaml"
    path.write_text("ok: 1\nn: !!bool abc\n", encoding="utf-8")
    status = vm_main.main(["run", str(HELLO), "--db", "memory:", option, str(path)])
    err = capsys.readouterr().err
    _no_internal_error(err)
    assert status in (1, 2) and f"{path}:2:4" in err and "not a valid !!bool" in err, err


def test_migrate_of_a_key_the_round_trip_reader_refuses_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _playbook('"a\\tb": 1\n  c\td: 2')
    assert not [d for d in compile_source(text, "p.yaml").reporter.diagnostics if d.is_error]
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    status = noetlc_main.main(["migrate", str(path)])
    err = capsys.readouterr().err
    _no_internal_error(err)
    assert status == 1 and "NOE001" in err and f"{path}:6:4" in err, err
    assert "quote" in err  # the hint says how to make the file readable


def _nested_nbc(tmp_path: Path, depth: int) -> Path:
    source = tmp_path / "hello.nbc"
    assert noetlc_main.main(["compile", str(HELLO), "-o", str(source)]) == 0
    data = source.read_bytes()
    header, body = msgpack.unpackb(data[len(nbc.MAGIC) :], raw=False)
    payload = msgpack.unpackb(body, raw=False, strict_map_key=False)
    nested: object = 0
    for _ in range(depth):
        nested = [nested]
    instruction = payload["pipelines"][0][1][0]  # an operand of the first instruction
    payload["pipelines"][0][1][0] = [instruction[0], nested, *instruction[2:]]
    body = msgpack.packb(payload, use_bin_type=True)
    header["payload_sha256"] = hashlib.sha256(body).hexdigest()
    out = tmp_path / "deep.nbc"
    out.write_bytes(nbc.MAGIC + msgpack.packb([header, body], use_bin_type=True))
    return out


@pytest.mark.parametrize("depth", [1000])
def test_a_deeply_nested_operand_is_refused_by_dis_and_run(
    depth: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _nested_nbc(tmp_path, depth)
    capsys.readouterr()
    for main, argv in (
        (noetlc_main.main, ["dis", str(path)]),
        (vm_main.main, ["run", str(path), "--db", "memory:"]),
    ):
        status = main(argv)
        err = capsys.readouterr().err
        _no_internal_error(err)
        assert status != 0 and ("NOE704" in err or "NOE702" in err), (argv, err)
