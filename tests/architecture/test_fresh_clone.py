"""A fresh clone passes its tests: the project's own cases are in the repository, and the
tests that need the NoETL corpus (kept outside it) skip with one counted summary line, or fail
the run under CI=true."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _pytest(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "tests/vm/test_vm_corpus.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def test_without_the_corpus_its_tests_skip_with_one_summary_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-shared"
    result = _pytest({"NOETLC_SHARED": str(missing), "CI": ""})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if "NoETL corpus" in line]
    assert len(lines) == 1, result.stdout
    assert re.match(
        rf"\d+ test\(s\) skipped: the NoETL corpus is not at {re.escape(str(missing))}/corpus/noetl",
        lines[0],
    )


def test_under_ci_a_missing_corpus_fails_the_run(tmp_path: Path) -> None:
    missing = tmp_path / "no-shared"
    result = _pytest({"NOETLC_SHARED": str(missing), "CI": "true"})
    assert result.returncode != 0
    assert f"CI=true and the NoETL corpus is not at {missing}/corpus/noetl" in (
        result.stdout + result.stderr
    )


def test_no_test_reads_the_shared_folder_but_through_conftest() -> None:
    offenders = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path == Path(__file__).resolve() or (
            path.name == "conftest.py" and path.parent.name == "tests"
        ):
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"""["']shared["']|\.\./shared|noetl-e2e""", text):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_the_conformance_cases_are_in_the_repository() -> None:
    cases = sorted((REPO / "tests" / "fixtures" / "conformance").glob("c*.yaml"))
    playbooks = [p for p in cases if not p.name.endswith(".expect.yaml")]
    assert len(playbooks) >= 10
    for playbook in playbooks:
        assert playbook.with_name(playbook.stem + ".expect.yaml").is_file(), playbook.name
