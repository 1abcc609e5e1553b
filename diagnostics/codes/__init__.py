"""The registry of diagnostic codes.

Each range lives in its own module (owned by the stage that reports it) and is listed below;
a code is registered once, with its severity, a one-line title, a default hint, and the long
`explain` text (which must contain an example). `noetlc explain NOE101` prints it.

Ranges: NOE0xx YAML loading · NOE1xx surface schema · NOE2xx names and structure ·
NOE3xx templates and expressions · NOE4xx legacy forms and desugaring · NOE5xx static analysis
(lint) · NOE6xx tool arguments · NOE7xx bytecode files · NOE8xx runtime and CLI · NOE9xx internal.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from noetlc.diagnostics.severity import Severity


@dataclass(frozen=True, slots=True)
class CodeInfo:
    """One registered diagnostic code."""

    code: str
    name: str  # kebab-case rule name, used by SARIF
    severity: Severity
    title: str
    explain: str
    hint: str | None = None


def _modules() -> list[ModuleType]:
    # A literal list, so every range is visible here.
    from noetlc.diagnostics.codes import (
        bytecode_codes,
        desugar_codes,
        expr_codes,
        internal_codes,
        lint_codes,
        name_codes,
        runtime_codes,
        schema_codes,
        service_codes,
        tool_codes,
        vm_codes,
        yaml_codes,
    )

    return [
        yaml_codes,
        schema_codes,
        name_codes,
        expr_codes,
        desugar_codes,
        lint_codes,
        tool_codes,
        bytecode_codes,
        runtime_codes,
        vm_codes,
        service_codes,
        internal_codes,
    ]


_REGISTRY: dict[str, CodeInfo] | None = None


def registry() -> dict[str, CodeInfo]:
    global _REGISTRY
    if _REGISTRY is None:
        table: dict[str, CodeInfo] = {}
        for module in _modules():
            for info in module.CODES:
                if info.code in table:
                    raise RuntimeError(f"diagnostic code {info.code} registered twice")
                table[info.code] = info
        _REGISTRY = dict(sorted(table.items()))
    return _REGISTRY


def lookup(code: str) -> CodeInfo:
    try:
        return registry()[code]
    except KeyError:
        from noetlc.diagnostics.errors import InternalCompilerError

        raise InternalCompilerError(f"unregistered diagnostic code {code}") from None


def code(
    code: str, name: str, severity: str, title: str, explain: str, hint: str | None = None
) -> CodeInfo:
    """Shorthand used by the range modules."""
    return CodeInfo(code, name, Severity(severity), title, explain.strip("\n"), hint)
