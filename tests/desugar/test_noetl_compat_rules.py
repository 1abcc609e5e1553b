"""Rules taken from NoETL's engine (docs/compatibility.md, "Rules from NoETL's engine"): each
test compiles or runs one of our own playbooks (tests/fixtures/compat/) and checks what NoETL
does with the construct."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.stdlib_tools.registry import call_tool, without_keys

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compat"


def _compile(name: str, text: str | None = None) -> Any:
    path = FIXTURES / name
    return compile_source(text or path.read_text(encoding="utf-8"), str(path))


def _run(name: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    unit = _compile(name)
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    return run_embedded(unit.payload, overrides)


def test_arguments_a_kind_does_not_take_are_warnings_with_a_hint_and_are_ignored() -> None:
    unit = _compile("unknown_tool_arguments.yaml")
    found = [(d.code, d.span.line, d.is_error) for d in unit.reporter.sorted()]
    assert found == [
        ("NOE601", 15, False),  # python iterator
        ("NOE601", 21, False),  # duckdb gcs_credential
        ("NOE601", 27, False),  # shell exports
        ("NOE601", 34, False),  # workbook with
        ("NOE601", 45, False),  # http timeout_seconds
    ]
    hints = {d.message.split("`")[1]: d.hint for d in unit.reporter.diagnostics}
    assert hints["timeout_seconds"] == "did you mean `timeout`?"
    assert "the shell tool takes: command" in str(hints["exports"])
    summary = _run("unknown_tool_arguments.yaml")
    assert summary["status"] == "completed", summary
    # the tasks ran without the unknown keys: workbook `with` is not its input (NoETL reads
    # neither), the duckdb and shell tasks ran as written
    assert summary["result"]["v"] == 7
    assert summary["result"]["reuse"] == {"n": 8}
    assert summary["result"]["shout"]["stdout"] == "hello\n"
    assert summary["steps"]["query"]["result"]["rows"] == [{"answer": 42}]


def test_a_misspelt_kind_stays_an_error() -> None:
    text = (FIXTURES / "unknown_tool_arguments.yaml").read_text(encoding="utf-8")
    unit = _compile("unknown_tool_arguments.yaml", text.replace("kind: duckdb", "kind: duckbd"))
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    assert [d.code for d in errors] == ["NOE205"]
    assert errors[0].hint is not None and "duckdb" in errors[0].hint


def test_the_runtime_leaves_unknown_keys_out_at_any_depth() -> None:
    args = {"a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 4, "g": 5}]}
    assert without_keys(args, [("a",), ("b", "Model", "d"), ("e", 0, "g")]) == {
        "b": {"c": 2},
        "e": [{"f": 4}],
    }
    assert args["b"] == {"c": 2, "d": 3}  # a copy: the caller's arguments are untouched
    outcome = call_tool("python", {"code": "result = 3", "iterator": "x", "assert": {"x": 1}})
    assert outcome["status"] == "ok", outcome
    assert outcome["result"] == 3
    wrong = call_tool("python", {"code": "result = 3", "input": [1]})
    assert wrong["status"] == "error" and wrong["error"]["type"] == "ToolArgumentError"


def test_a_workbook_entry_no_step_runs_does_not_reject_the_file() -> None:
    unit = _compile("unused_workbook_entry.yaml")
    found = [(d.code, d.span.line, d.is_error) for d in unit.reporter.sorted()]
    assert ("NOE602", 8, False) in found, found
    assert not unit.reporter.has_errors
    (diag,) = [d for d in unit.reporter.diagnostics if d.code == "NOE602"]
    assert "`template_only` is not run by any step" in diag.message
    summary = _run("unused_workbook_entry.yaml")
    assert summary["status"] == "completed", summary
    assert summary["result"] == "world"
    # once a step runs it, the missing argument is an error again
    text = (FIXTURES / "unused_workbook_entry.yaml").read_text(encoding="utf-8")
    used = _compile(
        "unused_workbook_entry.yaml", text.replace("name: greet}", "name: template_only}")
    )
    assert [d.code for d in used.reporter.diagnostics if d.is_error] == ["NOE602"]


def test_a_legacy_child_is_migrated_when_its_parent_runs_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from noetlc.runtime.children import child_unit

    folder = FIXTURES / "children"
    alone = compile_source((folder / "legacy_child.yaml").read_text(encoding="utf-8"))
    assert [d.code for d in alone.reporter.diagnostics if d.is_error] == ["NOE206"]
    unit = child_unit(str(folder / "legacy_child.yaml"))
    assert not unit.reporter.has_errors
    assert [d.code for d in unit.reporter.diagnostics] == ["NOE409"]  # what migrate reports
    monkeypatch.chdir(folder)
    with caplog.at_level(logging.WARNING, logger="noetlc.children"):
        summary = _run("children/parent.yaml")
    assert summary["status"] == "completed", summary
    view = summary["steps"]["start"]["result"]  # `return_step`: NoETL's status view
    assert (view["completed"], view["failed"], view["completed_steps"][0]) == (True, False, "start")
    assert view["result"] == {"double": 42}  # noetlc's addition: the step's result
    assert any("NOE409" in r.getMessage() for r in caplog.records)


def test_kind_script_runs_the_script_as_a_program_with_args_as_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unit = _compile("script_kind.yaml")
    assert unit.reporter.diagnostics == [], unit.reporter.sorted()
    monkeypatch.chdir(FIXTURES)
    summary = _run("script_kind.yaml")
    assert summary["status"] == "completed", summary
    result = summary["steps"]["start"]["result"]
    assert result["status"] == "completed" and result["exit_code"] == 0
    assert result["succeeded"] == 1 and result["pod_name"] is None
    assert json.loads(summary["result"]) == {"words": 3, "greeting": "hello"}
    failed = _run("script_kind.yaml", {"fail": True})
    assert failed["status"] == "failed"
    assert "exited with code 3: asked to fail" in failed["error"]["message"]


def test_kind_script_refuses_missing_dependencies_and_unknown_keys_are_hinted() -> None:
    text = (FIXTURES / "script_kind.yaml").read_text(encoding="utf-8")
    unit = _compile("script_kind.yaml", text.replace("timeout: 60", "timeout: 60\n      argz: {}"))
    assert [d.code for d in unit.reporter.diagnostics] == ["NOE601"]
    outcome = call_tool(
        "script",
        {
            "script": {"source": {"type": "inline", "code": "print(1)"}},
            "job": {"install_dependencies": ["surely-not-installed-pkg>=1"]},
        },
    )
    assert (
        outcome["status"] == "error" and "surely-not-installed-pkg" in outcome["error"]["message"]
    )
    assert (
        call_tool("script", {"script": {"source": {"type": "inline", "code": "print(2)"}}})[
            "result"
        ]["output"]
        == "2\n"
    )


@pytest.mark.postgres
def test_a_cursor_loop_claims_rows_until_the_queue_is_drained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import uuid

    from noetlc.runtime.postgres.testing import dsn_or_skip

    dsn = dsn_or_skip()
    monkeypatch.setenv("NOETL_KEYCHAIN_PG_LOCAL", json.dumps({"dsn": dsn}))
    schema = f"noetl_cursor_{uuid.uuid4().hex[:10]}"
    assert (
        call_tool("postgres", {"auth": dsn, "command": f"CREATE SCHEMA {schema}"})["status"] == "ok"
    )
    try:
        summary = _run("cursor_loop.yaml", {"schema": schema})
    finally:
        call_tool("postgres", {"auth": dsn, "command": f"DROP SCHEMA {schema} CASCADE"})
    assert summary["status"] == "completed", summary
    # every row claimed exactly once across the two slots; the poisoned row counted as failed,
    # not failing the step (NoETL's worker counts it and claims on)
    [check] = summary["steps"]["check"]["result"]["rows"]
    assert check == {"saved": 6, "total": 2 * (1 + 2 + 3 + 4 + 6 + 7), "most_claims": 1, "left": 0}
    drained = summary["steps"]["drain"]["result"]
    assert len(drained["results"]) == 2  # one result per worker slot
    assert sum(r["processed"] for r in drained["results"]) == 6
    assert sum(r["failed"] for r in drained["results"]) == 1
    assert {r["status"] for r in drained["results"]} <= {"ok", "partial"}
    assert "partial" in {r["status"] for r in drained["results"]}


def test_cursor_loops_are_refused_where_noetl_refuses_them() -> None:
    text = (FIXTURES / "cursor_loop.yaml").read_text(encoding="utf-8")
    cases = {
        "kind: postgres\n        auth: pg_local\n        claim": "kind: redis\n        auth: pg_local\n        claim",
        "        mode: cursor\n": "        mode: parallel\n",
        "        auth: pg_local\n        claim: |": "        claim: |",
    }
    for old, new in cases.items():
        assert old in text
        unit = _compile("cursor_loop.yaml", text.replace(old, new))
        errors = [d for d in unit.reporter.diagnostics if d.is_error]
        assert [d.code for d in errors] == ["NOE212"], (new, errors)
        assert errors[0].hint and errors[0].span is not None


@pytest.mark.parametrize(
    "end",
    [
        "  - step: end\n",
        "  - step: end\n    desc: End of the workflow\n",
        "  - {step: end, desc: done}\n",
        "  - step: end\n    desc: >\n      folded\n      text\n    # a trailing comment\n",
        "  - step: end",  # the last line, without a newline
    ],
)
def test_a_tool_less_end_step_checks_clean_after_migrate(end: str) -> None:
    from noetlc.cli.noetlc_commands.migrate import migrate_text

    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: e, path: tests/e}\n"
        "workflow:\n  - step: start\n    tool: {kind: python, code: 'result = 1'}\n"
        "    next:\n      - step: end\n" + end
    )
    unit = compile_source(text, "e.yaml", until="desugar", options={"migrate": True})
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    migrated = migrate_text(text, unit.document, unit.canonical)
    after = compile_source(migrated, "e.yaml")
    assert not after.reporter.has_errors, (migrated, after.reporter.sorted())
    assert after.payload is not None


def test_noetls_other_tool_kinds_are_notes_and_a_misspelt_one_an_error() -> None:
    base = "apiVersion: noetl.io/v2\nkind: Playbook\nworkflow:\n  - step: start\n    tool: {kind: %s}\n"
    for kind in ("agent", "gateway", "snowflake_transfer"):
        unit = compile_source(base % kind)
        assert [(d.code, d.is_error) for d in unit.reporter.diagnostics] == [("NOE607", False)]
    unit = compile_source(base % "scirpt")
    [diag] = unit.reporter.diagnostics
    assert diag.code == "NOE205" and diag.hint == "did you mean `script`?"


def test_a_child_that_does_not_compile_names_the_line_and_the_fix(tmp_path: Path) -> None:
    from noetlc.runtime.children import compile_child

    child = tmp_path / "child.yaml"
    child.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nworkflow:\n  - step: start\n"
        "    tool: {kind: pyhton, code: 'result = 1'}\n",
        encoding="utf-8",
    )
    payload, failed = compile_child(str(child))
    assert payload is None and failed is not None
    assert failed["status"] == "failed" and failed["error"]["code"] == "NOE205"
    message = failed["error"]["message"]
    assert message.startswith(f"{child}:5:") and "did you mean `python`?" in message


def test_a_script_past_its_timeout_is_killed() -> None:
    outcome = call_tool(
        "script",
        {
            "script": {"source": {"type": "inline", "code": "import time\ntime.sleep(30)"}},
            "job": {"timeout": 0.5},
        },
    )
    assert outcome["status"] == "error" and outcome["error"]["type"] == "Timeout"
    assert outcome["result"]["status"] == "failed" and outcome["result"]["exit_code"] is None


def test_migrate_prints_a_cursor_loop_as_written_and_the_result_checks_clean() -> None:
    from noetlc.cli.noetlc_commands.migrate import migrate_text

    text = (FIXTURES / "cursor_loop.yaml").read_text(encoding="utf-8")
    legacy = text.replace(
        "metadata: {name: cursor_loop, path: tests/compat/cursor_loop}",
        "name: cursor_loop\npath: tests/compat/cursor_loop",
    )
    options = {"migrate": True, "print": True}
    unit = compile_source(legacy, "c.yaml", until="desugar", options=options)
    assert "NOE402" in {d.code for d in unit.reporter.diagnostics}
    migrated = migrate_text(legacy, unit.document, unit.canonical)
    assert "cursor:" in migrated and "__claim" not in migrated
    after = compile_source(migrated, "c.yaml")
    assert not after.reporter.has_errors and after.payload is not None


def test_loop_index_is_the_iterations_number_as_noetl_binds_it() -> None:
    unit = _compile("loop_index.yaml")
    assert unit.reporter.diagnostics == []  # a known name: no NOE305
    summary = _run("loop_index.yaml")
    assert summary["status"] == "completed", summary
    assert summary["steps"]["start"]["result"]["results"] == ["0:a", "1:b", "2:c"]
    outside = "apiVersion: noetl.io/v2\nkind: Playbook\nworkflow:\n  - step: start\n"
    outside += "    tool: {kind: noop, input: '{{ loop_index }}'}\n"
    assert [d.code for d in compile_source(outside).reporter.diagnostics] == ["NOE305"]


def test_a_script_from_an_http_source_reads_its_endpoint_first() -> None:
    import http.server
    import threading

    body = b"import json, sys\nprint(json.loads(sys.argv[1])['n'] + 1)\n"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == "/scripts/inc.py"
            self.send_response(200 if found else 404)
            self.end_headers()
            self.wfile.write(body if found else b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_port}/scripts/inc.py"
        source = {"type": "http", "endpoint": endpoint}
        out = call_tool("script", {"script": {"uri": "inc.py", "source": source}, "args": {"n": 4}})
        assert out["status"] == "ok", out
        assert out["result"]["output"] == "5\n"
        missing = call_tool(
            "script", {"script": {"uri": endpoint + "x", "source": {"type": "http"}}}
        )
        assert missing["status"] == "error" and "HTTP 404" in missing["error"]["message"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_workbook_entry_written_as_tool_kind_is_migrated_like_a_step() -> None:
    from noetlc.cli.noetlc_commands.migrate import migrate_text

    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: w, path: tests/w}\n"
        "workbook:\n"
        "  - name: greet\n"
        "    desc: an entry in an older form\n"
        "    tool: python\n"
        "    input: {who: world}\n"
        "    code: \"result = {'hello': who}\"\n"
        "workflow:\n"
        "  - step: start\n"
        "    tool: {kind: workbook, name: greet}\n"
    )
    unit = compile_source(text, "w.yaml")
    [error] = [d for d in unit.reporter.diagnostics if d.is_error]
    assert (error.code, error.span.line) == ("NOE105", 7)
    assert error.hint is not None and "noetlc migrate" in error.hint
    migrated = compile_source(text, "w.yaml", until="desugar", options={"migrate": True})
    assert ("NOE418", 7) in [(d.code, d.span.line) for d in migrated.reporter.diagnostics]
    after = migrate_text(text, migrated.document, migrated.canonical)
    assert "kind: python" in after and "desc: an entry in an older form" in after
    unit = compile_source(after, "w.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    summary = run_embedded(unit.payload)
    assert summary["status"] == "completed" and summary["result"] == {"hello": "world"}


def test_the_oldest_type_spelling_of_the_tool_kind_is_migrated() -> None:
    from noetlc.cli.noetlc_commands.migrate import migrate_text

    text = (FIXTURES / "type_as_kind.yaml").read_text(encoding="utf-8")
    unit = _compile("type_as_kind.yaml")
    errors = [(d.code, d.span.line) for d in unit.reporter.sorted() if d.is_error]
    assert errors == [("NOE105", 7), ("NOE105", 13), ("NOE105", 21), ("NOE105", 34), ("NOE105", 40)]
    assert all("noetlc migrate" in str(d.hint) for d in unit.reporter.diagnostics if d.is_error)
    options = {"migrate": True, "print": True}
    migrated = compile_source(text, "t.yaml", until="desugar", options=options)
    assert not migrated.reporter.has_errors, migrated.reporter.sorted()
    after = migrate_text(text, migrated.document, migrated.canonical)
    assert "type: python" not in after and "type: iterator" not in after
    final = compile_source(after, "t.yaml")
    assert not final.reporter.has_errors, (after, final.reporter.sorted())
    summary = run_embedded(final.payload)
    assert summary["status"] == "completed", summary
    assert summary["steps"]["start"]["result"] == {"base": 10}
    assert summary["steps"]["each"]["result"]["results"] == [{"doubled": d} for d in (2, 4, 6)]
    assert summary["steps"]["reuse"]["result"] == {"tripled": 15}


def test_a_step_level_set_ctx_writes_ctx_from_the_steps_result_like_vars() -> None:
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: s, path: tests/s}\n"
        "workflow:\n"
        "  - step: start\n"
        "    tool: {kind: python, code: \"result = {'n': 4}\"}\n"
        "    set_ctx:\n"
        "      doubled: '{{ result.n * 2 }}'\n"
        "    next: [{step: end}]\n"
        "  - step: end\n"
        "    tool: {kind: noop, input: '{{ ctx.doubled }}'}\n"
    )
    unit = compile_source(text, "s.yaml")
    assert [(d.code, d.span.line) for d in unit.reporter.diagnostics] == [("NOE406", 7)]
    summary = run_embedded(unit.payload)
    assert summary["status"] == "completed", summary
    assert summary["result"] == 8 and summary["ctx"]["doubled"] == 8


@pytest.mark.parametrize("marker", ["tool: end", "type: end", "tool: router", "type: router"])
def test_an_end_or_router_marker_becomes_a_step_without_a_tool(marker: str) -> None:
    from noetlc.cli.noetlc_commands.migrate import migrate_text

    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: e, path: tests/e}\n"
        "workflow:\n  - step: start\n    tool: {kind: python, code: 'result = 1'}\n"
        "    next:\n      - step: end\n"
        f"  - step: end\n    desc: End of the workflow\n    {marker}\n"
    )
    assert compile_source(text, "e.yaml").reporter.has_errors  # check: run migrate
    unit = compile_source(text, "e.yaml", until="desugar", options={"migrate": True})
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    migrated = migrate_text(text, unit.document, unit.canonical)
    assert "kind: noop" in migrated and marker not in migrated
    after = compile_source(migrated, "e.yaml")
    assert not after.reporter.has_errors, (migrated, after.reporter.sorted())
    assert run_embedded(after.payload)["status"] == "completed"


def test_a_tool_iterator_step_becomes_a_loop_over_its_task() -> None:
    from noetlc.cli.noetlc_commands.migrate import migrate_text

    text = (FIXTURES / "type_as_kind.yaml").read_text(encoding="utf-8")
    text = text.replace("    type: iterator\n", "    tool: iterator\n")
    text = text.replace(
        "      type: python\n      input: {n:", "      tool: python\n      input: {n:"
    )
    unit = _compile("type_as_kind.yaml", text)
    [diag] = [d for d in unit.reporter.diagnostics if d.is_error and d.span.line == 21]
    assert "older loop form" in diag.message and "loop: {in:" in str(diag.hint)
    options = {"migrate": True, "print": True}
    migrated = compile_source(text, "t.yaml", until="desugar", options=options)
    assert not migrated.reporter.has_errors, migrated.reporter.sorted()
    after = compile_source(migrate_text(text, migrated.document, migrated.canonical), "t.yaml")
    assert not after.reporter.has_errors, after.reporter.sorted()
    summary = run_embedded(after.payload)
    assert summary["steps"]["each"]["result"]["results"] == [{"doubled": d} for d in (2, 4, 6)]


@pytest.mark.postgres
def test_a_cursor_frame_runs_the_tasks_once_per_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from noetlc.runtime.postgres.testing import dsn_or_skip

    dsn = dsn_or_skip()
    monkeypatch.setenv("NOETL_KEYCHAIN_PG_LOCAL", json.dumps({"dsn": dsn}))
    schema = f"noetl_frames_{uuid.uuid4().hex[:10]}"
    assert (
        call_tool("postgres", {"auth": dsn, "command": f"CREATE SCHEMA {schema}"})["status"] == "ok"
    )
    try:
        summary = _run("cursor_frames.yaml", {"schema": schema})
    finally:
        call_tool("postgres", {"auth": dsn, "command": f"DROP SCHEMA {schema} CASCADE"})
    assert summary["status"] == "completed", summary
    [slot] = summary["steps"]["batches"]["result"]["results"]
    assert slot == {"status": "ok", "processed": 7, "failed": 0, "breaks": 0}


def test_a_frame_noetl_refuses_is_refused() -> None:
    text = (FIXTURES / "cursor_frames.yaml").read_text(encoding="utf-8")
    bad = text.replace("{max_rows: 3, process: frame}", "{max_rows: 0, process: batch}")
    unit = _compile("cursor_frames.yaml", bad)
    errors = [(d.code, d.span.line) for d in unit.reporter.diagnostics if d.is_error]
    assert errors == [("NOE212", 30), ("NOE212", 30)]


def test_unknown_keys_of_a_policy_rules_action_are_warnings_as_noetl_ignores_them() -> None:
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nworkflow:\n  - step: start\n"
        "    tool:\n      kind: python\n      code: 'result = 2'\n"
        "      spec:\n        policy:\n          rules:\n"
        "            - else:\n                then: {do: continue, note: kept for people}\n"
    )
    unit = compile_source(text, "p.yaml")
    [diag] = unit.reporter.diagnostics
    assert (diag.code, diag.is_error, diag.span.line) == ("NOE101", False, 12)
    assert "ignored" in diag.message
    assert run_embedded(unit.payload)["status"] == "completed"
    # elsewhere an unknown key is still an error
    wrong = text.replace("  - step: start\n", "  - step: start\n    nxt: end\n")
    assert [d.code for d in compile_source(wrong).reporter.diagnostics if d.is_error] == ["NOE101"]


def test_noetls_collected_pages_keys_are_refused_with_the_ctx_key_to_read() -> None:
    # NoETL adds `_pagination` / `_all_collected_items` to a `case` pagination's step result;
    # noetlc keeps the pages in `ctx.<into>`: a read of them is an error naming that
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p, path: p}\n"
        "workflow:\n  - step: start\n    tool: {kind: python, code: \"result = {'a': 1}\"}\n"
        "    next: [{step: b}]\n  - step: b\n    tool:\n      kind: python\n"
        '      input: {x: "{{ start._all_collected_items }}",'
        ' y: "{{ start._pagination.pages_collected }}"}\n'
        '      code: "result = x"\n'
    )
    unit = compile_source(text, "p.yaml")
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    assert [d.code for d in errors] == ["NOE302", "NOE302"]
    assert all("ctx.<into>" in (d.hint or "") for d in errors)
