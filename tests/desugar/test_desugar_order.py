"""The desugar rewrites: named once each, in one literal order, and a `retry:` that a later
rewrite brings in (a task a `case` rule runs, a step's `sink:`) rewritten where it is made."""

from __future__ import annotations

from noetlc.compiler.passes.desugar import REWRITES, migrate_passes, passes
from noetlc.compiler.pipeline import compile_source

HEAD = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t}\nworkflow:\n"


# a legacy `retry: 2` keeps NoETL's old retry module's timing: exponential from 1 s, at most 60 s
LEGACY_RETRY_2 = {"do": "retry", "attempts": 2, "backoff": "exponential", "max_delay": 60}


def test_every_rewrite_is_named_once() -> None:
    names = [r.name for r in REWRITES]
    assert len(names) == len(set(names))
    functions = [(r.module, r.function) for r in REWRITES]
    assert len(functions) == len(set(functions)), "a rewrite runs twice"


def test_the_options_filter_the_one_list_in_its_order() -> None:
    everything = [name for name, _ in passes(migrate=True)]
    assert everything == [r.name for r in REWRITES]
    plain = [name for name, _ in passes()]
    assert plain == [r.name for r in REWRITES if not r.migrate_only]
    printed = [name for name, _ in passes(migrate=True, keep_canonical=True)]
    assert "cursor_loop" not in printed and "loop_vars" not in printed
    assert [n for n, _ in migrate_passes()] == [r.name for r in REWRITES if r.migrate_only]


def _canonical_tasks(source: str) -> list[dict]:
    unit = compile_source(HEAD + source, options={"migrate": True}, until="desugar")
    assert unit.canonical is not None
    step = unit.canonical.to_python()["workflow"][0]
    tool = step["tool"]
    return tool if isinstance(tool, list) else [tool]


def test_a_task_a_case_rule_runs_has_its_retry_rewritten() -> None:
    tasks = _canonical_tasks(
        """  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          - save_item: {tool: {kind: python, code: "result = 2"}, retry: 2}
          - next: [{step: end}]
  - step: end
    tool: {kind: noop}
"""
    )
    assert not any("retry" in t for t in tasks)
    rules = [r for t in tasks for r in t.get("spec", {}).get("policy", {}).get("rules", [])]
    assert LEGACY_RETRY_2 in [r["then"] for r in rules]


def test_a_sinks_own_retry_is_rewritten() -> None:
    tasks = _canonical_tasks(
        """  - step: start
    tool: {kind: python, code: "result = 1"}
    sink: {kind: postgres, auth: pg, command: "select 1", retry: 2}
"""
    )
    assert not any("retry" in t for t in tasks)
    assert tasks[-1]["spec"]["policy"]["rules"][0]["then"] == LEGACY_RETRY_2
