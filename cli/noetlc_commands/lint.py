"""Static analysis: soundness, reachability, dead arcs and the other lint rules.

    noetlc lint FILE|DIR... [--format text|json|sarif] [--severity error|warning]
                            [--budget-states N] [--baseline FILE]

Prints everything `check` reports plus the lint findings (NOE5xx), with a counterexample path
for every soundness violation (`trace` in JSON, `codeFlows` in SARIF). Exit status: 1 when a
finding at or above `--severity` (default: error) exists, 0 otherwise, 2 for usage errors.
`noetlc explain` lists the rules (NOE5xx); `noetlc explain NOE501` explains one.
`--baseline FILE` (the output of an earlier `noetlc lint --format json`) reports only findings
that are not in it: same file, code and message (lines may move).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from noetlc import __version__
from noetlc.analysis.context import DEFAULT_BUDGET
from noetlc.analysis.lint import lint_file
from noetlc.cli.common import UsageError
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
    p.add_argument(
        "--baseline",
        metavar="FILE",
        help="report only findings not in FILE (an earlier `noetlc lint --format json`)",
    )


Fingerprint = tuple[str, str, str]  # file, code, message: stable when lines move


def load_baseline(path: str) -> Counter[Fingerprint]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        entries = data["diagnostics"]
        return Counter((str(d["file"]), str(d["code"]), str(d["message"])) for d in entries)
    except OSError as exc:
        raise UsageError(
            "NOE800",
            f"cannot read the baseline {path}: {exc.strerror or exc}",
            "write one with: noetlc lint PATHS --format json > " + path,
        ) from None
    except (ValueError, KeyError, TypeError):
        raise UsageError(
            "NOE800",
            f"the baseline {path} is not the output of `noetlc lint --format json`",
            "write one with: noetlc lint PATHS --format json > " + path,
        ) from None


def new_findings(diagnostics: list[Diagnostic], known: Counter[Fingerprint]) -> list[Diagnostic]:
    """The findings the baseline does not have; each baseline entry excuses one finding."""
    left = Counter(known)
    out: list[Diagnostic] = []
    for d in diagnostics:
        key = (d.span.file if d.span else "None", d.code, d.message)
        if left[key] > 0:
            left[key] -= 1
        else:
            out.append(d)
    return out


def run(args: argparse.Namespace) -> int:
    known = load_baseline(args.baseline) if args.baseline else None
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
    if known is not None:
        diagnostics = new_findings(diagnostics, known)
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
