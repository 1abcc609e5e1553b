"""One set of safe YAML rules for playbooks, `--workload` and `--keychain` files: alias
expansion bounded, recursive aliases, bad explicit tags, over-long integers and non-UTF-8
text are located errors with a stable code, never NOE900 or a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetlc.cli import vm_main
from noetlc.compiler.pipeline import compile_source
from noetlc.diagnostics.yaml_safe import MAX_NODES, YamlError, load_data, read_data_file
from noetlc.stdlib_tools.keychain import Keychain, KeychainError

HELLO = Path(__file__).resolve().parents[2] / "examples" / "hello.yaml"


def _bomb(levels: int = 9) -> str:
    lines, prev = [], None
    for n in "abcdefghijk"[:levels]:
        items = ["x"] * 10 if prev is None else [f"*{prev}"] * 10
        lines.append(f"{n}: &{n} [{', '.join(items)}]")
        prev = n
    return "\n".join(lines) + "\n"


# name -> (bytes, code, line, column)
BAD_FILES = {
    "garbage": (b"\xff\xfe\x00garbage\x80", "NOE004", 1, 1),
    "latin1_value": (b"ok: 1\nbad: caf\xe9\n", "NOE004", 2, 9),
    "recursive_alias": (b"a: &a [*a]\n", "NOE006", 1, 8),
    "recursive_map_alias": (b"a: &a {b: *a}\n", "NOE006", 1, 11),
    "bad_int_tag": (b"n: !!int abc\n", "NOE006", 1, 4),
    "bad_float_tag": (b"n: !!float [1]\n", "NOE006", 1, 4),
    "python_tag": (b"n: !!python/object:os.system ls\n", "NOE006", 1, 4),
    "binary_tag": (b"n: !!binary aGVsbG8=\n", "NOE006", 1, 4),
    "huge_int": (b"n: " + b"1" * 5000 + b"\n", "NOE006", 1, 4),
    "alias_bomb": (_bomb().encode(), "NOE007", 6, 36),
    "syntax": (b"a: [1, 2\n", "NOE001", 2, 1),
    "two_documents": (b"a: 1\n---\nb: 2\n", "NOE006", 2, 1),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_data_files_are_located_errors(name: str, tmp_path: Path) -> None:
    data, code, line, column = BAD_FILES[name]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(data)
    with pytest.raises(YamlError) as info:
        read_data_file(path, "workload file")
    assert (info.value.code, info.value.line, info.value.column) == (code, line, column), info.value
    assert info.value.file == str(path)


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_run_with_a_bad_workload_or_keychain_file(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, code, line, column = BAD_FILES[name]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(data)
    for option in ("--workload", "--keychain"):
        status = vm_main.main(["run", str(HELLO), "--db", "memory:", option, str(path)])
        err = capsys.readouterr().err
        assert status in (1, 2), (option, err)
        assert "NOE900" not in err and "Traceback" not in err
        expected = code if option == "--workload" else "NOE813"
        assert f"error[{expected}]" in err, (option, err)
        assert f"{path}:{line}:{column}" in err, (option, err)


def test_submit_reads_the_workload_file_with_the_same_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "w.yaml"
    path.write_bytes(b"a: &a [*a]\n")
    status = vm_main.main(
        ["submit", str(HELLO), "--db", "postgresql://nobody@127.0.0.1:1/x", "--workload", str(path)]
    )
    err = capsys.readouterr().err
    assert status == 2 and "error[NOE006]" in err and f"{path}:1:8" in err, err


def test_good_data_keeps_yaml_semantics() -> None:
    text = "base: &b {x: 1, y: [1, 2]}\nother:\n  <<: *b\n  y: 3\nlist: [*b, *b]\nt: 2024-01-01\n"
    data = load_data(text, "w.yaml")
    assert data["other"] == {"x": 1, "y": 3}
    assert data["list"] == [{"x": 1, "y": [1, 2]}] * 2
    assert data["t"] == "2024-01-01"  # timestamps stay text (JSON-compatible data)
    assert load_data("", "w.yaml") is None
    assert load_data('{"json": [1, 2.5, true, null]}', "w.json") == {"json": [1, 2.5, True, None]}


def test_the_alias_budget_counts_expanded_nodes() -> None:
    load_data(_bomb(5), "w.yaml")  # 10 ** 5 scalars behind aliases: within the budget
    assert 10**5 < MAX_NODES < 10**7
    with pytest.raises(YamlError) as info:
        load_data(_bomb(7), "w.yaml")
    assert info.value.code == "NOE007"


def test_a_playbook_alias_bomb_is_noe007_not_a_hang() -> None:
    text = "apiVersion: noetl.io/v2\nkind: Playbook\nworkload:\n" + "".join(
        "  " + line + "\n" for line in _bomb().splitlines()
    )
    text += "workflow:\n  - step: start\n    tool: {kind: noop}\n"
    unit = compile_source(text, "bomb.yaml")
    codes = [d.code for d in unit.reporter.diagnostics]
    assert codes == ["NOE007"], codes


@pytest.mark.parametrize(
    ("scalar", "message"),
    [("!!int abc", "not a valid !!int"), ("1" * 5000, "more than 4,300 digits")],
)
def test_a_playbook_scalar_its_tag_cannot_read_is_noe006(scalar: str, message: str) -> None:
    text = f"apiVersion: noetl.io/v2\nkind: Playbook\nworkload:\n  n: {scalar}\n"
    text += "workflow:\n  - step: start\n    tool: {kind: noop}\n"
    unit = compile_source(text, "tag.yaml")
    [diag] = [d for d in unit.reporter.diagnostics if d.code == "NOE006"]
    assert message in diag.message and diag.span.line == 4


def test_the_keychain_reports_bad_files_with_their_location(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_bytes(b"pin: 1\nx: !!int nope\n")
    with pytest.raises(KeychainError) as info:
        Keychain(file=path)
    assert info.value.code == "NOE813" and f"{path}:2:4" in str(info.value)


def test_json_options_with_hostile_values_are_usage_errors_or_strings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from noetlc.cli import noetlc_main

    digits = "1" * 5000
    assert noetlc_main.main(["expr", "{{ x }}", "--vars", '{"x": ' + digits + "}"]) == 2
    assert noetlc_main.main(["expr", "{{ x }}", "--vars", "[" * 100000 + "]" * 100000]) == 2
    err = capsys.readouterr().err
    assert err.count("error[NOE800]") == 2 and "NOE900" not in err
    # `--set` reads JSON, else a string: a number too long to read is the string
    status = vm_main.main(
        ["run", str(HELLO), "--db", "memory:", "--json", "--set", f"name={digits}"]
    )
    out = capsys.readouterr().out
    assert status == 0 and f"hello {digits}" in out
