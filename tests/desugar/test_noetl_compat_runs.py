"""NoETL constructs whose run-time meaning noetlc reproduces: each test runs one of our own
playbooks (tests/fixtures/compat/) embedded and checks the outcome NoETL's engine gives it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compat"


def _run(name: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    path = FIXTURES / name
    unit = compile_source(path.read_text(encoding="utf-8"), str(path))
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    assert not errors, errors
    assert unit.payload is not None
    return run_embedded(unit.payload, overrides)


def test_a_loop_steps_result_is_noetls_mapping_of_results_and_stats() -> None:
    summary = _run("loop_result_shape.yaml")
    assert summary["status"] == "completed", summary
    assert summary["steps"]["start"]["result"] == {
        "results": [{"square": 1}, None, {"square": 9}],
        "stats": {"total": 3, "success": 2, "failed": 1},
    }
    # python code reads it as NoETL's (`.get("results")`), templates as `.results`/`.stats`
    assert summary["result"] == {
        "from_code": 3,
        "stats": {"total": 3, "success": 2, "failed": 1},
        "count": 3,
        "first": 1,
        "failed": 1,
    }


def test_a_bare_result_in_a_steps_tools_is_the_incoming_steps_result() -> None:
    left = _run("incoming_result.yaml")
    assert left["status"] == "completed", left
    assert left["steps"]["join"]["result"] == 2
    assert left["result"] == {"seen": 2}
    right = _run("incoming_result.yaml", {"left": False})
    assert right["status"] == "completed", right
    assert right["steps"]["join"]["result"] == 3


def test_the_incoming_result_rewrite_names_the_source_or_passes_args() -> None:
    path = FIXTURES / "incoming_result.yaml"
    unit = compile_source(path.read_text(encoding="utf-8"), str(path), until="desugar")
    text = str(unit.canonical)
    assert "NOE419" in {d.code for d in unit.reporter.diagnostics}
    assert "{{ join }}" in text  # one source: its name
    assert "{{ args.result }}" in text and "{{ left }}" in text and "{{ right }}" in text


def test_a_step_level_set_writes_ctx_from_the_steps_own_result() -> None:
    summary = _run("step_set.yaml")
    assert summary["status"] == "completed", summary
    assert summary["ctx"] == {"a": 7, "b": 8, "c": 1}
    assert summary["result"] == [7, 8, 1]
    assert "never" not in str(summary["steps"]["stop_early"])


def _loop_commands(overrides: dict[str, Any]) -> tuple[int, Any]:
    from noetlc.vm.control import ControlVM
    from noetlc.vm.loaded_program import LoadedProgram

    path = FIXTURES / "loop_width_template.yaml"
    unit = compile_source(path.read_text(encoding="utf-8"), str(path))
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    program = LoadedProgram(unit.payload)
    vm = ControlVM(program, {**program.workload, **overrides}, "x")
    issued = [c for c in vm.start().commands if c.kind == "run"]
    return len(issued), vm.error


def test_max_in_flight_from_a_template_is_evaluated_when_the_loop_starts() -> None:
    assert _loop_commands({"width": 2}) == (2, None)
    assert _loop_commands({"width": 4}) == (4, None)
    count, error = _loop_commands({"width": "many"})  # `| int` gives 0, `or 1`: one at a time
    assert (count, error) == (1, None)
    summary = _run("loop_width_template.yaml", {"width": 3})
    assert summary["status"] == "completed", summary
    assert summary["result"]["results"] == [10, 20, 30, 40, 50]


def test_a_max_in_flight_template_that_is_no_positive_integer_fails_the_step() -> None:
    path = FIXTURES / "loop_width_template.yaml"
    text = path.read_text(encoding="utf-8").replace("(workload.width | int) or 1", "workload.width")
    unit = compile_source(text, str(path))
    assert unit.payload is not None
    summary = run_embedded(unit.payload, {"width": "wide"})
    assert summary["status"] == "failed"
    assert "max_in_flight" in str(summary["error"]) and "'wide'" in str(summary["error"])


def test_a_result_key_read_in_the_case_form_is_the_result_itself() -> None:
    # NoETL's engine of the `case:` form answered `.result` of a result without that key with
    # the result itself (its template proxy); a result that has the key gives its value
    summary = _run("legacy_result_key.yaml")
    assert summary["status"] == "completed", summary
    assert summary["result"] == [[{"n": 1}, {"n": 2}], 2, 5, 5, "yes"]


def test_the_result_key_rewrite_is_reported_and_only_in_the_case_form() -> None:
    from noetlc.compiler.desugar.result_key import rewrite_text

    path = FIXTURES / "legacy_result_key.yaml"
    unit = compile_source(path.read_text(encoding="utf-8"), str(path), until="desugar")
    assert [d.code for d in unit.reporter.diagnostics].count("NOE420") == 5
    names = frozenset({"start"})
    assert (
        rewrite_text("{{ start.data.result.command_0.rows }}", names)
        == "{{ (start.data.result | default(start.data)).command_0.rows }}"
    )
    # not a step name, an attribute of another name, a method: kept as written
    for text in (
        "{{ other.result }}",
        "{{ x.start.result }}",
        "{{ start.result() }}",
        "start.result",
    ):
        assert rewrite_text(text, names) == text
    canonical = path.read_text(encoding="utf-8").replace(
        "    case:\n      - when: \"{{ event.name == 'call.done' }}\"\n        then:\n"
        "          - next:\n              - step: keyed\n",
        "    next: keyed\n",
    )
    assert "case:" not in canonical
    unit = compile_source(canonical, str(path), until="desugar")
    assert "NOE420" not in {d.code for d in unit.reporter.diagnostics}
    assert "start.data.result.command_0.rows" in str(unit.canonical)
