"""The `load` pass: positions, duplicate keys, coerced scalars, unusable documents."""

from __future__ import annotations

import pytest

from noetlc.compiler.passes.load import load
from noetlc.compiler.ynodes import YMap, YScalar, YSeq
from noetlc.diagnostics.report import Reporter


def _load(text: str) -> tuple[YMap | None, Reporter]:
    reporter = Reporter()
    return load(text, "t.yaml", reporter), reporter


def test_positions_are_one_based_for_keys_and_values() -> None:
    doc, rep = _load("a: 1\nlist:\n  - x: hello\n")
    assert doc is not None and not rep.diagnostics
    key = doc.key_node("list")
    assert key is not None and (key.span.line, key.span.column) == (2, 1)
    seq = doc.get("list")
    assert isinstance(seq, YSeq)
    item = seq.items[0]
    assert isinstance(item, YMap)
    value = item.get("x")
    assert isinstance(value, YScalar)
    assert (value.span.line, value.span.column, value.span.end_column) == (3, 8, 13)


def test_duplicate_keys_report_both_locations() -> None:
    _, rep = _load("a: 1\nb: 2\na: 3\n")
    [diag] = rep.diagnostics
    assert diag.code == "NOE002"
    assert diag.span is not None and diag.span.line == 3
    assert diag.related[0][1].line == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [("on", True), ("no", False), ("010", 8), ("1:30", 90), ("Yes", True)],
)
def test_coerced_plain_scalars_warn(text: str, expected: object) -> None:
    doc, rep = _load(f"v: {text}\n")
    assert doc is not None and doc.to_python() == {"v": expected}
    assert [d.code for d in rep.diagnostics] == ["NOE003"]


@pytest.mark.parametrize("text", ['"on"', "true", "10", "0", "1.5", "'010'", "null"])
def test_ordinary_scalars_do_not_warn(text: str) -> None:
    _, rep = _load(f"v: {text}\n")
    assert rep.diagnostics == []


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", "NOE005"),
        ("- a\n- b\n", "NOE005"),
        ("a: [1,\n b: 2", "NOE001"),
        ("a: 1\n---\nb: 2\n", "NOE006"),
        ("a: !include x.yaml\n", "NOE006"),
        ("? [1, 2]\n: x\n", "NOE006"),
    ],
)
def test_unusable_documents(text: str, code: str) -> None:
    _, rep = _load(text)
    assert code in [d.code for d in rep.diagnostics]


def test_merge_keys_do_not_override_explicit_keys() -> None:
    doc, rep = _load("base: &b {x: 1, y: 2}\nthing:\n  <<: *b\n  y: 3\n")
    assert doc is not None and not rep.diagnostics
    assert doc.to_python()["thing"] == {"y": 3, "x": 1}


def test_spans_do_not_take_part_in_equality() -> None:
    a, _ = _load("x: [1, {y: z}]\n")
    b, _ = _load("\n\nx:\n  - 1\n  - y: z\n")
    assert a == b
