"""The corpora through the front end: no internal errors anywhere, conformance clean,
and golden dumps of the canonical tree of every conformance case.

Rewrite the golden files with `NOETLC_UPDATE_GOLDEN=1 pytest tests/compiler`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from noetlc.cli import noetlc_main as cli
from noetlc.compiler.pipeline import compile_file, pass_names
from noetlc.compiler.tree_dump import dump_tree
from tests.conftest import CONFORMANCE_CASES, NOETL_FILES, noetl_params

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("NOETLC_UPDATE_GOLDEN") == "1"


ALL = noetl_params(NOETL_FILES) + CONFORMANCE_CASES
CONFORMANCE = CONFORMANCE_CASES


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_check_never_fails_internally(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["check", "--format", "json", str(path)])
    assert code in (0, 1), capsys.readouterr().err
    json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("path", CONFORMANCE, ids=lambda p: p.stem)
def test_conformance_cases_have_no_errors(path: Path) -> None:
    unit = compile_file(path)
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    assert not errors, errors


def _golden_check(path: Path, golden: Path) -> None:
    unit = compile_file(path, until="normalize")
    assert unit.playbook is not None, unit.reporter.sorted()
    text = dump_tree(unit.playbook)
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), (
        f"no golden file {golden}: run with NOETLC_UPDATE_GOLDEN=1 and review it"
    )
    assert text == golden.read_text(encoding="utf-8")


def _needs_desugar(path: Path) -> bool:
    return path.stem.startswith("c09_") or path.name.startswith("v2case__")


@pytest.mark.parametrize("path", CONFORMANCE, ids=lambda p: p.stem)
def test_canonical_tree_golden(path: Path) -> None:
    if _needs_desugar(path) and "desugar" not in pass_names():
        pytest.skip("legacy form: its canonical tree needs the desugar pass (helper DESUGAR)")
    _golden_check(path, GOLDEN / f"{path.stem}.tree.txt")


# The real corpus in its own dialect (v10): the aliases are normalized here.
V10 = noetl_params([p for p in NOETL_FILES if p.name.startswith("v10__")])


@pytest.mark.parametrize("path", V10, ids=lambda p: p.stem)
def test_corpus_dialect_tree_golden(path: Path) -> None:
    _golden_check(path, GOLDEN / "noetl" / f"{path.stem}.tree.txt")


def test_compiling_twice_gives_equal_trees() -> None:
    for path in CONFORMANCE:
        a = compile_file(path, until="normalize").playbook
        b = compile_file(path, until="normalize").playbook
        assert a == b and dump_tree(a) == dump_tree(b)  # type: ignore[arg-type]
