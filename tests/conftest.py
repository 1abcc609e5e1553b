"""Paths the tests share, and the rule for the NoETL corpus.

The project's own conformance cases live in the repository (`tests/fixtures/conformance/`):
every test that needs them runs everywhere. The NoETL corpus (playbooks copied from NoETL's
repositories, third-party data kept outside the repository) is looked for in `../shared` beside
the clone, or where `$NOETLC_SHARED` points. When it is absent, the tests that need it are
skipped with one reason, `NOETL_MISSING`, and the run ends with one summary line naming the
folder and how many tests were skipped; under `CI=true` a missing corpus fails the run.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
# the compile cache of every command the tests run (in process or not): a fresh folder, never
# the user's own cache
os.environ["NOETLC_CACHE_DIR"] = tempfile.mkdtemp(prefix="noetlc-test-cache-")
FIXTURES = REPO / "tests" / "fixtures"
CONFORMANCE = FIXTURES / "conformance"
SHARED = Path(os.environ.get("NOETLC_SHARED") or REPO.parent / "shared")
NOETL_CORPUS = SHARED / "corpus" / "noetl"
NOETL_E2E = SHARED / "noetl-e2e"
NOETL_MISSING = f"the NoETL corpus is not at {NOETL_CORPUS}"
HAVE_NOETL = NOETL_CORPUS.is_dir()

# A test (or a module's `pytestmark`) that reads the NoETL corpus.
needs_noetl = pytest.mark.skipif(not HAVE_NOETL, reason=NOETL_MISSING)


def corpus_files(folder: Path) -> list[Path]:
    """The playbooks of a corpus folder, expectation files left out (sorted)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.yaml") if not p.name.endswith(".expect.yaml"))


CONFORMANCE_CASES = corpus_files(CONFORMANCE)
NOETL_FILES = corpus_files(NOETL_CORPUS)


def noetl_params(values: list[Any]) -> list[Any]:
    """Parameters drawn from the NoETL corpus; without it, one skipped placeholder (so the
    test is counted as skipped for the corpus instead of vanishing)."""
    if values:
        return values
    return [pytest.param(None, id="noetl-corpus-missing", marks=needs_noetl)]


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def pytest_sessionstart(session: pytest.Session) -> None:
    if _ci() and not HAVE_NOETL:
        pytest.exit(
            f"CI=true and {NOETL_MISSING}: put the corpus there (or set NOETLC_SHARED to the"
            " folder holding corpus/noetl) so that no test is skipped in CI",
            returncode=1,
        )


def _skipped_for_corpus(report: Any) -> bool:
    longrepr = getattr(report, "longrepr", None)
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
    return NOETL_MISSING in str(reason)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if _skipped_for_corpus(r)]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} test(s) skipped: {NOETL_MISSING}"
            " (set NOETLC_SHARED to the folder holding corpus/noetl to run them)",
            yellow=True,
        )


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    return CONFORMANCE


@pytest.fixture(autouse=True)
def log_invariants(request: pytest.FixtureRequest) -> Any:
    """After each runtime, chaos and fault test: the logs it wrote keep their invariants
    (tests/logcheck_support.py)."""
    yield
    from tests.logcheck_support import CHECKED_FOLDERS, check_after_test

    folder = Path(str(request.node.path)).parent.name
    if folder not in CHECKED_FOLDERS or request.node.get_closest_marker("log_violations"):
        return
    report = getattr(request.node, "rep_call", None)
    if report is None or not report.passed:
        return  # a failed or skipped test says enough
    check_after_test(request)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report
