"""Soundness: the required catches with their counterexamples, generated workflows whose verdict
is known by construction, agreement of the reduced and the plain search, the corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetlc.analysis import model, structure
from noetlc.analysis.lint import context_of, lint_file, lint_source
from noetlc.analysis.soundness import SoundnessResult, check
from noetlc.bench.generators import structured, wide_fanout
from noetlc.compiler.pipeline import compile_source
from tests.conftest import CONFORMANCE_CASES, NOETL_CORPUS, NOETL_FILES, needs_noetl, noetl_params

CASES = Path(__file__).parent.parent / "diagnostics" / "cases"


def _findings(name: str) -> list[tuple[str, int, list[tuple[str | None, int | None]]]]:
    report = lint_file(CASES / name)
    return [
        (d.code, d.span.line if d.span else 0, [(t.step, t.span.line if t.span else None)
                                                for t in d.trace])
        for d in report.diagnostics
    ]  # fmt: skip


def test_a_branch_arriving_twice_deadlocks_with_a_path() -> None:
    [(code, line, trace)] = [f for f in _findings("NOE504_join_deadlock.yaml") if f[0] == "NOE504"]
    assert (code, line) == ("NOE504", 24)
    assert ("start", 13) in trace and trace.count(("b", 22)) == 2  # b -> join, twice


def test_loop_without_exit_is_caught_with_the_cycle() -> None:
    [(code, line, trace)] = _findings("NOE505_no_option_to_complete.yaml")
    assert (code, line) == ("NOE505", 9)
    assert [s for s, _ in trace].count("poll") >= 2  # into the step, then around the cycle


def test_loop_done_on_a_step_without_a_loop_is_caught() -> None:
    [(code, line, _)] = _findings("NOE502_dead_arc.yaml")
    assert (code, line) == ("NOE502", 11)


def _verdict(source: str, **kwargs: bool) -> set[str]:
    ctx = context_of(compile_source(source, until="net"))
    assert ctx is not None
    return {f.kind for f in check(ctx, **kwargs).findings}


SEEDS = range(25)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_sound_workflows_are_sound(seed: int) -> None:
    report = lint_source(structured(40, seed))
    # nested exclusive choices test the same input (`workload.choice == 0` inside the branch
    # taken when it holds): their else branches never run, which NOE511 rightly says
    assert [d.code for d in report.diagnostics if d.code != "NOE511"] == []


@pytest.mark.parametrize(
    ("defect", "code"), [("deadlock", "NOE504"), ("no_exit", "NOE505"), ("loop_done", "NOE502")]
)
@pytest.mark.parametrize("seed", SEEDS)
def test_generated_defects_are_found(defect: str, code: str, seed: int) -> None:
    source = structured(40, seed, defect)
    if source == structured(40, seed):
        pytest.skip("this workflow has no block of the kind the defect needs")
    assert code in {d.code for d in lint_source(source).diagnostics}


@pytest.mark.parametrize("defect", [None, "deadlock", "no_exit"])
@pytest.mark.parametrize("seed", range(12))
def test_reduction_and_partial_order_keep_the_verdict(defect: str | None, seed: int) -> None:
    source = structured(14, seed, defect, width=2)
    full = _verdict(source, por=False, reduce=False)
    assert _verdict(source, por=True, reduce=False) == full
    assert _verdict(source, por=True, reduce=True) == full


def test_stubborn_sets_avoid_the_interleavings_of_a_wide_fork() -> None:
    ctx = context_of(compile_source(wide_fanout(8), until="net"))
    assert ctx is not None
    plain = check(ctx, por=False, reduce=False)
    reduced = check(ctx, por=True, reduce=False)
    structural = check(ctx)
    assert plain.complete and not plain.findings and not reduced.findings
    assert plain.states >= 2**8  # every subset of finished branches is a state
    assert reduced.states < 8 * 8  # linear in the branches
    assert structural.structural and structural.states == 0


def test_budget_makes_the_verdict_partial() -> None:
    ctx = context_of(compile_source(wide_fanout(6), until="net"), budget=10)
    assert ctx is not None
    result = check(ctx, por=False, reduce=False)
    assert not result.complete and result.states <= 10 + 2**6


@pytest.mark.parametrize("path", CONFORMANCE_CASES, ids=lambda p: p.stem)
def test_no_lint_finding_on_the_conformance_cases(path: Path) -> None:
    report = lint_file(path)
    assert report.soundness is not None and report.soundness.complete
    assert [d.code for d in report.diagnostics if d.code.startswith("NOE5")] == []


@pytest.mark.parametrize("path", noetl_params(NOETL_FILES), ids=lambda p: p.stem)
def test_the_noetl_corpus_lints_without_internal_errors(path: Path) -> None:
    report = lint_file(path)
    assert all(d.code != "NOE900" for d in report.diagnostics)


@needs_noetl
def test_corpus_findings_include_the_text_conditions() -> None:
    path = NOETL_CORPUS / "v2case__automation__examples__conditional_flow.yaml"
    found = {(d.code, d.span.line) for d in lint_file(path).diagnostics if d.span}
    assert ("NOE502", 23) in found and ("NOE501", 38) in found


# Seeds 1, 3, 4 and 5 have loops whose back arc leaves a fork-join block. The control VM
# (vm/tables.py `_count_alternatives`) and the model find the back arcs on the graph that goes
# on through joins; when they did not, the loop's entry was a merge counting dead arrivals
# from one activation to the next, and the search grew past the budget at 600 steps.
@pytest.mark.parametrize("seed", range(8))
def test_structured_workflows_need_a_search_linear_in_their_size(seed: int) -> None:
    """Loops around fork-join blocks, nested blocks: the reduction leaves the merges that
    count, and the search of the reduced system stays within a few states per step
    (regressions: the merges were looked at after every rewrite, quadratic; with a merge
    left the search ran on the whole system: minutes at 1,000 steps)."""
    # counts, never times: a small budget keeps a failure quick
    ctx = context_of(compile_source(structured(600, seed, max_depth=64), until="net"), budget=4_000)
    assert ctx is not None
    result = check(ctx)
    steps = len(ctx.steps)
    assert not result.findings
    assert result.merge_checks <= 4 * steps
    assert result.complete and result.states <= 2 * steps


@pytest.mark.parametrize("seed", range(4))
def test_merges_are_looked_at_a_bounded_number_of_times(seed: int) -> None:
    """Regression: `_fold_merges` looked at every merge after every rewrite (10,000 steps
    did not finish in 15 minutes); now only the merges whose producers changed."""
    ctx = context_of(compile_source(structured(400, seed, max_depth=64), until="net"))
    assert ctx is not None
    system = model.build(ctx)
    nodes = len(system.outcomes)
    reduction = structure.reduce(system)
    assert 0 < reduction.merge_checks <= 4 * nodes


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("defect", [None, "deadlock", "no_exit"])
def test_the_reduced_search_keeps_the_verdict_of_the_whole_system(
    defect: str | None, seed: int
) -> None:
    """The search runs on the reduced system even when merges still count: every outcome
    says whether its dead tokens arrive before its live ones (`model.Outcome.early`)."""
    ctx = context_of(compile_source(structured(30, seed, defect, max_depth=64), until="net"))
    assert ctx is not None

    def kinds(result: SoundnessResult) -> set[tuple[str, str]]:
        return {(f.kind, f.step if f.kind == "deadlock" else "") for f in result.findings}

    assert kinds(check(ctx)) == kinds(check(ctx, reduce=False))


def test_a_merge_folded_while_a_dead_token_could_still_reach_it_uncounted() -> None:
    """Regression: a merge was folded when the steps whose dead token reaches it could not
    get one yet; one did later (through a merge dying), passed the merge uncounted, and the
    dead tokens of a cycle doubled each turn (a false NOE506 and a search past any budget)."""
    ctx = context_of(compile_source(structured(120, 1, max_depth=64), until="net"), budget=3_000)
    assert ctx is not None
    result = check(ctx)
    assert result.complete and not result.findings
    assert result.max_tokens < 50


def test_the_scenarios_share_one_state_budget() -> None:
    """A lint explores at most `--budget-states` states in all: the scenarios of the
    workload guards get what the abstract check left, and NOE509 says when it ran out."""
    report = lint_source(structured(600, 1, max_depth=64), budget=100)  # it needs about 280
    assert report.soundness is not None
    assert not report.soundness.complete
    assert report.soundness.states <= 100 + 64  # (a state's successors are all stored)
    assert "NOE509" in {d.code for d in report.diagnostics}


def test_a_join_whose_dead_output_returns_to_it_is_left_to_the_search() -> None:
    """Regression: the join's dead token went round a cycle back to its own branches, and the
    reduction resolved the join again forever (seed 7 with a deadlock ran for minutes)."""
    ctx = context_of(compile_source(structured(40, 7, "deadlock"), until="net"), budget=20_000)
    assert ctx is not None
    result = check(ctx)
    assert result.complete
    assert [f.kind for f in result.findings] == ["deadlock"]


def test_a_loop_closing_through_a_join_is_no_merge() -> None:
    """Regression: the back arc of a loop whose body ends in a fork-join was missed (the walk
    stopped at join branch places), so the loop head counted dead arrivals as a merge of two;
    a dead token into the loop then waited there and the join after it never fired. The
    control VM had it too (tests/vm/playbooks/loop_through_join.yaml): both now complete."""
    path = Path(__file__).parents[1] / "vm" / "playbooks" / "loop_through_join.yaml"
    report = lint_file(path)
    assert report.soundness is not None and report.soundness.complete
    assert [d.code for d in report.diagnostics if d.code.startswith("NOE5")] == []


@pytest.mark.parametrize("seed", range(6))
def test_a_scenario_specialises_the_template_as_a_build_would(seed: int) -> None:
    """The scenarios share one build (`model.specialise` redoes only the steps that read a
    fixed guard): the token system is the one `model.build` makes for the scenario."""
    from noetlc.analysis import scenarios
    from noetlc.bench.differential import generate

    for source in (structured(80, seed, max_depth=64), generate(seed).text):
        ctx = context_of(compile_source(source, until="net"))
        assert ctx is not None
        template = model.build(ctx)
        for case in scenarios.scenarios(ctx) or []:
            built = model.build(ctx, case.values)
            made = model.specialise(ctx, template, case.values)
            assert _keys(made) == _keys(built) and made.places == built.places
            assert sorted(made.approximate) == sorted(built.approximate)


def _keys(system: model.System) -> dict[int, list[model.OutcomeKey]]:
    return {n: [o.key() for o in os] for n, os in system.outcomes.items()}
