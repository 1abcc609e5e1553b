"""Located diagnostics: the one currency every pass, the linter and the CLIs report in.

A `Diagnostic` is a user-facing finding with a stable code (`NOE` + number, registered in
`noetlc.diagnostics.codes`). User errors never raise out of a pass: a pass adds diagnostics to a
`Reporter`, and the pipeline stops after a pass that reported errors. `InternalCompilerError`
is the only exception type that means "our bug"; the CLI prints it with a please-report footer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from noetlc.diagnostics.errors import REPORT_FOOTER as _REPORT_FOOTER
from noetlc.diagnostics.severity import Severity

# re-exported: where every pass imports them from
from noetlc.diagnostics.span import NO_SPAN as NO_SPAN
from noetlc.diagnostics.span import Span as Span


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One step of a counterexample path (linter) or of a provenance chain."""

    message: str
    span: Span | None = None
    step: str | None = None  # the playbook step it passes (linter counterexamples)
    transition: str | None = None  # the net transition that fired


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One located diagnostic: code, severity, message, hint and trace."""

    code: str
    severity: Severity
    message: str
    span: Span | None = None
    hint: str | None = None
    trace: tuple[TraceStep, ...] = ()
    related: tuple[tuple[str, Span], ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def sort_key(self) -> tuple[str, int, int, str]:
        if self.span is None:
            return ("", 0, 0, self.code)
        return (self.span.file, self.span.line, self.span.column, self.code)

    def to_json(self) -> dict[str, Any]:
        span = self.span
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "file": span.file if span else None,
            "line": span.line if span else None,
            "column": span.column if span else None,
            "end_line": span.end_line if span else None,
            "end_column": span.end_column if span else None,
            "hint": self.hint,
        }
        if self.trace:
            out["trace"] = [
                {
                    "step": t.step,
                    "transition": t.transition,
                    "message": t.message,
                    "file": t.span.file if t.span else None,
                    "line": t.span.line if t.span else None,
                    "column": t.span.column if t.span else None,
                }
                for t in self.trace
            ]
        return out


class Reporter:
    """Collects the diagnostics of one compilation (all passes, all files)."""

    __slots__ = ("diagnostics",)

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def add(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    def report(
        self,
        code: str,
        message: str,
        span: Span | None = None,
        *,
        hint: str | None = None,
        severity: Severity | None = None,
        trace: Iterable[TraceStep] = (),
        related: Iterable[tuple[str, Span]] = (),
    ) -> Diagnostic:
        """Add a diagnostic; the severity defaults to the code's registered severity."""
        from noetlc.diagnostics.codes import lookup

        info = lookup(code)
        diag = Diagnostic(
            code=code,
            severity=severity or info.severity,
            message=message,
            span=span,
            hint=hint if hint is not None else info.hint,
            trace=tuple(trace),
            related=tuple(related),
        )
        self.diagnostics.append(diag)
        return diag

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics.extend(diagnostics)

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)

    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.diagnostics, key=Diagnostic.sort_key)


class CompileError(Exception):
    """Raised by a driver when a pass reported errors; carries them for the caller."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        first = next((d for d in self.diagnostics if d.is_error), None)
        super().__init__(f"{first.code}: {first.message}" if first else "compilation failed")


REPORT_FOOTER = _REPORT_FOOTER  # errors.py holds it: the CLIs print it without this module


# --------------------------------------------------------------------------- rendering


def render_text(diagnostics: Sequence[Diagnostic], sources: dict[str, str] | None = None) -> str:
    """`file:line:col: error[NOE101]: message`, the source line with a caret, then the hint."""
    lines: list[str] = []
    split: dict[str, list[str]] = {}  # each source split once (not once per diagnostic)
    for d in diagnostics:
        where = f"{d.span}: " if d.span else ""
        lines.append(f"{where}{d.severity.value}[{d.code}]: {d.message}")
        text = sources.get(d.span.file) if (sources and d.span) else None
        if d.span and text is not None:
            src_lines = split.get(d.span.file)
            if src_lines is None:
                src_lines = split[d.span.file] = text.splitlines()
            if 1 <= d.span.line <= len(src_lines):
                src = src_lines[d.span.line - 1].expandtabs(1)
                gutter = f"{d.span.line:>4} | "
                lines.append(gutter + src)
                width = 1
                if d.span.end_line == d.span.line:
                    width = max(1, d.span.end_column - d.span.column)
                width = min(width, max(1, len(src) - d.span.column + 1))
                lines.append(" " * (len(gutter) + d.span.column - 1) + "^" * width)
        for note, span in d.related:
            lines.append(f"  note: {note} at {span}")
        for step in d.trace:
            at = f" ({step.span})" if step.span else ""
            lines.append(f"  -> {step.message}{at}")
        if d.hint:
            lines.append(f"  hint: {d.hint}")
    return "\n".join(lines)


def render_json(diagnostics: Sequence[Diagnostic], files: int, **extra: Any) -> str:
    payload: dict[str, Any] = {"diagnostics": [d.to_json() for d in diagnostics], "files": files}
    payload.update(extra)
    return json.dumps(payload, sort_keys=False)


def render_sarif(diagnostics: Sequence[Diagnostic], tool_version: str) -> str:
    """SARIF 2.1.0: rule metadata from the code registry, traces as codeFlows."""
    from noetlc.diagnostics.codes import lookup

    used = sorted({d.code for d in diagnostics})
    rules = []
    for code in used:
        info = lookup(code)
        rules.append(
            {
                "id": code,
                "name": info.name,
                "shortDescription": {"text": info.title},
                "fullDescription": {"text": info.explain.strip().split("\n\n")[0]},
                "help": {"text": info.explain.strip()},
                "defaultConfiguration": {
                    "level": _sarif_level(info.severity),
                },
            }
        )
    results = []
    for d in diagnostics:
        result: dict[str, Any] = {
            "ruleId": d.code,
            "ruleIndex": used.index(d.code),
            "level": _sarif_level(d.severity),
            "message": {"text": d.message + (f" (hint: {d.hint})" if d.hint else "")},
        }
        if d.span:
            result["locations"] = [_sarif_location(d.span)]
        if d.trace:
            result["codeFlows"] = [
                {
                    "threadFlows": [
                        {
                            "locations": [
                                {
                                    "location": {
                                        **(_sarif_location(t.span) if t.span else {}),
                                        "message": {"text": t.message},
                                    }
                                }
                                for t in d.trace
                            ]
                        }
                    ]
                }
            ]
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "noetlc",
                        "version": tool_version,
                        "informationUri": "https://github.com/noetl/noetlc",
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(doc, indent=2)


def _sarif_level(severity: Severity) -> str:
    return {"error": "error", "warning": "warning", "note": "note"}[severity.value]


def _sarif_location(span: Span) -> dict[str, Any]:
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": span.file},
            "region": {
                "startLine": span.line,
                "startColumn": span.column,
                "endLine": span.end_line,
                "endColumn": span.end_column,
            },
        }
    }
