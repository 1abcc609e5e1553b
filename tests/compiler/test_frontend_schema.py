"""The `schema` pass and `noetlc schema`: positions, messages, rejected keys, accepted dialects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from noetlc.cli import noetlc_main as cli
from noetlc.cli.noetlc_commands.schema import json_schema
from noetlc.compiler.pipeline import compile_source
from noetlc.diagnostics.report import Diagnostic
from tests.conftest import CONFORMANCE_CASES, NOETL_FILES

HEAD = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\n"


def _schema(body: str) -> list[Diagnostic]:
    unit = compile_source(HEAD + body, "t.yaml", until="schema")
    return unit.reporter.sorted()


def _where(diags: list[Diagnostic]) -> list[tuple[str, int, int]]:
    return [(d.code, d.span.line, d.span.column) for d in diags if d.span is not None]


def test_unknown_key_points_at_the_key_with_a_suggestion() -> None:
    [d] = _schema("workflow:\n  - step: start\n    tool: {kind: noop}\n    nxt: end\n")
    assert (d.code, d.span and (d.span.line, d.span.column, d.span.end_column)) == (
        "NOE101",
        (7, 5, 8),
    )
    assert d.hint == "did you mean `next`?"
    assert "`workflow[0]`" in d.message


def test_suggestions_follow_union_members() -> None:
    # `else:` is `ElseBranch | Then`; `tool:` is `Task | list[Task]`: the suggestion must come
    # from the member the value was validated against.
    body = """\
workflow:
  - step: start
    tool:
      - name: a
        kind: noop
        spec:
          policy:
            rules:
              - else:
                  then: {do: continue, sett_ctx: {x: 1}}
"""
    [d] = _schema(body)
    assert d.code == "NOE101" and d.hint == "did you mean `set_ctx`?"
    assert d.span is not None and (d.span.line, d.span.column) == (13, 40)


def test_every_error_of_the_pass_is_reported_together() -> None:
    body = """\
workload: [1, 2]
workflow:
  - step: start
    tool: {kind: noop}
    loop: {in: [1], iterator: 3, spec: {mode: paralel}}
    next: {spec: {mode: both}, arcs: [{step: b, whenn: x}]}
"""
    assert _where(_schema(body)) == [
        ("NOE103", 4, 11),
        ("NOE103", 8, 31),
        ("NOE104", 8, 47),
        ("NOE104", 9, 25),
        ("NOE101", 9, 49),
    ]


@pytest.mark.parametrize(
    ("fragment", "message"),
    [
        # (`tool: python`, a kind name with the arguments on the step, is an older form:
        # NOE105 with the hint to run `noetlc migrate`; tests/desugar/test_migrate_legacy.py)
        ("tool: 5", "`workflow[0].tool` must be a mapping or a list, not an integer"),
        (
            "tool: {kind: noop}\n    next: 5",
            "must be a string, a list or a mapping, not an integer",
        ),
        ("tool: {kind: noop}\n    when: [1]", "`workflow[0].when` must be a string or a boolean"),
    ],
)
def test_a_value_no_union_member_takes_gets_one_message(fragment: str, message: str) -> None:
    diags = _schema(f"workflow:\n  - step: start\n    {fragment}\n")
    assert [d.code for d in diags] == ["NOE103"]
    assert message in diags[0].message


def test_invalid_choice_lists_the_choices() -> None:
    body = "workflow:\n  - step: start\n    tool: {kind: noop, spec: {policy: {rules: [{else: {then: {do: retri}}}]}}}\n"
    [d] = _schema(body)
    assert d.code == "NOE104"
    assert d.hint == "expected 'continue', 'retry', 'jump', 'break' or 'fail'"


def test_missing_keys() -> None:
    diags = _schema("workflow:\n  - tool: {kind: noop}\n    next: {spec: {mode: exclusive}}\n")
    assert sorted(d.message for d in diags) == [
        "`workflow[0].next` is missing the required key `arcs`",
        "`workflow[0]` is missing the required key `step`",
    ]
    no_workflow = compile_source(HEAD, "t.yaml", until="schema").reporter.diagnostics
    assert [d.code for d in no_workflow] == ["NOE102"]


REJECTED = [
    ("vars: {a: 1}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n", (4, 1), "workload"),
    ("workflow:\n  - step: start\n    type: python\n    tool: {kind: noop}\n", (6, 5), "tool"),
    (
        "workflow:\n  - step: start\n    eval: [{expr: x}]\n    tool: {kind: noop}\n",
        (6, 5),
        "rules",
    ),
    (
        "workflow:\n  - step: start\n    tool: {kind: noop, eval: [{expr: x}]}\n",
        (6, 24),
        "spec.policy",
    ),
    (
        "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: [{step: b, then: x}]\n",
        (7, 22),
        "arc",
    ),
    (
        "workflow:\n  - step: start\n    tool: {kind: noop}\n"
        "    next: {arcs: [{step: b, else: x}]}\n",
        (7, 29),
        "arc",
    ),
    (
        "workflow:\n  - step: start\n    tool: {kind: noop}\n"
        "    case: [{when: x, then: [{pipe: [a]}]}]\n",
        (7, 30),
        "ordered `tool:` list",
    ),
]


@pytest.mark.parametrize(("body", "position", "hint_word"), REJECTED)
def test_rejected_legacy_keys(body: str, position: tuple[int, int], hint_word: str) -> None:
    diags = _schema(body)
    assert [d.code for d in diags] == ["NOE105"]  # and not NOE101 as well
    d = diags[0]
    assert d.span is not None and (d.span.line, d.span.column) == position
    assert d.hint is not None and hint_word in d.hint


def test_legacy_keywords_inside_data_are_data() -> None:
    body = """\
