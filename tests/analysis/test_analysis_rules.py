"""Every lint rule: its failing example (the diagnostics case file) reports it, its passing
example does not; the finer points of dead arcs and jump cycles."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetlc.analysis.lint import lint_source
from noetlc.analysis.registry import RULES, checks
from noetlc.diagnostics.codes import registry

HERE = Path(__file__).parent
CASES = HERE.parent / "diagnostics" / "cases"
PASSING = HERE / "passing"
FROM_FILES = [r.code for r in checks() if r.code != "NOE509"]  # NOE509: test_analysis_cli


def _codes(text: str) -> list[str]:
    return [d.code for d in lint_source(text, "case.yaml").diagnostics]


def _one(folder: Path, code: str) -> Path:
    found = sorted(folder.glob(f"{code}_*.yaml"))
    assert len(found) == 1, f"{folder.name} needs exactly one {code}_*.yaml"
    return found[0]


@pytest.mark.parametrize("code", FROM_FILES)
def test_failing_example_reports_the_rule(code: str) -> None:
    assert code in _codes(_one(CASES, code).read_text(encoding="utf-8"))


@pytest.mark.parametrize("code", FROM_FILES)
def test_passing_example_is_clean(code: str) -> None:
    codes = _codes(_one(PASSING, code).read_text(encoding="utf-8"))
    assert codes == [], codes


def test_rules_are_registered_codes_with_examples() -> None:
    table = registry()
    for rule in RULES:
        if rule.code.endswith("xx"):
            assert rule.reported_by == "tools"  # a range owned by the tools pass
            continue
        info = table[rule.code]
        assert info.name == rule.name and "Example" in info.explain
        if rule.module is not None:
            assert callable(rule.entry())
        else:
            assert rule.reported_by


HEAD = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\n"
HEAD += "workload: {x: 1, again: true}\nworkflow:\n"


def _arcs(arcs: str, *, mode: str = "exclusive", loop: bool = False) -> str:
    loop_text = '    loop: {in: "{{ workload.x }}", iterator: i}\n' if loop else ""
    return (
        HEAD
        + "  - step: start\n"
        + loop_text
        + "    tool: {kind: noop}\n"
        + f"    next:\n      spec: {{mode: {mode}}}\n      arcs:\n"
        + arcs
        + "  - step: a\n    tool: {kind: noop}\n  - step: b\n    tool: {kind: noop}\n"
    )


@pytest.mark.parametrize(
    ("arcs", "dead"),
    [
        ('        - {step: a, when: "{{ 1 > 2 }}"}\n        - {step: b}\n', True),
        ('        - {step: a, when: "false"}\n        - {step: b}\n', True),
        ('        - {step: a, when: "{{ workload.x > 2 }}"}\n        - {step: b}\n', False),
        (  # the same condition twice: the second copy is shadowed
            '        - {step: a, when: "{{ workload.x }}"}\n'
            '        - {step: b, when: "{{ workload.x }}"}\n',
            True,
        ),
        (  # always true on step.done: shadows the next success arc
            "        - {step: a, when: \"{{ event.name == 'step.done' }}\"}\n"
            '        - {step: b, when: "{{ workload.x }}"}\n',
            True,
        ),
        (  # a failure arc after an unconditional success arc is fine
            "        - {step: a}\n        - {step: b, when: \"{{ event.name == 'step.failed' }}\"}\n",
            False,
        ),
        (  # the corpus's aliases: call.done is the success event
            "        - {step: a, when: \"{{ event.name == 'call.done' and workload.x }}\"}\n"
            "        - {step: b}\n",
            False,
        ),
        (  # ... so it shadows an unconditional arc after it
            "        - {step: a, when: \"{{ event.name == 'call.done' }}\"}\n        - {step: b}\n",
            True,
        ),
        (
            "        - {step: a, when: \"{{ event.name in ['step.done', 'loop.done'] }}\"}\n"
            "        - {step: b, when: \"{{ event.name == 'call.error' }}\"}\n",
            False,
        ),
        (  # mixed text is a non-empty string: always true
            '        - {step: a, when: "{{ workload.x }} == 2"}\n        - {step: b}\n',
            True,
        ),
    ],
)
def test_dead_arcs_understand_guards(arcs: str, dead: bool) -> None:
    assert ("NOE502" in _codes(_arcs(arcs))) is dead


def test_dead_arcs_know_the_events_a_step_emits() -> None:
    failed = "        - {step: b, when: \"{{ event.name == 'step.failed' }}\"}\n"
    loop_done = "        - {step: a, when: \"{{ event.name == 'loop.done' }}\"}\n" + failed
    assert "NOE502" in _codes(_arcs(loop_done))
    assert "NOE502" not in _codes(_arcs(loop_done, loop=True))
    step_done = "        - {step: a, when: \"{{ event.name == 'step.done' }}\"}\n" + failed
    assert "NOE502" in _codes(_arcs(step_done, loop=True))


def test_inclusive_arcs_are_not_shadowed() -> None:
    both = '        - {step: a}\n        - {step: b, when: "{{ workload.x }}"}\n'
    assert "NOE502" in _codes(_arcs(both))
    assert "NOE502" not in _codes(_arcs(both, mode="inclusive"))


def _pipeline(rules_a: str, rules_b: str = "") -> str:
    text = HEAD + "  - step: start\n    tool:\n"
    for name, rules in (("a", rules_a), ("b", rules_b)):
        text += f"      - name: {name}\n        kind: noop\n"
        if rules:
            text += "        spec:\n          policy:\n            rules:\n" + rules
    return text


@pytest.mark.parametrize(
    ("a", "b", "reported"),
    [
        ("", "              - else: {then: {do: jump, to: a}}\n", True),
        (
            "",
            '              - when: "{{ iter.more }}"\n                then: {do: jump, to: a}\n',
            False,
        ),
        (
            "",
            '              - when: "{{ iter.more }}"\n                then: {do: jump, to: a}\n'
            "              - else: {then: {do: break}}\n",
            False,
        ),
        (
            "              - else: {then: {do: jump, to: b}}\n",
            "              - else: {then: {do: jump, to: a}}\n",
            True,
        ),
        (
            "              - when: \"{{ outcome.status == 'error' }}\"\n"
            "                then: {do: retry, attempts: 3}\n"
            "              - else: {then: {do: jump, to: a}}\n",
            "",
            False,
        ),
        ('              - when: "{{ true }}"\n                then: {do: jump, to: a}\n', "", True),
    ],
)
def test_jump_cycles(a: str, b: str, reported: bool) -> None:
    assert ("NOE503" in _codes(_pipeline(a, b))) is reported
