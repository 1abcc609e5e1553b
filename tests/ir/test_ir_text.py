"""The net's text form: dump/parse round trips, and hand-broken IR text is rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetlc.compiler.pipeline import compile_file
from noetlc.ir.net import decision_guards, dump, negations, verify
from noetlc.ir.net_text import NetSyntaxError, parse
from tests.conftest import CONFORMANCE_CASES

CONFORMANCE = CONFORMANCE_CASES

SMALL = """\
net tiny entry start
  place execution.sink sink
  place execution.failure failure
  place start.entry entry step=start
  place start.running running step=start
  place start.done done step=start
  place start.failed failed step=start
  trans start.start start in(start.entry) out(start.running)
  trans start.complete complete in(start.running) out(start.done) on(step.done)
  trans start.fail fail in(start.running) out(start.failed) on(step.failed)
  trans start.end end in(start.done) out(execution.sink) on(step.done)
  trans start.unhandled unhandled in(start.failed) out(execution.failure) on(step.failed)
"""


@pytest.mark.parametrize("path", CONFORMANCE, ids=lambda p: p.stem)
def test_dump_parse_round_trip(path: Path) -> None:
    net = compile_file(path).net
    assert parse(dump(net)) == net


def test_a_hand_written_net_verifies() -> None:
    assert verify(parse(SMALL)) == []


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (
            lambda t: t.replace("out(start.done) on(step.done)", "out(start.gone) on(step.done)"),
            "unknown place start.gone",
        ),
        (
            lambda t: t.replace(
                "  trans start.end end in(start.done) out(execution.sink) on(step.done)\n", ""
            ),
            "start.done has no consumer",
        ),
        (
            lambda t: t.replace("entry start", "entry begin", 1),
            "entry place begin.entry is missing",
        ),
        (
            lambda t: t + "  trans start.start start in(start.entry) out(start.running)\n",
            "duplicate transition start.start",
        ),
        (
            lambda t: t + "  trans r route in(start.done) out(execution.sink)\n",
            "has no target step",
        ),
        (
            lambda t: (
                t + "  place s slots step=start capacity=0\n  trans q iter_start in(s) out(s)\n"
            ),
            "needs a capacity",
        ),
        (
            lambda t: t.replace(
                "on(step.done)\n  trans start.unhandled",
                "on(step.done) guard(!earlier(2))\n  trans start.unhandled",
            ),
            "negates 2 earlier guards; the decision at its input place has fewer",
        ),
        (
            lambda t: t + "  decision start.done guards(e1)\n  decision start.done guards(e2)\n",
            "duplicate decision start.done",
        ),
        (lambda t: t + "  decision nowhere guards(e1)\n", "decision at unknown place nowhere"),
    ],
)
def test_verifier_rejects_hand_broken_text(edit: object, problem: str) -> None:
    problems = verify(parse(edit(SMALL)))  # type: ignore[operator]
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    "text",
    ["", "net x", "net x entry y\n  place p nonsense", "net x entry y\n  trans t route in(a"],
)
def test_malformed_text_is_a_syntax_error(text: str) -> None:
    with pytest.raises(NetSyntaxError):
        parse(text)


def test_a_decision_and_its_ranked_negations_round_trip() -> None:
    text = (
        SMALL.replace(
            "on(step.done)\n  trans start.unhandled",
            "on(step.done) guard(e3 & !e4 & !earlier(2))\n  trans start.unhandled",
        )
        + "  decision start.done guards(e1, e2)\n"
    )
    net = parse(text)
    assert verify(net) == []
    [end] = [t for t in net.transitions if t.kind == "end"]
    assert (end.guard.expr, end.guard.negated, end.guard.earlier) == (3, (4,), 2)
    assert negations(end, decision_guards(net)) == (1, 2, 4)
    assert dump(net) == text
