"""The lint driver: compile to the net, build the context, run every rule in order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from noetlc.analysis import soundness
from noetlc.analysis.context import DEFAULT_BUDGET, LintContext
from noetlc.analysis.registry import checks
from noetlc.analysis.soundness import SoundnessResult
from noetlc.compiler.pipeline import compile_file, compile_source, gc_paused
from noetlc.compiler.unit import CompilationUnit
from noetlc.diagnostics.errors import InternalCompilerError
from noetlc.diagnostics.report import Diagnostic


@dataclass
class LintReport:
    file: str
    source: str
    diagnostics: list[Diagnostic]
    soundness: SoundnessResult | None  # None when the front end stopped before the net


def context_of(unit: CompilationUnit, budget: int = DEFAULT_BUDGET) -> LintContext | None:
    if unit.playbook is None or unit.net is None or unit.pool is None:
        return None
    return LintContext(unit, unit.playbook, unit.net, unit.pool, budget_states=budget)


def lint_unit(unit: CompilationUnit, budget: int = DEFAULT_BUDGET) -> LintReport:
    diagnostics = list(unit.reporter.diagnostics)
    ctx = context_of(unit, budget)
    result = None
    if ctx is not None:
        with gc_paused():  # the analysis allocates much and frees little: no cyclic GC passes
            _run_rules(ctx)
        diagnostics.extend(ctx.findings)
        result = soundness.shared(ctx)
    diagnostics.sort(key=Diagnostic.sort_key)
    return LintReport(unit.file, unit.source, diagnostics, result)


def _run_rules(ctx: LintContext) -> None:
    for rule in checks():
        try:
            rule.entry()(ctx)
        except InternalCompilerError:
            raise
        except RecursionError as exc:
            raise InternalCompilerError(f"recursion too deep in lint rule {rule.name}") from exc
        except Exception as exc:
            raise InternalCompilerError(
                f"lint rule {rule.name}: {type(exc).__name__}: {exc}"
            ) from exc


def lint_file(path: str | Path, budget: int = DEFAULT_BUDGET) -> LintReport:
    return lint_unit(compile_file(path, until="net"), budget)


def lint_source(source: str, file: str = "<string>", budget: int = DEFAULT_BUDGET) -> LintReport:
    return lint_unit(compile_source(source, file, until="net"), budget)