workflow:
  - step: start
    tool:
      kind: python
      input: {expr: 1, pipe: 2, eval: 3}
      code: "result = 1"
    set: {ctx.expr: 1}
"""
    assert _schema(body) == []


CANONICAL_AND_DIALECT = """\
keychain:
  - {name: pg, kind: postgres_credential}
executor:
  profile: local
  spec: {entry_step: start, final_step: end, policy: {results: {reference_first: true}}}
workload: {items: [1, 2]}
workbook:
  - name: wb
    tool: {kind: python, code: "result = 1"}
  - {name: wb2, kind: noop}
workflow:
  - step: start
    desc: dialect
    spec:
      join: any
      policy:
        admit: {mode: exclusive, rules: [{when: true, then: {allow: true}}, {else: {then: {allow: false}}}]}
        failure: {mode: best_effort}
    loop: {in: "{{ workload.items }}", iterator: item, spec: {mode: parallel, max_in_flight: 2}}
    input: {a: 1}
    set: {ctx.x: 1}
    tool:
      - name: t
        kind: http
        spec:
          method: GET
          endpoint: "http://x"
          params: {p: 1}
          timeout: {connect: 1}
          policy:
            on_unmatched: continue
            rules:
              - when: "{{ output.status == 'error' }}"
                then: {do: retry, attempts: 3, backoff: fixed, delay: 1, jitter: true}
              - else: {do: continue, set: {iter.page: 2, ctx.n: 1}}
        set: {last: "{{ output }}"}
      - {name: j, kind: noop, spec: {policy: {rules: [{when: "x", then: {do: jump, to: t}}]}}}
    next:
      spec: {mode: inclusive}
      arcs:
        - {step: end, when: "{{ event.name == 'call.done' }}", set: {ctx.y: 2}, args: {a: 1}}
  - step: wait
    eval_mode: on_event
    spec: {timeout: 30}
    tool: {kind: noop}
    next: [end, {step: end, when: true}]
  - step: end
    tool: {kind: workbook, name: wb}
"""

LEGACY = """\
name: legacy
path: legacy/path
workflow:
  - step: start
    when: "{{ workload.go }}"
    vars: {a: "{{ result }}"}
    retry: {max_attempts: 3, backoff: exponential}
    sink: {kind: postgres, table: t}
    loop: {collection: [1, 2], element: item, mode: async}
    case_mode: inclusive
    next_policy: end_step
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {next: [{step: end}], set: {x: 1}}
    tool:
      - fetch: {kind: http, url: x}
  - step: end
    tool: {kind: noop}
"""


@pytest.mark.parametrize("body", [CANONICAL_AND_DIALECT, LEGACY], ids=["dialect", "legacy"])
def test_canonical_dialect_and_legacy_forms_are_accepted(body: str) -> None:
    assert _schema(body) == []


# --------------------------------------------------------------------------- the JSON Schema


def _corpus() -> list[Path]:
    """The conformance cases, and the NoETL corpus when it is present."""
    return [p for p in CONFORMANCE_CASES + NOETL_FILES if not p.name.startswith("noetl_e2e")]


def test_noetlc_schema_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    assert cli.main(["schema", "-o", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == json_schema()
    # the documented editor set-up: missing folders are created
    assert cli.main(["schema", "-o", str(tmp_path / ".vscode" / "noetl.schema.json")]) == 0
    assert json.loads((tmp_path / ".vscode" / "noetl.schema.json").read_text()) == json_schema()
    (tmp_path / "file").write_text("x")
    assert cli.main(["schema", "-o", str(tmp_path / "file" / "x.json")]) == 2  # unwritable


def test_exported_schema_agrees_with_the_corpus() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    for path in _corpus():
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        errors = [e.message for e in validator.iter_errors(data)]
        if path.name.startswith("v2case__pagination__pipeline"):
            assert errors == ["Additional properties are not allowed ('vars' was unexpected)"]
        else:
            assert errors == [], path.name
    typo = yaml.safe_load(HEAD + "workflow:\n  - step: start\n    nxt: end\n")
    assert any("nxt" in e.message for e in validator.iter_errors(typo))
