"""Validate playbooks: load, check the schema, desugar, resolve names, check templates and tools.

Exit status: 0 when no file has errors, 1 when any has, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from noetlc import __version__
from noetlc.compiler.diagnostics import Diagnostic, render_json, render_sarif, render_text
from noetlc.compiler.pipeline import compile_file

FORMATS = ("text", "json", "sarif")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="playbook files or directories")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format")
    p.add_argument("--until", metavar="PASS", default=None, help="stop after this pass (debugging)")


def expand_paths(paths: list[str]) -> list[str]:
    """Directories expand to the *.yaml / *.yml files below them (sorted, expectations skipped)."""
    out: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file())
            out.extend(str(f) for f in found if not f.name.endswith(".expect.yaml"))
        else:
            out.append(raw)
    return out


def run(args: argparse.Namespace) -> int:
    from noetlc.compiler.pipeline import pass_names

    if args.until is not None and args.until not in pass_names():
        print(
            f"noetlc check: error[NOE800]: unknown pass {args.until!r} for --until; "
            f"passes are: {', '.join(pass_names())}",
            file=sys.stderr,
        )
        return 2
    files = expand_paths(args.files)
    diagnostics: list[Diagnostic] = []
    sources: dict[str, str] = {}
    for f in files:
        unit = compile_file(f, until=args.until or _check_until())
        sources[unit.file] = unit.source
        diagnostics.extend(unit.reporter.sorted())
    if args.format == "json":
        print(render_json(diagnostics, files=len(files)))
    elif args.format == "sarif":
        print(render_sarif(diagnostics, __version__))
    else:
        if diagnostics:
            print(render_text(diagnostics, sources))
            sys.stdout.flush()  # the summary (stderr) comes after the diagnostics
        errors = sum(d.is_error for d in diagnostics)
        warnings = len(diagnostics) - errors
        print(
            f"{len(files)} file(s) checked: {errors} error(s), {warnings} warning(s)",
            file=sys.stderr,
        )
    return 1 if any(d.is_error for d in diagnostics) else 0


def _check_until() -> str | None:
    """`check` runs the front end: everything before the net is built."""
    from noetlc.compiler.pipeline import pass_names

    names = pass_names()
    for stop in ("expressions", "tools", "resolve", "normalize"):
        if stop in names:
            return stop
    return names[-1]
