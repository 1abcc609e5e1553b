"""Differential soundness: generated playbooks, the control VM as the oracle, lint's verdicts.

`generate(seed)` writes a random playbook — unstructured step graphs with exclusive and
inclusive routing, explicit and inferred AND-joins, back arcs (cycles whose exit reads a ctx
counter, or only workload: loop-invariant), handled failures, retries and jumps in pipelines,
loops over a list — whose guards read a few boolean and small-integer workload inputs.
`oracle(case)` enumerates every combination of those inputs (failure injection is an input
too: a step's python task raises when its `fail_<step>` input is true), runs the control VM in memory on
each with a step budget, and classifies every run: completed, deadlock (NOE854: a join waits
with no live producer), livelock (the step budget), failed (an unhandled failure: fine).
`compare(case, runs, report)` says where lint and the runs disagree:

* a false error: an error-severity soundness finding when every run completes or fails;
* a missed deadlock / livelock: a run shows one and lint has no finding at that step;
* a missed never-reached step: no run reaches it and lint says nothing about it.

`python -m noetlc.bench.differential [--count N] [--seed S] [--spin N]` prints the totals by
rule and the precision figures of docs/lint.md (`--spin N`: SPIN on the first N seeds too).
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import yaml

STEP_BUDGET = 60  # step runs per execution: a run that needs more is a livelock
BOOLS = ("b0", "b1")
INTS = {"n": (0, 1, 2)}
WORKLOAD_GUARDS = (
    "{{ workload.b0 }}",
    "{{ not workload.b1 }}",
    "{{ workload.n == 1 }}",
    "{{ workload.n > 0 }}",
    "{{ workload.b0 and workload.n < 2 }}",
    "{{ workload.b1 or workload.n == 2 }}",
)
SOUNDNESS = ("NOE504", "NOE505", "NOE506")
LIVELOCK_RULES = ("NOE503", "NOE505", "NOE506", "NOE510")
Finding = tuple[str, str, str]  # code, severity, the step it is reported at


@dataclass
class Case:
    seed: int
    text: str
    inputs: dict[str, tuple[Any, ...]]  # workload key -> its finite domain


@dataclass
class Run:
    inputs: dict[str, Any]
    status: str  # completed | failed | deadlock | livelock
    step: str | None  # where: the join (deadlock), a step of the cycle (livelock)
    ran: frozenset[str]
    stuck: frozenset[str] = frozenset()  # a deadlock: every join left waiting


@dataclass
class Verdict:
    false_errors: list[tuple[str, str]] = field(default_factory=list)  # (code, step)
    missed: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # kind, step, in
    # never-reached steps lint cannot see without ctx values (it abstracts ctx guards to
    # "either way", docs/lint.md): counted apart, not misses of what lint claims to find
    beyond_abstraction: list[str] = field(default_factory=list)
    confirmed: list[tuple[str, str]] = field(default_factory=list)  # (code, step)
    refuted: list[tuple[str, str]] = field(default_factory=list)  # (code, step)


# --------------------------------------------------------------------------- the generator


def generate(seed: int) -> Case:
    rng = random.Random(seed)
    count = rng.randint(3, 9)
    names = ["start", *(f"s{i}" for i in range(1, count))]
    steps: dict[str, dict[str, Any]] = {n: {"step": n, "tool": {"kind": "noop"}} for n in names}
    inputs: dict[str, tuple[Any, ...]] = {b: (False, True) for b in BOOLS} | dict(INTS)
    for i, name in enumerate(names):
        step = steps[name]
        later = names[i + 1 :]
        if not later or (i > 0 and rng.random() < 0.15):
            continue  # a final step
        width = min(len(later), rng.choice((1, 1, 2, 2, 3)))
        targets = sorted(rng.sample(later, width), key=names.index)
        arcs: list[dict[str, Any]] = []
        for t in targets:
            arc: dict[str, Any] = {"step": t}
            if rng.random() < 0.5:
                arc["when"] = rng.choice(WORKLOAD_GUARDS)
            arcs.append(arc)
        if i > 0 and rng.random() < 0.25:  # a back arc: a cycle
            head = rng.choice(names[: i + 1])
            if rng.random() < 0.6:
                counter = f"c{i}"
                # no initial value: `start` may be the cycle's head, and a `set` there would
                # reset the count each turn (a livelock only ctx values show)
                back = {
                    "step": head,
                    "when": f"{{{{ (ctx.{counter} or 0) < 2 }}}}",
                    "set": {f"ctx.{counter}": f"{{{{ (ctx.{counter} or 0) + 1 }}}}"},
                }
            else:
                back = {"step": head, "when": rng.choice(WORKLOAD_GUARDS)}  # loop-invariant
            arcs.insert(rng.randint(0, len(arcs)), back)
        mode = rng.choice(("exclusive", "inclusive")) if len(arcs) > 1 else "exclusive"
        if rng.random() < 0.2 and later:  # a handled failure
            flag = f"fail_{name}"
            inputs[flag] = (False, True)
            step["tool"] = _failing_tool(flag, rng)
            handler = rng.choice(later)
            for arc in arcs:
                arc["when"] = _and_done(arc.get("when"))
            arcs.append({"step": handler, "when": "{{ event.name == 'step.failed' }}"})
        elif rng.random() < 0.1:
            step["tool"] = _jumping_tool(rng)
        step["next"] = {"spec": {"mode": mode}, "arcs": arcs} if len(arcs) > 1 else {"arcs": arcs}
        if rng.random() < 0.1:
            step["loop"] = {"in": "{{ [1, 2] }}", "iterator": "x", "spec": {"mode": "sequential"}}
    preds = Counter(
        a["step"] for s in steps.values() for a in (s.get("next") or {}).get("arcs", [])
    )
    for name, n in preds.items():
        if n >= 2 and name != "start" and rng.random() < 0.4:
            steps[name].setdefault("spec", {})["join"] = rng.choice(("all", "all", "any"))
    doc = {
        "apiVersion": "noetl.io/v2",
        "kind": "Playbook",
        "metadata": {"name": f"diff{seed}", "path": f"differential/{seed}"},
        "workload": {k: v[0] for k, v in inputs.items()},
        "executor": {"spec": {"budgets": {"step_runs": STEP_BUDGET}}},
        "workflow": list(steps.values()),
    }
    return Case(seed, yaml.safe_dump(doc, sort_keys=False, width=200), inputs)


def _and_done(when: str | None) -> str:
    if when is None:
        return "{{ event.name == 'step.done' }}"
    return "{{ event.name == 'step.done' and (" + when[3:-3].strip() + ") }}"


def _failing_tool(flag: str, rng: random.Random) -> dict[str, Any]:
    """A task that fails when its input says so; sometimes retried first (the retry is
    exhausted: the failure is the input's, every attempt)."""
    tool: dict[str, Any] = {
        "kind": "python",
        "input": {"fail": f"{{{{ workload.{flag} }}}}"},
        "code": "if fail:\n    raise ValueError('injected failure')\nresult = 1\n",
    }
    if rng.random() < 0.5:
        tool["spec"] = {
            "policy": {
                "rules": [
                    {
                        "when": "{{ outcome.status == 'error' }}",
                        "then": {"do": "retry", "attempts": 2, "delay": 0},
                    },
                    {"else": {"then": {"do": "continue"}}},
                ]
            }
        }
    return tool


def _jumping_tool(rng: random.Random) -> list[dict[str, Any]]:
    """A pipeline whose second task jumps back to the first a bounded number of times."""
    turns = rng.randint(1, 2)
    return [
        {"name": "first", "kind": "noop"},
        {
            "name": "second",
            "kind": "noop",
            "spec": {
                "policy": {
                    "rules": [
                        {
                            "when": f"{{{{ (iter.turns or 0) < {turns} }}}}",
                            "then": {
                                "do": "jump",
                                "to": "first",
                                "set": {"iter.turns": "{{ (iter.turns or 0) + 1 }}"},
                            },
                        },
                        {"else": {"then": {"do": "continue"}}},
                    ]
                }
            },
        },
    ]


# --------------------------------------------------------------------------- the oracle


def assignments(inputs: dict[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    keys = sorted(inputs)
    return [
        dict(zip(keys, values, strict=True))
        for values in itertools.product(*(inputs[k] for k in keys))
    ]


def oracle(case: Case, payload: dict[str, Any] | None = None) -> list[Run]:
    """Every run of the playbook over the inputs' domains, classified."""
    from noetlc.compiler.pipeline import compile_source
    from noetlc.runtime.embedded import run_embedded
    from noetlc.runtime.event_store import MemoryStore

    if payload is None:
        unit = compile_source(case.text, f"diff{case.seed}.yaml")
        if unit.reporter.has_errors:
            raise ValueError(f"generated playbook {case.seed} does not compile")
        payload = unit.payload
    assert payload is not None
    runs: list[Run] = []
    for values in assignments(case.inputs):
        summary = run_embedded(payload, values, MemoryStore(), execution_id="1")
        ran = frozenset(n for n, s in summary["steps"].items() if s.get("runs"))
        error = summary.get("error") or {}
        status = summary["status"]
        step = error.get("step")
        if status == "failed" and error.get("code") == "NOE854":
            status = "deadlock"
        elif status == "failed" and "budget" in str(error.get("message", "")).lower():
            status = "livelock"
            step = _most_run(summary)
        elif status != "completed":
            status = "failed"
        stuck = (
            frozenset(error.get("joins") or ([step] if step else []))
            if status == "deadlock"
            else frozenset()
        )
        runs.append(Run(values, status, step, ran, stuck))
    return runs


def _most_run(summary: dict[str, Any]) -> str | None:
    counts = {n: s.get("runs", 0) for n, s in summary["steps"].items()}
    return max(counts, key=lambda n: counts[n]) if counts else None


# --------------------------------------------------------------------------- comparison


def compare(
    steps: list[str],
    runs: list[Run],
    findings: list[Finding],
    cycles: dict[str, set[str]],
    needs_ctx: frozenset[str] = frozenset(),
) -> Verdict:
    """Lint's findings against the runs. `cycles` maps a step to the steps of its cycle (a
    livelock is reported at some step of the cycle it turns in)."""
    verdict = Verdict()
    found: dict[str, set[str]] = {}
    for code, _, step in findings:
        found.setdefault(code, set()).add(step)
    # the VM names one join when several wait: each of them is a deadlock a finding may name
    deadlocks = set().union(*(r.stuck for r in runs if r.status == "deadlock"))
    livelocks = {r.step for r in runs if r.status == "livelock"}
    ran = set().union(*(r.ran for r in runs)) if runs else set()
    for r in runs:
        if r.status == "deadlock" and not r.stuck & found.get("NOE504", set()):
            verdict.missed.append(("deadlock", str(r.step), r.inputs))
        if r.status == "livelock":
            cycle = cycles.get(str(r.step), {str(r.step)})
            # a cycle that never ends: no exit (NOE505), tokens that pile up each turn (NOE506),
            # a jump or retry cycle (NOE510, NOE503)
            reported = set().union(*(found.get(c, set()) for c in LIVELOCK_RULES))
            if not (reported & cycle):
                verdict.missed.append(("livelock", str(r.step), r.inputs))
    for step in steps:
        if step not in ran and not any(
            step in found.get(code, set()) for code in ("NOE501", "NOE511", "NOE504")
        ):
            if step in needs_ctx:
                verdict.beyond_abstraction.append(step)
            else:
                verdict.missed.append(("never-reached", step, {}))
    for code, where in sorted(found.items()):
        for step in sorted(where):
            if code == "NOE504":
                good = step in deadlocks
            elif code in ("NOE505", "NOE510"):
                good = any(step in cycles.get(str(s), {str(s)}) for s in livelocks)
            elif code in ("NOE501", "NOE511"):
                good = step not in ran
            else:
                continue
            (verdict.confirmed if good else verdict.refuted).append((code, step))
    errors = [(c, s) for c, sev, s in findings if sev == "error" and c in SOUNDNESS]
    if errors and all(r.status in ("completed", "failed") for r in runs):
        verdict.false_errors.extend(errors)
    return verdict


def lint_case(
    text: str, file: str
) -> tuple[list[Finding], dict[str, Any], list[str], dict[str, set[str]], frozenset[str]]:
    """Lint a generated playbook; each finding is tagged with the step it is reported at (the
    step whose name or arcs its line falls in), and each step with its cycle's steps. The last
    item: the steps only arcs whose guards read ctx lead to (`needs_ctx`)."""
    from noetlc.analysis.graphs import cyclic_components
    from noetlc.analysis.lint import context_of, lint_unit
    from noetlc.compiler.pipeline import compile_source

    unit = compile_source(text, file, until="net")
    report = lint_unit(unit)
    assert unit.playbook is not None
    workflow = unit.playbook.workflow
    starts = sorted((s.span.line, s.name) for s in workflow)
    findings: list[Finding] = []
    for d in report.diagnostics:
        line = d.span.line if d.span is not None else 0
        owner = [name for first, name in starts if first <= line]
        findings.append((d.code, str(d.severity), owner[-1] if owner else "?"))
    succ = {s.name: [a.step for a in s.next.arcs] if s.next else [] for s in workflow}
    cycles: dict[str, set[str]] = {}
    for component in cyclic_components(succ):
        for member in component:
            cycles[member] = set(component)
    full = compile_source(text, file)
    assert full.payload is not None
    ctx = context_of(unit)
    names = [s.name for s in workflow]
    return findings, full.payload, names, cycles, _needs_ctx(ctx, names)


def _needs_ctx(ctx: Any, steps: list[str]) -> frozenset[str]:
    """Steps that only arcs reading ctx (their guard, or an earlier exclusive arc's) lead to:
    whether they run depends on ctx values, which lint does not track."""
    from noetlc.analysis import scenarios

    if ctx is None:
        return frozenset()
    pool = ctx.pool.entries
    cases = scenarios.scenarios(ctx) if scenarios.fixed_guards(ctx) else None
    seen: set[str] = set()
    for fixed in [case.values for case in cases] if cases else [{}]:

        def passes(t: Any, fixed: dict[int, bool] = fixed) -> bool:
            if t.guard.expr is not None and fixed.get(t.guard.expr) is False:
                return False
            if any(fixed.get(n) is True for n in ctx.negations(t)):
                return False
            parts = [t.guard.expr, *ctx.negations(t)]
            return not any(i is not None and "ctx" in pool[i].names for i in parts)

        mine = {ctx.net.entry_step}  # per scenario: another one's arcs do not apply here
        todo = [ctx.net.entry_step]
        while todo:
            for target, t in ctx.step_graph.get(todo.pop(), ()):
                if target not in mine and passes(t):
                    mine.add(target)
                    todo.append(target)
        seen |= mine
    return frozenset(s for s in steps if s not in seen)


# --------------------------------------------------------------------------- the whole run


@dataclass
class Totals:
    playbooks: int = 0
    runs: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    false_errors: Counter[str] = field(default_factory=Counter)
    missed: Counter[str] = field(default_factory=Counter)
    confirmed: Counter[str] = field(default_factory=Counter)
    refuted: Counter[str] = field(default_factory=Counter)
    beyond_abstraction: int = 0  # never-reached steps only ctx values decide (not misses)
    examples: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0


def differential(seeds: range, keep: int = 5) -> Totals:
    totals = Totals()
    start = time.perf_counter()
    for seed in seeds:
        case = generate(seed)
        findings, payload, steps, cycles, needs_ctx = lint_case(case.text, f"diff{seed}.yaml")
        runs = oracle(case, payload)
        v = compare(steps, runs, findings, cycles, needs_ctx)
        totals.playbooks += 1
        totals.runs += len(runs)
        totals.statuses.update(r.status for r in runs)
        totals.false_errors.update(c for c, _ in v.false_errors)
        totals.missed.update(k for k, _, _ in v.missed)
        totals.confirmed.update(c for c, _ in v.confirmed)
        totals.refuted.update(c for c, _ in v.refuted)
        totals.beyond_abstraction += len(v.beyond_abstraction)
        if (v.false_errors or v.missed) and len(totals.examples) < keep:
            missed = sorted({(k, s) for k, s, _ in v.missed})
            totals.examples.append((seed, f"false errors {v.false_errors}, missed {missed}"))
    totals.seconds = time.perf_counter() - start
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m noetlc.bench.differential")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--spin", type=int, default=0, metavar="N", help="also check the first N seeds with SPIN"
    )
    args = parser.parse_args(argv)
    if args.spin:
        import tempfile

        with tempfile.TemporaryDirectory() as workdir:
            spin = spin_differential(range(args.seed, args.seed + args.spin), workdir)
        print(
            f"SPIN: playbooks {spin.playbooks}, states {spin.states:,}, agreed by rule "
            f"{dict(spin.agreed)}, disagreements {dict(spin.disagreements) or 0}"
        )
        for seed, text in spin.examples:
            print(f"seed {seed}: {text}")
    t = differential(range(args.seed, args.seed + args.count))
    print(f"playbooks {t.playbooks}, runs {t.runs} ({dict(t.statuses)}), {t.seconds:.1f} s")
    print(f"false errors by rule: {dict(t.false_errors) or 0}")
    print(f"missed by kind: {dict(t.missed) or 0}")
    print(f"never-reached steps only ctx values decide (not counted): {t.beyond_abstraction}")
    print("| rule | findings | confirmed by the VM | refuted |")
    print("|---|---:|---:|---:|")
    for code in sorted(set(t.confirmed) | set(t.refuted)):
        n = t.confirmed[code] + t.refuted[code]
        print(f"| {code} | {n} | {t.confirmed[code]} | {t.refuted[code]} |")
    for seed, text in t.examples:
        print(f"seed {seed}: {text}")
    return 0


# --------------------------------------------------------------------------- SPIN as a second oracle


@dataclass
class SpinVerdict:
    deadlocks: set[str]  # joins an execution of the abstract model leaves waiting
    unreached: set[str]  # steps no execution of the abstract model runs
    states: int


def spin_check(pml: str, workdir: str) -> SpinVerdict:
    """Verify an exported model with SPIN (`spin -a`, cc, `pan -c0 -e`): every assertion
    violation (a live token left at a join's branch place) and every unreached step."""
    import re
    import subprocess
    from pathlib import Path

    folder = Path(workdir)
    (folder / "model.pml").write_text(pml)
    subprocess.run(["spin", "-a", "model.pml"], cwd=folder, check=True, capture_output=True)
    subprocess.run(
        ["cc", "-O1", "-DSAFETY", "-DVECTORSZ=4096", "-o", "pan", "pan.c"],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        ["./pan", "-c0", "-e", "-m200000"], cwd=folder, capture_output=True, text=True
    ).stdout
    places = {
        int(m.group(1)): m.group(2) for m in re.finditer(r"#define P_\d+ (\d+) /\* (\S+) \*/", pml)
    }
    deadlocks = set()
    for m in re.finditer(r"assertion violated .*?m\[(\d+)\]==0", out):
        place = places[int(m.group(1)) // 2 * 2]
        deadlocks.add(place.split(".from.")[0])
    lines = pml.splitlines()
    ran_at: dict[int, str] = {}
    for i, line in enumerate(lines, 1):
        found = re.search(r'printf\("ran (\S+)\\n"\)', line)
        if found:
            ran_at[i] = found.group(1)
    missed_lines = {
        int(m.group(1)) for m in re.finditer(r"model\.pml:(\d+), state \d+, \"printf", out)
    }
    steps = set(ran_at.values())
    reached = {s for i, s in ran_at.items() if i not in missed_lines}
    stored = re.search(r"(\d+) states, stored", out)
    return SpinVerdict(deadlocks, steps - reached, int(stored.group(1)) if stored else 0)


@dataclass
class SpinTotals:
    playbooks: int = 0
    states: int = 0
    disagreements: Counter[str] = field(default_factory=Counter)
    agreed: Counter[str] = field(default_factory=Counter)
    examples: list[tuple[int, str]] = field(default_factory=list)


def spin_differential(seeds: range, workdir: str) -> SpinTotals:
    """SPIN's verdicts on the exported abstract model against lint's abstract check (every
    guard either way, no scenarios): the joins that can deadlock (NOE504) and the steps that
    never run (NOE511/NOE501)."""
    from noetlc.analysis import promela, soundness
    from noetlc.analysis.lint import context_of
    from noetlc.compiler.pipeline import compile_source

    totals = SpinTotals()
    for seed in seeds:
        unit = compile_source(generate(seed).text, f"diff{seed}.yaml", until="net")
        ctx = context_of(unit)
        assert ctx is not None
        ours = soundness.check(ctx)
        spin = spin_check(promela.export(ctx), workdir)
        totals.playbooks += 1
        totals.states += spin.states
        lint_dead = {f.step for f in ours.findings if f.kind == "deadlock"}
        lint_never = set(ctx.steps) - ours.ran
        for rule, a, b in (
            ("NOE504", lint_dead, spin.deadlocks),
            ("NOE511", lint_never, spin.unreached),
        ):
            if a == b:
                totals.agreed[rule] += 1
            else:
                totals.disagreements[rule] += 1
                if len(totals.examples) < 5:
                    totals.examples.append((seed, f"{rule}: lint {sorted(a)}, SPIN {sorted(b)}"))
    return totals


if __name__ == "__main__":
    sys.exit(main())
