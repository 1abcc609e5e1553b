"""The diagnostics table: one case file per code, each saying where the code must be reported.

A case is `cases/<CODE>_<slug>.yaml` whose first lines are comments of the form
`# expect: NOE201 at 7:5` (1-based line:column). The case goes through the whole pipeline
(lint cases, NOE5xx, through `noetlc lint`).
Codes that cannot come from a playbook file are listed in `COVERED_ELSEWHERE` with the test
that covers them. See docs/diagnostics.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from noetlc.analysis.lint import lint_source
from noetlc.compiler.pipeline import compile_source
from noetlc.diagnostics.codes import registry

CASES = Path(__file__).parent / "cases"
EXPECT = re.compile(r"^#\s*expect:\s*(NOE\d{3})\s+at\s+(\d+):(\d+)\s*$")

COVERED_ELSEWHERE = {
    "NOE004": "tests/compiler/test_cli.py::test_unreadable_files",
    "NOE800": "tests/compiler/test_cli.py::test_usage_errors_exit_2_without_traceback",
    "NOE801": "tests/compiler/test_cli.py::test_explain_unknown_code",
    "NOE310": "tests/expressions/test_expr_cli.py::test_runtime_errors_are_located",
    "NOE311": "tests/hostile/test_expression_limits.py::test_noetlc_expr_reports_noe311",
    "NOE701": "tests/ir/test_ir_compile.py::test_bad_bytecode_is_reported",
    "NOE702": "tests/ir/test_ir_compile.py::test_bad_bytecode_is_reported",
    "NOE703": "tests/ir/test_ir_compile.py::test_bad_bytecode_is_reported",
    "NOE704": "tests/ir/test_ir_program.py::test_a_program_that_does_not_verify_is_refused",
    "NOE705": "tests/ir/test_ir_program.py::test_a_tampered_pool_is_refused_by_every_loader",
    "NOE802": "tests/ir/test_ir_compile.py::test_compile_cli_reports_unwritable_output",
    "NOE803": "tests/vm/test_vm_store.py::test_bad_store_urls",
    "NOE804": "tests/vm/test_vm_store.py::test_run_records_events_and_status",
    "NOE805": "tests/postgres/test_pg_cli.py::test_bad_urls_give_a_code_a_hint_and_exit_5",
    "NOE806": "tests/postgres/test_pg_cli.py::test_bad_urls_give_a_code_a_hint_and_exit_5",
    "NOE807": "tests/postgres/test_pg_cli.py::test_a_database_that_rejects_us_gives_noe807",
    "NOE870": "tests/service/test_service_api.py::test_health_needs_no_token_and_everything_else_does",
    "NOE871": "tests/service/test_service_api.py::test_register_versions_by_content",
    "NOE872": "tests/service/test_service_api.py::test_execute_errors",
    "NOE873": "tests/service/test_service_api.py::test_an_invalid_playbook_is_refused_with_located_diagnostics",
    "NOE874": "tests/service/test_service_cli.py::test_serve_refuses_without_a_key_or_token",
    "NOE875": "tests/service/test_service_cli.py::test_serve_refuses_without_a_key_or_token",
    "NOE876": "tests/service/test_service_credentials.py::test_values_can_be_refused",
    "NOE877": "tests/service/test_service_guard.py::test_a_rebinding_request_with_a_foreign_host_is_refused",
    "NOE878": "tests/service/test_service_guard.py::test_a_body_over_the_limit_is_413",
    "NOE879": "tests/service/test_service_guard.py::test_nul_surrogates_and_non_finite_numbers_are_400",
    "NOE880": "tests/service/test_service_operator.py::test_a_second_serve_and_a_busy_port_are_refused",
    "NOE881": "tests/service/test_service_operator.py::test_a_second_serve_and_a_busy_port_are_refused",
    "NOE882": "tests/service/test_service_operator.py::test_operator_mistakes_exit_2_with_a_code",
    "NOE883": "tests/service/test_service_noetl_routes.py::test_query_is_read_only_and_bounded",
    "NOE808": "tests/postgres/test_pg_migrations.py::test_an_unmigrated_schema_is_refused_with_noe808",
    "NOE809": "tests/postgres/test_pg_migrations.py::test_a_newer_schema_is_refused_with_noe809",
    "NOE810": "tests/postgres/test_pg_migrations.py::test_a_failing_migration_is_rolled_back_with_noe810",
    "NOE811": "tests/postgres/test_pg_migrations.py::test_an_edited_migration_is_refused_with_noe811",
    "NOE812": "tests/tools/test_tools_keychain.py::test_a_missing_entry_is_noe812_naming_the_env_var",
    "NOE813": "tests/tools/test_tools_keychain.py::test_a_bad_keychain_file_is_noe813",
    "NOE814": "tests/vm/test_vm_store.py::test_a_store_another_process_holds_locked_is_noe814",
    "NOE820": "tests/cli/test_cli_extras.py::test_a_command_that_needs_an_extra_names_it",
    "NOE830": "tests/cli/test_cli_first_hour.py::test_undeclared_and_infinite_overrides_are_warned",
    "NOE831": "tests/cli/test_cli_ownership.py::test_resume_refuses_a_live_owner_and_takes_over_a_dead_one",
    "NOE832": "tests/postgres/test_pg_cli_lines.py::test_submit_wait_timeout_is_noe832_and_resume_leaves_it_to_the_servers",
    "NOE833": "tests/hostile/test_fenced_ownership.py::test_a_process_that_lost_its_execution_writes_nothing_more",
    "NOE850": "tests/vm/test_vm_control.py::test_the_vm_never_raises",
    "NOE852": "tests/vm/test_vm_control.py::test_no_admission_rule",
    "NOE853": "tests/vm/test_vm_control.py::test_unhandled_failure_names_the_task_line",
    "NOE854": "tests/vm/test_vm_control.py::test_a_join_that_cannot_fire_is_a_deadlock",
    "NOE855": "tests/vm/test_vm_runtime.py::test_cancel_request_ends_the_execution_cancelled",
    "NOE856": "tests/vm/test_vm_runtime.py::test_resume_after_sigkill_runs_no_finished_task_again",
    "NOE857": "tests/vm/test_vm_control.py::test_execution_without_program",
    "NOE858": "tests/hostile/test_budgets.py::test_a_cycle_that_never_ends_is_stopped_by_its_budget",
    "NOE859": "tests/hostile/test_poison_pill.py::test_a_step_past_the_deadline_fails_its_execution_only",
    "NOE900": "tests/compiler/test_cli.py::test_internal_errors_have_a_report_footer",
    "NOE413": "tests/desugar/test_migrate_legacy.py::test_eval_becomes_policy_rules_and_runs",
    "NOE414": "tests/desugar/test_migrate_legacy.py::test_root_vars_become_ctx_set_once_at_the_start",
    "NOE415": "tests/desugar/test_migrate_legacy.py::test_pipe_becomes_the_rules_tasks_with_catch_as_policy_rules",
    "NOE416": "tests/desugar/test_migrate_legacy.py::test_next_entries_with_then_become_first_match_arcs",
    "NOE417": "tests/desugar/test_migrate_legacy.py::test_root_tracing_is_refused_by_check_and_removed_by_migrate",
    "NOE418": "tests/desugar/test_migrate_legacy.py::test_tool_as_a_kind_name_becomes_a_task_mapping",
    "NOE509": "tests/analysis/test_analysis_cli.py::test_budget_stops_the_search_with_a_warning",
}


def _case_files() -> list[Path]:
    return sorted(CASES.glob("*.yaml"))


def _expectations(path: Path) -> list[tuple[str, int, int]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = EXPECT.match(line)
        if m:
            out.append((m.group(1), int(m.group(2)), int(m.group(3))))
        elif not line.startswith("#"):
            break
    return out


@pytest.mark.parametrize("case", _case_files(), ids=lambda p: p.stem)
def test_case_reports_its_code_at_its_position(case: Path) -> None:
    expectations = _expectations(case)
    assert expectations, f"{case.name} has no `# expect: NOE### at L:C` line"
    assert case.name.startswith(expectations[0][0]), "name the file after its first expected code"
    text = case.read_text(encoding="utf-8")
    if expectations[0][0].startswith("NOE5"):  # lint findings: compile to the net, run the rules
        diagnostics = lint_source(text, file=case.name).diagnostics
    else:
        diagnostics = compile_source(text, file=case.name).reporter.diagnostics
    found = {(d.code, d.span.line, d.span.column) for d in diagnostics if d.span is not None}
    for expected in expectations:
        assert expected in found, f"expected {expected}, got {sorted(found)}"


def test_every_code_has_a_row() -> None:
    with_case = {p.name.split("_", 1)[0] for p in _case_files()}
    missing = [
        code for code in registry() if code not in with_case and code not in COVERED_ELSEWHERE
    ]
    assert not missing, f"codes without a case file or a COVERED_ELSEWHERE entry: {missing}"


@pytest.mark.parametrize("code", sorted(registry()))
def test_every_code_has_an_explanation_with_an_example(code: str) -> None:
    info = registry()[code]
    assert info.title and info.explain
    assert "Example" in info.explain, f"{code}'s explain text needs an example"
