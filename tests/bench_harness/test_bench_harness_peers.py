"""Installing a peer that cannot be installed gives a reason, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetlc.bench import peers


@pytest.fixture
def broken_peer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    broken = peers.Peer("broken", "broken", (str(tmp_path / "no-such-package"),), "x.py")
    monkeypatch.setenv("NOETLC_BENCH_PEERS", "1")
    monkeypatch.setitem(peers.PEERS, "broken", broken)
    return "broken"


def test_a_failed_install_is_a_reason(
    broken_peer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "not-yet" / "venvs"
    monkeypatch.setenv("NOETLC_BENCH_VENVS", str(root))
    reason = peers.ensure_all([broken_peer])[broken_peer]
    assert reason.startswith("installing ") and "failed" in reason
    assert (root / "broken" / "bin" / "python").exists()


def test_a_venv_root_that_cannot_be_made_is_a_reason(
    broken_peer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the venv root was a dangling symlink (left by a removed work tree); `venv`
    failed and the error handler split its bytes output with a str prefix (TypeError)."""
    root = tmp_path / "venvs"
    root.symlink_to(tmp_path / "gone")
    monkeypatch.setenv("NOETLC_BENCH_VENVS", str(root))
    reason = peers.ensure_all([broken_peer])[broken_peer]
    assert "virtualenv" in reason or "failed" in reason
