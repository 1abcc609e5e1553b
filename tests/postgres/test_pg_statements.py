"""SQL statements per distributed step, counted (bench/statements.py): one server
(`--no-inline`: every step is a job) and two workers, each process counting what its asyncpg
connections send. A count, not a timing: the bound holds on any machine.

Per python step: the worker's lease and its finish (one statement each, autocommit), the
task's fenced `task.started` append, the server's read of its inputs and its
append-and-enqueue — about 5 (docs/distributed.md, "Statements per step"). The
`task.started` append wakes no server (migration 0010): no read for it; an enqueue wakes one
idle worker, not both (0011): no empty lease of the other."""

from __future__ import annotations

import pytest

from noetlc.bench import statements

# the reaper's and the claims' polls spread over the steps: a little over 5, never near 6
# (7.2 when `task.started` woke the server, which read its inputs for nothing, and every
# job woke both workers, one of which leased nothing)
BOUND = 6.0


@pytest.fixture(scope="module")
def measured(cluster_url: str) -> dict[str, dict[str, float]]:
    return statements.measure(cluster_url)


@pytest.mark.parametrize("label", ["python chain", "sequential python loop"])
def test_a_distributed_step_sends_at_most_6_statements(
    measured: dict[str, dict[str, float]], label: str
) -> None:
    kinds = measured[label]
    assert 0 < kinds["total"] <= BOUND, kinds


@pytest.mark.parametrize("label", ["python chain", "sequential python loop"])
def test_no_transaction_and_no_pool_reset_per_step(
    measured: dict[str, dict[str, float]], label: str
) -> None:
    """A worker round without inline jobs, the fenced append and the server's round are one
    statement each in autocommit: no BEGIN/COMMIT per step (a loser's empty round included),
    and a pooled connection goes back without asyncpg's reset statement."""
    kinds = measured[label]
    assert kinds.get("BEGIN", 0.0) < 0.1 and kinds.get("COMMIT", 0.0) < 0.1, kinds
    assert kinds.get("pool reset", 0.0) == 0.0, kinds
