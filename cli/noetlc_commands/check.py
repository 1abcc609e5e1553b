"""Validate playbooks: load, check the schema, desugar, resolve names, check templates and tools.

`--stats` also builds the net and prints static budgets (tokens in flight, events per
execution, worst-case retry wait, fan-out), each a bound or "unbounded" with the reason.

Exit status: 0 when no file has errors, 1 when any has, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from noetlc import __version__
from noetlc.cli.common import UsageError

if TYPE_CHECKING:
    from noetlc.analysis.static_budgets import Budgets
    from noetlc.cli.noetlc_commands.resources import Selection
    from noetlc.compiler.unit import CompilationUnit
    from noetlc.diagnostics.report import Diagnostic

FORMATS = ("text", "json", "sarif")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="playbook files or directories")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format")
    add_exclude(p)
    p.add_argument("--until", metavar="PASS", default=None, help="stop after this pass (debugging)")
    p.add_argument(
        "--stats",
        action="store_true",
        help="print static budgets: tokens in flight, events, retry time, fan-out",
    )
    add_no_cache(p)


def add_exclude(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="leave out files whose path (below the folder given), name or a folder matches "
        "GLOB (repeatable)",
    )


def add_no_cache(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the compile cache (also NOETLC_NO_CACHE=1)",
    )


def expand_paths(paths: list[str], exclude: list[str] | None = None) -> list[str]:
    """Directories expand to the *.yaml / *.yml files below them (sorted, expectations
    skipped); a file named twice (directly and through its folder) counts once; files an
    `--exclude` glob matches are left out. No file at all is a usage error (`UsageError`,
    exit 2): a wrong path must not pass as "0 checked"."""
    from noetlc.cli.noetlc_commands.resources import excluded

    patterns = exclude or []
    out: list[str] = []
    seen: set[Path] = set()

    def add(path: str) -> None:
        key = Path(path).resolve()
        if key not in seen:
            seen.add(key)
            out.append(path)

    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file())
            for f in found:
                if not f.name.endswith(".expect.yaml") and not excluded(f, p, patterns):
                    add(str(f))
        elif not excluded(p, p.parent, patterns):
            add(raw)
    if not out:
        raise UsageError(
            "NOE800",
            f"no playbook (*.yaml, *.yml) in {', '.join(paths)}",
            "check the path: a folder is searched for YAML files below it",
        )
    return out


def run(args: argparse.Namespace) -> int:
    if args.until is not None and args.until not in _pass_names():
        print(
            f"noetlc check: error[NOE800]: unknown pass {args.until!r} for --until; "
            f"passes are: {', '.join(_pass_names())}",
            file=sys.stderr,
        )
        return 2
    from noetlc.cli.noetlc_commands.resources import named_files, select

    chosen = select(expand_paths(args.files, args.exclude), named_files(args.files))
    files = chosen.playbooks
    diagnostics: list[Diagnostic] = []
    sources: dict[str, str] = {}
    stats: dict[str, dict[str, object]] = {}
    texts: list[str] = []
    cached = args.until is None and not args.stats and cache_enabled(args)
    for f in files:
        if cached:
            found = _check_cached(f)
            if found is not None:
                sources[f], diags = found
                diagnostics.extend(diags)
                continue
        from noetlc.compiler.pipeline import compile_file

        until = "net" if args.stats and args.until is None else args.until or _check_until()
        unit = compile_file(f, until=until)
        sources[unit.file] = unit.source
        diagnostics.extend(unit.reporter.sorted())
        if cached:
            _check_store(unit)
        if args.stats:
            budgets = _budgets(unit)
            if budgets is not None:
                stats[unit.file] = budgets.to_json()
                texts.append(f"{unit.file}:\n" + "\n".join(f"  {b}" for b in budgets.lines()))
    # the renderers are imported when used: a clean text check (a compile-cache hit) needs
    # none, nor the diagnostics' dataclasses
    if args.format == "json":
        from noetlc.diagnostics.report import render_json

        extra: dict[str, object] = {"stats": stats} if args.stats else {}
        print(render_json(diagnostics, files=len(files), skipped=chosen.to_json(), **extra))
    elif args.format == "sarif":
        from noetlc.diagnostics.report import render_sarif

        print(render_sarif(diagnostics, __version__))
    else:
        if diagnostics:
            from noetlc.diagnostics.report import render_text

            print(render_text(diagnostics, sources))
        for text in texts:
            print(text)
        if diagnostics or texts:
            sys.stdout.flush()  # the summary (stderr) comes after the diagnostics
        counts = Counter(d.severity.value for d in diagnostics)
        print_selection(chosen, diagnostics)
        print(
            f"{len(files)} file(s) checked: {counts['error']} error(s), "
            f"{counts['warning']} warning(s), {counts['note']} note(s)",
            file=sys.stderr,
        )
    return 1 if any(d.is_error for d in diagnostics) else 0


def print_selection(chosen: Selection, diagnostics: list[Diagnostic]) -> None:
    """The notes for skipped resources and, for a repository (a skipped file or more than one
    file), one summary line per kind (stderr, before the totals)."""
    from collections import Counter

    for note in chosen.notes():
        print(note, file=sys.stderr)
    if chosen.skipped or len(chosen.playbooks) > 1:
        by_file = Counter(d.span.file for d in diagnostics if d.is_error and d.span is not None)
        for line in chosen.summary(by_file):
            print(line, file=sys.stderr)


def cache_enabled(args: argparse.Namespace) -> bool:
    from noetlc.cli import compile_cache

    return compile_cache.enabled(bool(getattr(args, "no_cache", False)))


def _check_cached(file: str) -> tuple[str, list[Diagnostic]] | None:
    """The source and diagnostics of `check FILE` from the compile cache, or None."""
    from noetlc.cli import compile_cache

    read = compile_cache.read_source(file)
    if read is None:
        return None
    entry = compile_cache.load(compile_cache.key("check", file, read[0]))
    return None if entry is None else (read[1], entry.diagnostics)


def _check_store(unit: CompilationUnit) -> None:
    from noetlc.cli import compile_cache
    from noetlc.stdlib_tools.kinds import plugins_loaded

    if unit.reporter.has_errors or plugins_loaded():
        return
    read = compile_cache.read_source(unit.file)
    if read is None or read[1] != unit.source:  # changed while it was compiled
        return
    entry_key = compile_cache.key("check", unit.file, read[0])
    compile_cache.store(entry_key, unit.reporter.sorted())


def _budgets(unit: CompilationUnit) -> Budgets | None:
    from noetlc.analysis.lint import context_of
    from noetlc.analysis.static_budgets import compute

    ctx = context_of(unit)
    return compute(ctx) if ctx is not None else None


def _pass_names() -> list[str]:
    from noetlc.compiler.pipeline import pass_names

    return list(pass_names())


def _check_until() -> str | None:
    """`check` runs the front end: everything before the net is built."""
    from noetlc.compiler.pipeline import pass_names

    names = pass_names()
    for stop in ("expressions", "tools", "resolve", "normalize"):
        if stop in names:
            return stop
    return names[-1]
