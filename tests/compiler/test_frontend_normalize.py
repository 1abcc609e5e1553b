"""The `normalize` pass: shapes, shorthands, spec layering and the corpus dialect aliases."""

from __future__ import annotations

from typing import Any

import pytest

from noetlc.compiler import tree
from noetlc.compiler.passes import load, normalize
from noetlc.compiler.pipeline import compile_source
from noetlc.compiler.unit import CompilationUnit
from noetlc.diagnostics.report import Diagnostic

HEAD = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\n"


def _normalize(body: str) -> tuple[tree.Playbook, list[Diagnostic]]:
    unit = compile_source(HEAD + body, "t.yaml", until="normalize")
    assert unit.playbook is not None, unit.reporter.sorted()
    return unit.playbook, unit.reporter.sorted()


def _tree(body: str) -> tree.Playbook:
    playbook, diags = _normalize(body)
    assert diags == [], diags
    return playbook


def _py(node: Any) -> Any:
    return None if node is None else node.to_python()


def _step(playbook: tree.Playbook, name: str) -> tree.Step:
    step = playbook.step(name)
    assert step is not None
    return step


# --------------------------------------------------------------------------- task shapes


def test_task_list_shapes() -> None:
    pb = _tree(
        """\
workflow:
  - step: start
    tool: [{name: a, kind: noop}, {name: b, kind: noop}]
    next: unnamed
  - step: unnamed
    tool: [{kind: noop}, {kind: python, code: "result = 1"}]
    next: single
  - step: single
    tool: {kind: python, code: "result = 2"}
"""
    )
    assert [t.name for t in _step(pb, "start").tasks] == ["a", "b"]
    assert [t.name for t in _step(pb, "unnamed").tasks] == ["task_0", "task_1"]
    [single] = _step(pb, "single").tasks
    assert (single.name, single.kind, _py(single.args)) == (
        "single_task",
        "python",
        {"code": "result = 2"},
    )


# --------------------------------------------------------------------------- next shorthands


def test_next_shorthands() -> None:
    pb = _tree(
        """\
workflow:
  - step: start
    tool: {kind: noop}
    next: one
  - step: one
    tool: {kind: noop}
    next: [two, three]
  - step: two
    tool: {kind: noop}
    next: [{step: three, when: "{{ ctx.x }}", args: {a: 1}}, {step: end}]
  - step: three
    tool: {kind: noop}
    next:
      spec: {mode: inclusive}
      arcs: [{step: end, when: true}]
  - step: end
    tool: {kind: noop}
"""
    )
    start, one, two, three, end = pb.workflow
    assert start.next == tree.Router("exclusive", (tree.Arc("one"),))
    # a list of targets without conditions is a parallel fork: both start
    assert one.next == tree.Router("inclusive", (tree.Arc("two"), tree.Arc("three")))
    assert two.next is not None and two.next.mode == "exclusive"
    first, second = two.next.arcs
    assert (first.step, first.when, _py(first.args)) == (
        "three",
        tree.Guard("{{ ctx.x }}"),
        {"a": 1},
    )
    assert second == tree.Arc("end")
    assert three.next == tree.Router("inclusive", (tree.Arc("end", when=tree.Guard("true")),))
    assert end.next is None  # a final step


def test_arc_target_spans_point_at_the_name() -> None:
    pb = _tree("workflow:\n  - step: start\n    tool: {kind: noop}\n    next: [{step: end}]\n")
    [arc] = _step(pb, "start").next.arcs  # type: ignore[union-attr]
    assert (arc.target_span.line, arc.target_span.column) == (7, 19)


# --------------------------------------------------------------------------- spec layering


LAYERED = """\
executor:
  spec:
    entry_step: start
    timeout: {connect: 1, read: 10}
    retries: [1, 2, 3]
    policy: {results: {reference_first: true}}
workflow:
  - step: start
    spec:
      join: any
      timeout: {read: 20}
      policy: {failure: {mode: best_effort}}
    loop:
      in: [1, 2]
      iterator: n
      spec: {mode: parallel, max_in_flight: 3, batch: 5}
    tool:
      - name: a
        kind: noop
        spec:
          retries: [9]
          timeout: {connect: 2}
          policy: {rules: [{else: {then: {do: continue}}}]}
"""


