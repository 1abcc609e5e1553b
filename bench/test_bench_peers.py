"""The reference workflows against peers, each run in its own virtualenv (bench/peers.py):
SpiffWorkflow (BPMN), `transitions` (a state machine), Prefect 3 (local) and the NoETL CLI
from PyPI. Each test runs our side (compiled once, best of k `run_embedded` runs) and the
peer's script in the same test, and records one figure per workflow: our ms against theirs.

Run: `python -m bench -k peers`. A peer that cannot be installed or started is skipped with
the reason (no network, a failed install, a server that does not start...).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from noetlc.bench import bpmn, generators, peers
from noetlc.bench.figures import quick, record
from noetlc.bench.workflows import best_ms, label, payload

pytestmark = pytest.mark.bench

FAIR = {
    "SpiffWorkflow": "fair: both interpret a workflow definition in one process "
    "(script tasks `pass` vs noop tools); we also record every event",
    "transitions": "a lower bound, not a peer: a bare state machine (no expressions, data "
    "scopes or event log)",
    "Prefect": "fair against our SQLite run: Prefect persists every task's state through its "
    "local API server",
    "NoETL CLI": "not fair to NoETL: its local runner spawns a shell process per step (ours "
    "runs noop tools); the loop is not compared: it ignores `loop:`",
}
STORE = {"Prefect": "sqlite"}


def noetl(peer: str) -> bool:
    """NoETL's command line, today's and the pinned client release: the same dialect."""
    return peer.startswith("NoETL")


def sizes(peer: str) -> dict[str, int]:
    full = {"chain": 100, "loop": 1_000, "decisions": 1_000}
    if noetl(peer):
        return {"chain": 100, "decisions": 1_000}
    if peer == "Prefect" and quick():
        return {"chain": 100, "loop": 1_000, "decisions": 100}
    return full


def spec(peer: str, scratch: Path) -> dict[str, Any]:
    wanted = sizes(peer)
    repeat = 1 if quick() else 3
    if peer == "SpiffWorkflow":
        makers = {"chain": bpmn.chain, "loop": bpmn.loop, "decisions": bpmn.decisions}
        workflows = {}
        for name, n in wanted.items():
            path = scratch / f"{name}.bpmn"
            path.write_text(makers[name](n), encoding="utf-8")
            workflows[name] = {"bpmn": str(path), "process": name, "repeat": repeat}
        return {"workflows": workflows}
    if noetl(peer):
        cli_makers = {"chain": generators.noetl_chain, "decisions": generators.noetl_decisions}
        workflows = {}
        for name, n in wanted.items():
            path = scratch / f"{name}.yaml"
            path.write_text(cli_makers[name](n), encoding="utf-8")
            workflows[name] = {"playbook": str(path), "repeat": repeat}
        return {"workflows": workflows}
    return {"sizes": wanted, "repeat": 1 if peer == "Prefect" else 3}


@pytest.mark.parametrize("peer", list(peers.PEERS))
def test_peer(benchmark: Any, peer: str) -> None:
    try:
        peers.ensure(peer)
    except peers.PeerUnavailable as exc:
        pytest.skip(f"{peer}: {exc}")
    with tempfile.TemporaryDirectory(prefix="noetlc-peer-") as scratch:
        job = spec(peer, Path(scratch))
        try:
            result = benchmark.pedantic(
                peers.run, args=(peer, job), kwargs={"timeout": 1_200}, rounds=1, iterations=1
            )
        except peers.PeerUnavailable as exc:
            pytest.skip(str(exc))
    store = STORE.get(peer, "memory")
    repeat = 3 if quick() else 7
    for name, n in sizes(peer).items():
        ours, _ = best_ms(payload(name, n), store, repeat)
        theirs = result["results"][name]["seconds"] * 1e3
        log = "SQLite log" if store == "sqlite" else "in-memory log"
        record(
            benchmark,
            figure=f"{label(name, n)} ({log}) vs {peer}",
            value=ours,
            unit="ms",
            against=f"{peer} {result.get('version', '')}".strip(),
            against_value=theirs,
            fair=FAIR["NoETL CLI" if noetl(peer) else peer],
            group="peers",
            detail={k: v for k, v in result["results"].items() if k not in sizes(peer)},
        )
