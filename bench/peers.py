"""Peers: each in its own virtualenv under `.bench-venvs/` (never a project dependency).

`ensure(name)` creates the venv with `python -m venv` and pip-installs the peer once (a
marker file remembers what was installed); it returns the venv's interpreter, or raises
`PeerUnavailable` with the reason (no network, a failed install...). `run(name, spec)` runs
the peer's standalone script (bench/peer_*.py) in that interpreter and returns its JSON.
`NOETLC_BENCH_PEERS=0` turns every peer off; `NOETLC_BENCH_VENVS` moves the venvs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


@dataclass(frozen=True)
class Peer:
    name: str
    venv: str
    requirements: tuple[str, ...]
    script: str
    env: tuple[tuple[str, str], ...] = ()


PEERS: dict[str, Peer] = {
    p.name: p
    for p in (
        Peer("SpiffWorkflow", "spiffworkflow", ("SpiffWorkflow>=3",), "peer_spiff.py"),
        Peer("transitions", "transitions", ("transitions",), "peer_transitions.py"),
        # The newest Prefect on the index fails to start its server with FastAPI ≥ 0.120
        # (`Body(min_items=...)`); capping FastAPI lets pip pick a Prefect 3 that starts.
        Peer(
            "Prefect",
            "prefect",
            ("prefect>=3,<4", "fastapi<0.120"),
            "peer_prefect.py",
            (
                ("PREFECT_LOGGING_LEVEL", "WARNING"),
                ("PREFECT_SERVER_ANALYTICS_ENABLED", "false"),
                ("PREFECT_UI_ENABLED", "false"),
                # its local server takes more than the default 20 s to start on a busy machine
                ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180"),
            ),
        ),
        Peer("NoETL CLI", "noetl", ("noetl",), "peer_noetl.py"),
        # the client release `noetl-vm serve` is checked against (tests/service, bench)
        Peer("NoETL client 5.3.2", "noetl-5.3.2", ("noetl==5.3.2",), "peer_noetl.py"),
    )
}


class PeerUnavailable(Exception):
    """The peer cannot be installed or run here; the message is the printed reason."""


def enabled() -> bool:
    return os.environ.get("NOETLC_BENCH_PEERS", "1") != "0"


def venv_root() -> Path:
    return Path(os.environ.get("NOETLC_BENCH_VENVS") or REPO / ".bench-venvs")


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure(name: str, timeout: float = 900) -> Path:
    if not enabled():
        raise PeerUnavailable("peers are turned off (NOETLC_BENCH_PEERS=0 or --no-peers)")
    peer = PEERS[name]
    venv = venv_root() / peer.venv
    marker = venv / ".noetlc-bench-installed"
    wanted = "\n".join(peer.requirements)
    if marker.exists() and marker.read_text(encoding="utf-8") == wanted:
        return _python(venv)
    try:
        if not _python(venv).exists():
            venv.parent.mkdir(parents=True, exist_ok=True)  # `venv` makes only the last level
            subprocess.run(
                [sys.executable, "-m", "venv", str(venv)],
                check=True,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        subprocess.run(
            [str(_python(venv)), "-m", "pip", "install", "-q", *peer.requirements],
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.CalledProcessError as exc:
        lines = [
            line
            for line in (exc.stderr or "").splitlines()
            if line.strip() and not line.startswith("WARNING: Location")
        ]
        raise PeerUnavailable(
            f"installing {' '.join(peer.requirements)} failed: {' | '.join(lines[-2:])}"
        ) from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"cannot create the virtualenv for {name}: {exc}") from None
    marker.write_text(wanted, encoding="utf-8")
    return _python(venv)


def ensure_all(names: list[str] | None = None) -> dict[str, str]:
    """Install every peer concurrently (pip is mostly waiting on the network); returns
    {name: "ready" | reason}."""

    def one(name: str) -> tuple[str, str]:
        try:
            ensure(name)
            return name, "ready"
        except PeerUnavailable as exc:
            return name, str(exc)

    chosen = names or list(PEERS)
    with ThreadPoolExecutor(max_workers=len(chosen)) as pool:
        return dict(pool.map(one, chosen))


def run(name: str, spec: dict[str, Any], timeout: float = 600) -> dict[str, Any]:
    """Run the peer's script on `spec`; return its JSON ({"results": ..., "version": ...})."""
    peer = PEERS[name]
    python = ensure(name)
    with tempfile.TemporaryDirectory(prefix="noetlc-peer-") as scratch:
        spec_path = Path(scratch) / "spec.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        env = {**os.environ, **dict(peer.env), "PREFECT_HOME": str(Path(scratch) / "prefect")}
        env.pop("PYTHONPATH", None)
        try:
            done = subprocess.run(
                [str(python), str(HERE / peer.script), str(spec_path)],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=scratch,
            )
        except subprocess.TimeoutExpired:
            raise PeerUnavailable(f"{name} did not finish within {timeout:.0f} s") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = [line for line in done.stderr.strip().splitlines() if line.strip()][-3:]
        raise PeerUnavailable(f"{name} failed (exit {done.returncode}): {' | '.join(tail)}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result
