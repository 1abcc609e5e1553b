"""Shared test fixtures: paths to the shared corpus and the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus"
CONFORMANCE = CORPUS / "conformance"
NOETL_CORPUS = CORPUS / "noetl"


def corpus_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.yaml") if not p.name.endswith(".expect.yaml"))


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    if not CONFORMANCE.is_dir():
        pytest.skip(f"shared corpus not found at {CONFORMANCE}")
    return CONFORMANCE