def test_spec_layering_merges_maps_replaces_lists_and_keeps_control_keys_home() -> None:
    pb = _tree(LAYERED)
    step = _step(pb, "start")
    [task] = step.tasks
    assert _py(task.spec) == {
        "timeout": {"connect": 2, "read": 20},  # maps deep-merge, inner wins
        "retries": [9],  # lists replace
        "batch": 5,  # loop.spec knobs reach the task
    }
    assert task.policy is not None and len(task.policy.rules) == 1
    assert step.join == "any"
    assert step.loop == tree.Loop(
        items=step.loop.items,  # type: ignore[union-attr]
        iterator="n",
        mode="parallel",
        max_in_flight=3,
        failure_mode="best_effort",
    )
    assert _py(step.spec) == {
        "timeout": {"read": 20},
        "policy": {"failure": {"mode": "best_effort"}},
    }


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("loop:\n      spec: {policy: {failure: {mode: best_effort}}}", "best_effort"),
        ("step", "best_effort"),
        ("executor", "best_effort"),
        ("none", "fail_fast"),
    ],
)
def test_loop_failure_mode_layers(where: str, expected: str) -> None:
    loop_spec = "{policy: {failure: {mode: best_effort}}}" if where.startswith("loop") else "{}"
    step_spec = "\n    spec: {policy: {failure: {mode: best_effort}}}" if where == "step" else ""
    executor = (
        "executor: {spec: {policy: {failure: {mode: best_effort}}}}\n"
        if where == "executor"
        else ""
    )
    pb = _tree(
        f"{executor}workflow:\n  - step: start{step_spec}\n"
        f"    loop: {{in: [1], iterator: x, spec: {loop_spec}}}\n    tool: {{kind: noop}}\n"
    )
    assert _step(pb, "start").loop.failure_mode == expected  # type: ignore[union-attr]


# --------------------------------------------------------------------------- dialect aliases


DIALECT = """\
workflow:
  - step: start
    input: {city: Paris}
    set: {ctx.started: true, plain: 1}
    tool:
      - name: fetch
        kind: http
        url: "http://task-level"
        spec:
          method: GET
          url: "http://spec-level"
          params: {page: 1}
          timeout: 5
          policy:
            rules:
              - when: "{{ output.status == 'error' }}"
                then: {do: retry, backoff: fixed, jitter: true}
              - else:
                  do: continue
                  set: {iter.page: 2, ctx.total: 3, bare: 4}
        set: {last: "{{ output }}", ctx.keep: 1}
      - name: second
        kind: noop
        spec:
          policy:
            rules:
              - else:
                then: {do: break}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: end
          when: true
          set: {ctx.done: true}
  - step: end
    tool: {kind: noop}
"""


def test_corpus_dialect_aliases() -> None:
    pb = _tree(DIALECT)
    start = _step(pb, "start")
    fetch, second = start.tasks
    # tool fields under spec are tool arguments; the task-level one wins
    assert _py(fetch.args) == {
        "url": "http://task-level",
        "method": "GET",
        "params": {"page": 1},
        "input": {"city": "Paris"},  # step-level input: the first task's input
    }
    assert _py(fetch.spec) == {"timeout": 5}
    # task-level set: unprefixed keys are pipeline-local (iter); `output` is the task's result
    assert (_py(fetch.set_iter), _py(fetch.set_ctx)) == (
        {"last": "{{ outcome.result }}"},
        {"keep": 1},
    )
    retry, otherwise = fetch.policy.rules  # type: ignore[union-attr]
    assert retry.action == tree.Action("retry", attempts=3, backoff="none", jitter=0.1)
    assert otherwise.when is None  # `else:` without `then:`
    assert _py(otherwise.action.set_iter) == {"page": 2}
    assert _py(otherwise.action.set_ctx) == {"total": 3, "bare": 4}
    # `- else:` followed by `then:` one level too far left
    [brk] = second.policy.rules  # type: ignore[union-attr]
    assert (brk.when, brk.action.do) == (None, "break")
    assert _py(start.set_ctx) == {"started": True, "plain": 1}
    [arc] = start.next.arcs  # type: ignore[union-attr]
    assert (arc.when, _py(arc.set_ctx)) == (tree.Guard("true"), {"done": True})


