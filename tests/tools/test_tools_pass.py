"""The compiler's `tools` pass: each kind's arguments checked statically, templates accepted,
positions at the offending key, and the corpora free of NOE6xx errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from noetlc.compiler.pipeline import compile_file, compile_source, pass_names
from tests.conftest import CONFORMANCE_CASES, NOETL_FILES, noetl_params


def _tool_codes(task: str) -> list[tuple[str, int, int]]:
    body = textwrap.indent(textwrap.dedent(task).strip("\n"), " " * 6)
    source = (
        "apiVersion: noetl.io/v2\nkind: Playbook\n"
        "workload: {t: 5, p: {a: 1}, m: GET, q: SELECT 1}\n"
        "workflow:\n  - step: start\n    tool:\n" + body + "\n"
    )
    unit = compile_source(source, file="t.yaml")
    return [
        (d.code, d.span.line, d.span.column)
        for d in unit.reporter.sorted()
        if d.code.startswith("NOE6") and d.span is not None
    ]


def test_the_pass_runs_right_after_resolve() -> None:
    names = pass_names()
    assert names[names.index("resolve") + 1] == "tools"


ACCEPTED = [
    "kind: http\nurl: https://x\nmethod: post\njson: {a: 1}\ntimeout: {connect: 5, read: 15}",
    "kind: http\nendpoint: https://x\nparams: {page: 1}\ntimeout: 8",
    "kind: http\nurl: https://x\ntimeout: '{{ workload.t }}'\nparams: '{{ workload.p }}'",
    "kind: http\nurl: https://x\nmethod: '{{ workload.m }}'\nheaders: {A: '{{ workload.m }}'}",
    "kind: postgres\nauth: pg_k8s\ncommand: SELECT 1",
    "kind: postgres\nconnection: postgresql://u@h/db\nquery: SELECT $1\nparams: [1]",
    "kind: postgres\nauth: '{{ workload.pg }}'\nsql: '{{ workload.q }}'\nparams: '{{ workload.p }}'",
    "kind: sqlite\ndatabase: a.db\nquery: SELECT ?\nparams: [1]",
    "kind: duckdb\npath: x.duckdb\nsql: SELECT 1",
    "kind: shell\ncmds: [echo a, echo b]",
    "kind: shell\ncommand: [ls, -l]\nenv: {A: 1}\ncwd: sub\ntimeout: 3",
    "kind: python\ncode: 'result = 1'\nlibs: {}\nauth: {}\nargs: {}\ninput: {a: 1}",
    "kind: python\ncode: 'result = 1'\nassert: {expects: [a], returns: [b]}",
    "kind: secrets\nkey: api_token\nprovider: env",
    "kind: playbook\npath: child\nreturn_step: done\ntask: label\ninput: {a: 1}",
    "kind: noop\nresult: {marker: x}",
    "kind: http\nurl: https://x\nspec: {timeout: {connect: 5}}",
]


@pytest.mark.parametrize("task", ACCEPTED)
def test_corpus_spellings_and_templates_are_accepted(task: str) -> None:
    assert _tool_codes(task) == []


REJECTED = [
    # (task, [(code, line, column)]) — the task starts on line 7, column 7
    ("kind: http\nurl: https://x\nheader: {}", [("NOE601", 9, 7)]),
    ("kind: http\nurl: https://x\ntimeout: {conect: 5}", [("NOE601", 9, 17)]),
    ("kind: python\ncode: x\nassert: {expect: [a]}", [("NOE601", 9, 16)]),
    ("kind: http\nmethod: GET", [("NOE602", 7, 13)]),
    ("kind: python\ninput: {}", [("NOE602", 7, 13)]),
    ("kind: postgres\ncommand: SELECT 1", [("NOE602", 7, 13)]),
    ("kind: shell\nenv: {}", [("NOE602", 7, 13)]),
    ("kind: playbook\nargs: {}", [("NOE602", 7, 13)]),
    ("kind: playbook\npath: child\nwait: true", [("NOE610", 9, 13)]),
    ("kind: http\nurl: https://x\nmethod: FETCH", [("NOE603", 9, 7)]),
    ("kind: http\nurl: https://x\ntimeout: soon", [("NOE603", 9, 7)]),
    ("kind: http\nurl: https://x\nparams: [1]", [("NOE603", 9, 7)]),
    ("kind: shell\ncmds: [echo a, [nested]]", [("NOE603", 8, 22)]),
    ("kind: postgres\nauth: a\nquery: SELECT 1\nparams: {a: 1}", [("NOE603", 10, 7)]),
    ("kind: secrets\nprovider: vault", [("NOE603", 8, 7)]),
    ("kind: sqlite\nquery: \"SELECT '{{ workload.t }}'\"", [("NOE604", 8, 7)]),
    ("kind: http\nurl: https://x\nendpoint: https://y", [("NOE605", 9, 7)]),
    ("kind: postgres\nauth: a\nquery: SELECT 1\ncommand: SELECT 2", [("NOE605", 10, 7)]),
    ("kind: shell\ncommand: ls\ncmds: [ls]", [("NOE605", 9, 7)]),
    ("kind: http\nurl: https://x\nmethod: POST\nbody: a\nform: {a: 1}", [("NOE605", 11, 7)]),
]


@pytest.mark.parametrize(("task", "expected"), REJECTED, ids=[t for t, _ in REJECTED])
def test_mistakes_are_reported_at_the_offending_key(
    task: str, expected: list[tuple[str, int, int]]
) -> None:
    assert _tool_codes(task) == expected


def test_messages_name_the_problem_and_suggest_the_spelling() -> None:
    unit = compile_source(
        "workflow:\n  - step: start\n    tool: {kind: http, url: 'https://x', hedaers: {}}\n"
    )
    (diag,) = [d for d in unit.reporter.diagnostics if d.code == "NOE601"]
    assert diag.message == (
        "unknown argument `hedaers` for the http tool of task `start_task`: ignored "
        "(the task runs without it, as on NoETL)"
    )
    assert diag.hint == "did you mean `headers`?"
    assert not diag.is_error
    unit = compile_source(
        "workflow:\n  - step: start\n    tool: {kind: http, url: x, timeout: soon}\n"
    )
    (diag,) = [d for d in unit.reporter.diagnostics if d.code == "NOE603"]
    assert (
        diag.message
        == "`timeout` of the http tool must be a number or a mapping, not a string ('soon')"
    )


def test_workbook_tasks_are_checked_too() -> None:
    source = (
        "workbook:\n  - name: w\n    kind: python\n    cod: x\n"
        "workflow:\n  - step: start\n    tool: {kind: workbook, name: w}\n"
    )
    codes = [(d.code, d.span.line) for d in compile_source(source).reporter.sorted() if d.span]
    assert ("NOE601", 4) in codes and ("NOE602", 3) in codes


@pytest.mark.parametrize(
    "path", noetl_params(NOETL_FILES) + CONFORMANCE_CASES, ids=lambda p: p.name
)
def test_the_corpus_has_no_tool_argument_errors(path: Path) -> None:
    unit = compile_file(path)
    errors = [d for d in unit.reporter.diagnostics if d.code.startswith("NOE6") and d.is_error]
    assert not errors, errors


def test_credentials_are_checked_against_a_declared_keychain_only() -> None:
    tasks = (
        "    tool:\n"
        "      - {name: a, kind: postgres, auth: pg_main, query: SELECT 1}\n"
        "      - {name: b, kind: http, url: 'https://x', auth: '{{ workload.tok }}'}\n"
        "      - {name: c, kind: postgres, auth: 'postgresql://u@h/db', query: SELECT 1}\n"
        "      - {name: d, kind: python, code: x, auth: {pg: pg_main, api: api_tokn}}\n"
        "      - {name: e, kind: secrets, key: other}\n"
    )
    body = "workflow:\n  - step: start\n" + tasks
    declared = "keychain:\n  - {name: pg_main, kind: postgres_credential}\n  - {name: api_token}\n"
    found = [
        (d.code, d.span.line, d.hint)
        for d in compile_source(declared + body).reporter.sorted()
        if d.code == "NOE606" and d.span
    ]
    assert found == [
        ("NOE606", 10, "did you mean `api_token`?"),
        ("NOE606", 11, "declare it: `keychain: [{name: other, kind: ...}]`"),
    ]
    assert not [d for d in compile_source(body).reporter.diagnostics if d.code == "NOE606"]
