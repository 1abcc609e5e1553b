"""The pass pipeline: one literal list, run in order, stopping after a pass that reported errors.

Each pass is a module in `noetlc.compiler.passes` with one entry point `run(unit)`. A pass
reads the outputs of earlier passes from the `CompilationUnit` and stores its own there;
user mistakes are diagnostics, never exceptions. Anything else a pass raises is a bug and is
wrapped in `InternalCompilerError` naming the pass; so is a net or a program that fails its
verifier (`CHECKS`, run right after the pass that built it).

The cyclic garbage collector is paused while the passes run. A compilation allocates millions
of long-lived, acyclic objects (located nodes, trees, nets); every full collection rescans all
of them, which made compile time grow faster than linearly (a 10,000-step playbook spent over
half its time in the collector). The passes create no reference cycles, so pausing frees
nothing late; reference counting still frees everything as usual.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

from noetlc.compiler.unit import CompilationUnit
from noetlc.diagnostics.errors import InternalCompilerError
from noetlc.diagnostics.report import Reporter


@dataclass(frozen=True, slots=True)
class Pass:
    """One pass of the pipeline: its name, module and summary."""

    name: str
    module: str  # noetlc.compiler.passes.<module>
    summary: str

    def entry(self) -> Callable[[CompilationUnit], None]:
        fn: Callable[[CompilationUnit], None] = import_module(
            f"noetlc.compiler.passes.{self.module}"
        ).run
        return fn


PIPELINE: list[Pass] = [
    Pass("load", "load", "YAML text -> located nodes (duplicate keys, coerced scalars)"),
    Pass("schema", "schema", "the surface schema; rejected legacy keys"),
    Pass("desugar", "desugar", "legacy forms and sugar -> the canonical document"),
    Pass("normalize", "normalize", "canonical document -> the canonical tree"),
    Pass("resolve", "resolve", "names: steps, tasks, jump targets, tool kinds, workbook"),
    Pass("tools", "tools", "tool arguments against each kind's schema"),
    Pass("expressions", "expressions", "every guard and template -> a compiled expression pool"),
    Pass("net", "net", "the canonical tree -> the colored Petri net"),
    Pass("lower", "lower", "net + tree -> control and pipeline programs"),
    Pass("assemble", "assemble", "pools, programs, debug map -> .nbc bytes"),
]


def _verify_net(unit: CompilationUnit) -> None:
    from noetlc.ir.net import verify

    net = unit.net
    if net is not None:
        _internal("net", [f"the net does not verify: {p}" for p in verify(net)])


def _verify_program(unit: CompilationUnit) -> None:
    program = unit.program
    if program is not None:
        _internal("assemble", [f"the program does not verify: {p}" for p in program.verify()])


def _internal(pass_name: str, problems: list[str]) -> None:
    if problems:
        shown = "; ".join(problems[:5])
        raise InternalCompilerError(shown, pass_name=pass_name)


# Verifiers that run after a pass: what a pass built wrong is a bug in noetlc (NOE900), never a
# user diagnostic. The net verifier (ir/net.py) after `net`; after `assemble`, the program's
# structural verifier (ir/program.py), which checks every control and pipeline instruction
# against the opcode table (ir/opcodes.py `verify_code`) and every index against its pool.
CHECKS: dict[str, Callable[[CompilationUnit], None]] = {
    "net": _verify_net,
    "assemble": _verify_program,
}


# Passes that check independent things of the canonical tree (names; tool arguments; guards
# and templates): after one of them reports an error, the next still runs, so one run lists
# a misspelt step, a misspelt tool kind and a misspelt template name together. Any other
# error stops the pipeline (what later passes read would be the broken input).
INDEPENDENT_CHECKS = ("resolve", "tools", "expressions")


def pass_names() -> list[str]:
    return [p.name for p in PIPELINE]


def run_pipeline(
    unit: CompilationUnit,
    *,
    until: str | None = None,
    timings: dict[str, float] | None = None,
    after_each: Callable[[str, CompilationUnit], None] | None = None,
) -> CompilationUnit:
    """Run passes in order up to and including `until` (default: all).

    Stops early after a pass that reported an error, but for `INDEPENDENT_CHECKS`. `timings` receives seconds per pass;
    `after_each` is called after every pass that ran (for `--dump-after`).
    """
    if until is not None and until not in pass_names():
        raise ValueError(f"unknown pass {until!r}; passes are: {', '.join(pass_names())}")
    with gc_paused():
        _run_passes(unit, until, timings, after_each)
    return unit


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the duration (restored even on error)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # Everything allocated meanwhile sits in the youngest generation; the first young
        # collection after re-enabling would scan all of it at once. freeze + unfreeze moves
        # it to the oldest generation without scanning (and resets the allocation count).
        gc.freeze()
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def _run_passes(
    unit: CompilationUnit,
    until: str | None,
    timings: dict[str, float] | None,
    after_each: Callable[[str, CompilationUnit], None] | None,
) -> None:
    after_errors = False  # an independent check already reported an error
    for p in PIPELINE:
        if after_errors and p.name not in INDEPENDENT_CHECKS:
            break
        start = time.perf_counter()
        try:
            p.entry()(unit)
        except Exception as exc:
            if after_errors:
                break  # its input is what the errors already reported are about
            raise _internal_error(exc, p.name) from exc
        check = CHECKS.get(p.name)
        if check is not None:
            check(unit)
        if timings is not None:
            timings[p.name] = time.perf_counter() - start
        unit.passes_run.append(p.name)
        if after_each is not None:
            after_each(p.name, unit)
        if p.name == until:
            break
        if unit.reporter.has_errors:
            if p.name not in INDEPENDENT_CHECKS:
                break
            after_errors = True


def _internal_error(exc: Exception, pass_name: str) -> InternalCompilerError:
    """A pass's exception as an internal error of that pass (NOE900)."""
    if isinstance(exc, InternalCompilerError):
        exc.pass_name = exc.pass_name or pass_name
        return exc
    if isinstance(exc, RecursionError):
        return InternalCompilerError(f"recursion too deep in pass {pass_name}", pass_name=pass_name)
    return InternalCompilerError(f"{type(exc).__name__}: {exc}", pass_name=pass_name)


def compile_source(
    source: str,
    file: str = "<string>",
    *,
    until: str | None = None,
    options: dict[str, Any] | None = None,
) -> CompilationUnit:
    unit = CompilationUnit(file=file, source=source, options=dict(options or {}))
    return run_pipeline(unit, until=until)


def compile_file(
    path: str | Path,
    *,
    until: str | None = None,
    options: dict[str, Any] | None = None,
    after_each: Callable[[str, CompilationUnit], None] | None = None,
) -> CompilationUnit:
    from noetlc.compiler.passes.load import read_source

    reporter = Reporter()
    text = read_source(path, reporter)
    unit = CompilationUnit(
        file=str(path), source=text or "", reporter=reporter, options=dict(options or {})
    )
    if text is None:
        return unit
    return run_pipeline(unit, until=until, after_each=after_each)
