"""Static analysis: soundness, reachability, dead arcs and the other lint rules.

    noetlc lint FILE|DIR... [--format text|json|sarif] [--severity error|warning]
                            [--budget-states N]

Prints everything `check` reports plus the lint findings (NOE5xx), with a counterexample path
for every soundness violation (`trace` in JSON, `codeFlows` in SARIF). Exit status: 1 when a
finding at or above `--severity` (default: error) exists, 0 otherwise, 2 for usage errors.
`noetlc explain` lists the rules (NOE5xx); `noetlc explain NOE501` explains one.
"""

from __future__ import annotations

import argparse
import sys

from noetlc import __version__
from noetlc.analysis.context import DEFAULT_BUDGET
from noetlc.analysis.lint import lint_file
from noetlc.cli.noetlc_commands.check import FORMATS, add_exclude, expand_paths, print_selection
from noetlc.cli.noetlc_commands.resources import named_files, select
from noetlc.diagnostics.report import Diagnostic, render_json, render_sarif, render_text
from noetlc.diagnostics.severity import Severity


def _budget(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("the state budget must be at least 1")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="playbook files or directories")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format")
    add_exclude(p)
    p.add_argument(
        "--severity",
        choices=("error", "warning"),
        default="error",
        help="exit 1 when a finding at or above this severity exists (default: error)",
    )
    p.add_argument(
        "--budget-states",
        type=_budget,
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"states the soundness search may explore per playbook (default {DEFAULT_BUDGET})",
    )


def run(args: argparse.Namespace) -> int:
    chosen = select(expand_paths(args.files, args.exclude), named_files(args.files))
    files = chosen.playbooks
    diagnostics: list[Diagnostic] = []
    sources: dict[str, str] = {}
    stats: list[dict[str, object]] = []
    reports = []
    for f in files:
        report = lint_file(f, args.budget_states)
        reports.append(report)
        sources[report.file] = report.source
        diagnostics.extend(report.diagnostics)
        if report.soundness is not None:
            s = report.soundness
            stats.append(
                {
                    "file": report.file,
                    "states": s.states,
                    "structural": s.structural,
                    "complete": s.complete,
                    "steps_left": s.nodes,
                    "seconds": round(s.seconds, 6),
                }
            )
    states = sum(s.soundness.states for s in reports if s.soundness is not None)
    if args.format == "json":
        print(
            render_json(
                diagnostics,
                files=len(files),
                states=states,
                soundness=stats,
                skipped=chosen.to_json(),
            )
        )
    elif args.format == "sarif":
        print(render_sarif(diagnostics, __version__))
    else:
        if diagnostics:
            print(render_text(diagnostics, sources))
            sys.stdout.flush()
        print_selection(chosen, diagnostics)
        counts = {sev: sum(d.severity is sev for d in diagnostics) for sev in Severity}
        structural = sum(bool(s["structural"]) for s in stats)
        print(
            f"{len(files)} file(s) linted: {counts[Severity.ERROR]} error(s), "
            f"{counts[Severity.WARNING]} warning(s), {counts[Severity.NOTE]} note(s); "
            f"soundness: {structural} of {len(stats)} decided structurally, "
            f"{states} state(s) explored",
            file=sys.stderr,
        )
    threshold = Severity(args.severity).rank
    return 1 if any(d.severity.rank >= threshold for d in diagnostics) else 0
