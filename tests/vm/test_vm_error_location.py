"""A failed task is reported at the YAML line that raised: a python error at its code line's
file line and column (block, quoted and plain code, nested calls in the traceback), a
failing template at the expression's position; `noetl-vm run` prints both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main as cli
from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.vm.locate import where


def _error(text: str, file: str = "where.yaml") -> dict[str, Any]:
    unit = compile_source(text, file)
    assert unit.payload is not None, [d.message for d in unit.reporter.diagnostics]
    summary = run_embedded(unit.payload)
    assert summary["status"] == "failed"
    error: dict[str, Any] = summary["error"]
    return error


HEAD = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: where, path: t/where}
workload: {zero: 0}
workflow:
  - step: start
    tool:
      kind: python
"""


def _line_of(text: str, needle: str) -> tuple[int, int]:
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(needle)


def test_a_block_of_code_raises_at_its_file_line_with_the_task_traceback() -> None:
    text = HEAD + (
        "      code: |\n"
        "        def inner(v):\n"
        "            return outer(v)\n"
        "        def outer(v):\n"
        "            raise KeyError(f'missing {v}')\n"
        "        result = inner(3)\n"
    )
    error = _error(text)
    line, column = _line_of(text, "raise KeyError")
    assert error["type"] == "KeyError" and "missing 3" in error["message"]
    assert error["yaml"] == {"file": "where.yaml", "line": line, "column": column}
    assert error["line"] == 4  # the code block's own line is kept beside it
    frames = error["traceback"]
    assert [f["function"] for f in frames] == ["<task>", "inner", "outer"]
    assert [f["yaml_line"] for f in frames] == [
        _line_of(text, "result = inner")[0],
        _line_of(text, "return outer")[0],
        line,
    ]


@pytest.mark.parametrize(
    "code",
    [
        "      code: \"raise ValueError('quoted')\"\n",
        "      code: raise ValueError('plain')\n",
    ],
)
def test_one_line_code_is_located_on_its_own_line(code: str) -> None:
    text = HEAD + code
    error = _error(text)
    line, column = _line_of(text, "code:")
    assert error["yaml"]["line"] == line
    # past `code: ` (and the quote): where the code's text starts
    assert error["yaml"]["column"] > column + len("code:")


def test_escaped_newlines_get_no_file_line_rather_than_a_wrong_one() -> None:
    error = _error(HEAD + "      code: \"x = 1\\nraise ValueError('escaped')\"\n")
    assert error["line"] == 2 and "yaml" not in error


def test_two_tasks_with_the_same_code_are_told_apart() -> None:
    body = "      code: |\n        raise ValueError('same')\n"
    text = HEAD + body + "    next: again\n  - step: again\n    tool:\n      kind: python\n" + body
    text = text.replace("raise ValueError('same')", "result = 1", 1)
    error = _error(text)
    assert error["step"] == "again"
    assert error["yaml"]["line"] == len(text.splitlines())


def test_a_failing_template_is_located_at_its_expression() -> None:
    text = HEAD + '      input: {x: "{{ 10 / workload.zero }}"}\n      code: "result = x"\n'
    error = _error(text)
    line, column = _line_of(text, '"{{ 10')
    assert error["type"] == "TemplateError"
    assert error["yaml"] == {"file": "where.yaml", "line": line, "column": column}
    assert error["expression"] == "{{ 10 / workload.zero }}"


def test_noetl_vm_run_prints_the_line_that_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = HEAD + (
        "      code: |\n"
        "        def f():\n"
        "            raise ValueError('deep')\n"
        "        print('printed before')\n"
        "        result = f()\n"
    )
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    assert cli.main(["run", str(path), "--db", "memory:"]) == 1
    err = capsys.readouterr().err
    line, column = _line_of(text, "raise ValueError")
    assert f"{path}:{line}:{column}: error[NOE853]: ValueError: deep" in err
    assert f"line {line}, in f: raise ValueError('deep')" in err
    # what the step printed is shown with the error (tasks print nowhere else)
    assert "output of step `start`:\n    printed before" in err


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("a.yaml:3:5", ("a.yaml", 3, 5)),
        ("C:/x/a.yaml:10:1", ("C:/x/a.yaml", 10, 1)),
        ("a.yaml", None),
        ("a.yaml:x:1", None),
        (None, None),
    ],
)
def test_stored_positions_are_parsed_or_ignored(text: Any, found: Any) -> None:
    assert where(text) == found