def test_step_input_merges_over_the_task_input() -> None:
    # The corpus (v10 loop_test) writes `input: {}` on the tool and the real input on the
    # step: the step's keys are merged over the task's.
    pb = _tree(
        "workflow:\n  - step: start\n    input: {a: 1, b: 3}\n"
        "    tool: {kind: python, input: {b: 2, c: 4}, code: x}\n"
    )
    assert _py(_step(pb, "start").tasks[0].args) == {"input": {"b": 3, "c": 4, "a": 1}, "code": "x"}


@pytest.mark.parametrize(
    ("where", "write"),
    [("step", "set: {iter.x: 1}"), ("step", "set: {workload.x: 1}"), ("arc", "iter.x: 1")],
)
def test_unwritable_scopes(where: str, write: str) -> None:
    if where == "step":
        body = f"workflow:\n  - step: start\n    tool: {{kind: noop}}\n    {write}\n"
    else:
        body = (
            "workflow:\n  - step: start\n    tool: {kind: noop}\n"
            f"    next: [{{step: start, set: {{{write}}}}}]\n"
        )
    _, diags = _normalize(body)
    assert [d.code for d in diags] == ["NOE214"]


# --------------------------------------------------------------------------- policies


def test_retry_defaults_and_bounds() -> None:
    pb, diags = _normalize(
        """\
workflow:
  - step: start
    tool:
      kind: noop
      spec:
        policy:
          rules:
            - when: a
              then: {do: retry, attempts: 0}
            - when: b
              then: {do: retry, attempts: 4, backoff: linear, delay: 0.5, max_delay: 3, jitter: 0.2}
            - when: c
"""
    )
    assert [(d.code, d.span.line) for d in diags if d.span] == [("NOE213", 12), ("NOE215", 15)]
    first, second = _step(pb, "start").tasks[0].policy.rules  # type: ignore[union-attr]
    assert first.action.attempts == 3  # the bad bound is reported; the default stands in
    assert second.action == tree.Action(
        "retry", attempts=4, backoff="linear", delay=0.5, max_delay=3.0, jitter=0.2
    )


@pytest.mark.parametrize(
    ("then", "delay"),
    [
        ("{do: retry}", 0.0),  # no backoff: NoETL does not wait
        ("{do: retry, backoff: none}", 0.0),
        ("{do: retry, backoff: linear}", 1.0),  # NoETL's default delay, 1 s
        ("{do: retry, backoff: exponential}", 1.0),
        ("{do: retry, backoff: exponential, delay: 0.25}", 0.25),  # written: kept
    ],
)
def test_a_retry_without_a_delay_takes_noetls_default(then: str, delay: float) -> None:
    pb = _tree(
        "workflow:\n  - step: start\n    tool: {kind: noop, spec: {policy: "
        f"{{rules: [{{when: x, then: {then}}}]}}}}}}\n"
    )
    (rule,) = _step(pb, "start").tasks[0].policy.rules  # type: ignore[union-attr]
    assert rule.action.delay == delay


def test_on_unmatched() -> None:
    pb = _tree(
        "workflow:\n  - step: start\n    tool: {kind: noop, spec: {policy: "
        "{on_unmatched: continue, rules: [{when: x, then: {do: fail}}]}}}\n"
    )
    assert _step(pb, "start").tasks[0].policy.on_unmatched == "continue"  # type: ignore[union-attr]


def test_admission_rules() -> None:
    pb = _tree(
        """\
workflow:
  - step: start
    spec:
      policy:
        admit:
          rules:
            - when: "{{ workload.go }}"
              then: {allow: true}
            - else:
                then: {allow: false}
    tool: {kind: noop}
"""
    )
    admit = _step(pb, "start").admit
    assert admit is not None
    assert [(r.when, r.allow) for r in admit.rules] == [
        (tree.Guard("{{ workload.go }}"), True),
        (None, False),
    ]


# --------------------------------------------------------------------------- steps


def test_listener_join_and_entry() -> None:
    pb = _tree(
        """\
executor: {spec: {entry_step: begin}}
workflow:
  - step: begin
    eval_mode: on_event
    spec: {timeout: 30, join: all}
    tool: {kind: noop}
"""
    )
    step = _step(pb, "begin")
    assert pb.entry == "begin"
    assert step.listener == tree.Listener(timeout=30.0)
    assert step.join == "all"


