"""The embedded runtime's memory stays bounded on a durable store: a long cycle whose steps
return results stored by reference keeps a bounded number of their values (the log and the
result store hold them all), and a guard that reads a value dropped long ago reads it again."""

from __future__ import annotations

import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime import driver as driver_module
from noetlc.runtime.embedded import EmbeddedRuntime
from noetlc.runtime.store_url import open_store
from noetlc.vm.loaded_program import LoadedProgram

CYCLE = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: spin, path: t/spin}
workload: {stop: false}
executor:
  spec:
    budgets: {step_runs: RUNS, events: 0}
    policy: {limits: {max_payload_bytes: 64}}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'rows': 'F' * 5000}"}
    next: spin
  - step: spin
    tool: {kind: python, code: "import uuid; result = str(uuid.uuid4()) * 600"}
    next:
      arcs:
        - {step: end, when: "{{ workload.stop or (start.rows | length) != 5000 }}"}
        - {step: spin}
  - step: end
    tool: {kind: noop}
"""

KEPT = 16


def _run(tmp_path: Path, runs: int) -> tuple[dict[str, Any], EmbeddedRuntime, int]:
    unit = compile_source(CYCLE.replace("RUNS", str(runs)), "t.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    store = open_store(f"sqlite:///{tmp_path}/run{runs}.db")
    runtime = EmbeddedRuntime(LoadedProgram(unit.payload), store, str(uuid.uuid4()))
    tracemalloc.start()
    try:
        summary = runtime.start({"stop": False})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        store.close()
    return summary, runtime, peak


def test_a_long_cycle_keeps_a_bounded_number_of_result_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver_module, "MAX_LOADED_VALUES", KEPT)
    small, runtime_small, peak_small = _run(tmp_path, 60)
    large, runtime_large, peak_large = _run(tmp_path, 240)
    for summary, runs in ((small, 60), (large, 240)):
        # the cycle ran until its step budget stopped it: every run's result went by reference
        assert summary["error"]["budget"] == "step_runs", summary["error"]
        assert summary["steps"]["spin"]["runs"] == runs
        assert summary["steps"]["start"]["result"] == {"rows": "F" * 5000}
        assert len(summary["steps"]["spin"]["result"]) == 36 * 600
    for runtime, runs in ((runtime_small, 60), (runtime_large, 240)):
        assert runtime.refs.stored >= runs
        assert runtime.driver is not None
        loaded = runtime.driver.loaded
        assert len(loaded.values) <= KEPT and len(loaded.sizes) == len(loaded.values)
        # the exit guard reads `start` every turn: dropped, then read again by its key
        assert loaded.reloads > 0
    # four times the runs (~21 KB of result each): not four times the memory
    assert peak_large / peak_small < 1.5, (peak_small, peak_large)
