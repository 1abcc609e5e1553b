"""Text rendering of many diagnostics in one file."""

from __future__ import annotations

from noetlc.diagnostics.report import Diagnostic, Span, render_text
from noetlc.diagnostics.severity import Severity


class _Counting(str):
    splits = 0

    def splitlines(self, keepends: bool = False) -> list[str]:
        _Counting.splits += 1
        return super().splitlines(keepends)


def test_a_source_is_split_once_for_all_its_diagnostics() -> None:
    """Regression: each diagnostic split the whole file again (`noetlc lint` of a 14,320-step
    playbook with 6,748 warnings spent minutes printing them)."""
    text = _Counting("".join(f"- step: s{i}\n" for i in range(200)))
    found = [
        Diagnostic("NOE511", Severity.WARNING, f"step s{i}", Span("f.yaml", i + 1, 9, i + 1, 11))
        for i in range(200)
    ]
    out = render_text(found, {"f.yaml": text})
    assert _Counting.splits == 1
    assert "  12 | - step: s11" in out
