"""The self-contained playbooks of the NoETL corpus (INDEX.md: no external services) run
embedded to completion.

Not listed: `retry_test__python_retry_exception` (fails at random by design: 70 % per try, 5
tries), `test_loop_instance_isolation` and `playbook_composition__user_profile_scorer` (their
python code relies on NoETL result envelopes this runner does not produce yet)."""

from __future__ import annotations

import json

import pytest

from noetlc.cli import vm_main as cli
from tests.conftest import NOETL_CORPUS as NOETL
from tests.conftest import needs_noetl

RUNS = [
    "v10__hello_world__hello_world.yaml",
    "v10__simple_python.yaml",
    "v10__comprehensive_test.yaml",
    "v10__actions_test.yaml",
    "v10__test_args_passing.yaml",
    "v10__test_start_with_action.yaml",
    "v10__test_end_with_action.yaml",
    "v10__root_scripts__test_implicit_end_routing.yaml",
    "v10__loop_test.yaml",
    "v10__root_scripts__test_simple_loop.yaml",
    "v10__load_test__heavy_loop_aggregation__heavy_loop_aggregation.yaml",
    "v10__control_flow_workbook__control_flow_workbook.yaml",
    "v10__fanout_reduce__fanout_reduce_phase6.yaml",
    "v10__vars_test__test_vars_simple.yaml",
    "v10__vars_test__test_vars_block.yaml",
    "v10__vars_test__test_transient.yaml",
    "v2case__hello_world__hello_world.yaml",
    "v2case__control_flow_workbook__control_flow_workbook.yaml",
]
pytestmark = needs_noetl


@pytest.mark.parametrize("name", RUNS)
def test_self_contained_playbook_completes(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", str(NOETL / name), "--json", "--db", "memory:"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (code, summary["status"]) == (0, "completed"), summary["error"]