def test_entry_is_start_else_first_step_with_a_warning() -> None:
    assert _tree("workflow:\n  - step: a\n    tool: {kind: noop}\n    next: start\n"
                 "  - step: start\n    tool: {kind: noop}\n").entry == "start"  # fmt: skip
    pb, diags = _normalize("workflow:\n  - step: a\n    tool: {kind: noop}\n")
    assert pb.entry == "a" and [d.code for d in diags] == ["NOE209"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("workflow: []\n", "NOE210"),
        ("workflow:\n  - step: start\n", "NOE206"),
        ("workflow:\n  - step: start\n    tool: [{name: a}]\n", "NOE206"),
        ("workflow:\n  - step: start\n    tool: {kind: noop}\n    loop: {in: [1]}\n", "NOE204"),
        (
            "workflow:\n  - step: start\n    tool: {kind: noop}\n    loop: {in: items, iterator: x}\n",
            "NOE204",
        ),
        (
            "workflow:\n  - step: start\n    tool: {kind: noop}\n    loop: {in: 5, iterator: x}\n",
            "NOE204",
        ),
        (
            "workflow:\n  - step: start\n    tool: {kind: noop}\n"
            "    loop: {in: [1], iterator: x, spec: {mode: cursor}}\n",
            "NOE212",
        ),
        (
            "workflow:\n  - step: start\n    tool: {kind: noop}\n"
            "    loop: {in: [1], iterator: x, spec: {max_in_flight: 0}}\n",
            "NOE212",
        ),
    ],
)
def test_structural_problems(body: str, code: str) -> None:
    unit = compile_source(HEAD + body, "t.yaml", until="normalize")
    assert code in [d.code for d in unit.reporter.diagnostics]


def test_workbook_entries() -> None:
    pb = _tree(
        """\
workbook:
  - name: wrapped
    tool: {kind: python, code: "result = 1"}
  - {name: flat, kind: noop}
workflow:
  - step: start
    tool: {kind: workbook, name: wrapped}
"""
    )
    assert [(t.name, t.kind) for t in pb.workbook] == [("wrapped", "python"), ("flat", "noop")]
    [call] = _step(pb, "start").tasks
    assert (call.name, _py(call.args)) == ("start_task", {"name": "wrapped"})


def test_metadata_and_root_legacy_names() -> None:
    pb = _tree("workflow:\n  - step: start\n    tool: {kind: noop}\n")
    assert pb.metadata.name == "t"
    unit = compile_source(
        "name: old\npath: a/b\nworkflow:\n  - step: start\n    tool: {kind: noop}\n",
        "old.yaml",
        until="normalize",
    )
    assert unit.playbook is not None
    assert (unit.playbook.metadata.name, unit.playbook.metadata.path) == ("old", "a/b")


def test_legacy_constructs_reaching_normalize_are_skipped_not_crashed_on() -> None:
    """Without `desugar` in front, legacy keys are left alone (never guessed at)."""
    text = HEAD + (
        "workflow:\n  - step: start\n    when: x\n    retry: {max_attempts: 3}\n"
        "    vars: {a: 1}\n    sink: {kind: noop}\n"
        "    case: [{when: x, then: {next: [{step: start}]}}]\n"
        "    loop: {collection: [1], element: x}\n    tool: {kind: noop}\n"
    )
    unit = CompilationUnit(file="t.yaml", source=text)
    load.run(unit)
    normalize.run(unit)
    assert unit.playbook is not None
    assert [t.name for t in unit.playbook.workflow[0].tasks] == ["start_task"]


def test_normalize_reads_the_canonical_document_when_there_is_one() -> None:
    unit = CompilationUnit(file="t.yaml", source=HEAD + "workflow: []\n")
    load.run(unit)
    canonical = CompilationUnit(
        file="c.yaml", source=HEAD + "workflow:\n  - step: start\n    tool: {kind: noop}\n"
    )
    load.run(canonical)
    unit.canonical = canonical.document
    normalize.run(unit)
    assert unit.playbook is not None and [s.name for s in unit.playbook.workflow] == ["start"]
