"""`noetlc check --stats`: static budgets are bounds, or "unbounded" with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from noetlc.analysis.lint import context_of
from noetlc.analysis.static_budgets import compute
from noetlc.bench.generators import wide_fanout
from noetlc.cli import noetlc_main as cli
from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded

RETRY = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: retry}
workload: {items: [1, 2, 3]}
workflow:
  - step: start
    loop: {in: "{{ workload.items }}", iterator: item, spec: {mode: parallel, max_in_flight: 4}}
    tool:
      - name: call
        kind: noop
        spec:
          policy:
            rules:
              - when: "{{ outcome.status == 'error' }}"
                then: {do: retry, attempts: 4, backoff: exponential, delay: 1, max_delay: 3}
"""


def _budgets(source: str):  # type: ignore[no-untyped-def]
    ctx = context_of(compile_source(source, until="net"))
    assert ctx is not None
    return compute(ctx)


def test_retry_wait_sums_the_backoff_over_items() -> None:
    b = _budgets(RETRY)
    assert b.retry_seconds.value == 3 * (1 + 2 + 3)  # 3 items, delays 1, 2, min(4, 3)
    assert b.loop_window.value == 4 and b.tokens.value == 1
    # per item: 2 iteration events + 4 attempts' task records + 3 task.retry
    assert b.events.value == 2 + (2 + 3 * (2 + 4 + 3))
    summary = run_embedded(compile_source(RETRY).payload)
    assert summary["status"] == "completed" and summary["events"] <= b.events.value


def test_fan_out_and_tokens_of_a_wide_fork() -> None:
    b = _budgets(wide_fanout(6))
    assert b.fan_out.value == 6 and b.tokens.value == 6


def test_cycles_are_unbounded_with_a_reason() -> None:
    cases = Path(__file__).parent.parent / "diagnostics" / "cases"
    b = _budgets((cases / "NOE506_unbounded_tokens.yaml").read_text(encoding="utf-8"))
    assert b.tokens.value is None and "start" in b.tokens.note
    assert b.events.value is None and "cycle" in b.events.note


def test_check_stats_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "retry.yaml"
    path.write_text(RETRY, encoding="utf-8")
    assert cli.main(["check", "--stats", str(path)]) == 0
    assert "worst-case retry wait: 18 s" in capsys.readouterr().out
    assert cli.main(["check", "--stats", "--format", "json", str(path)]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"][str(path)]
    assert stats["retry_seconds"]["bound"] == 18
