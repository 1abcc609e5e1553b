"""Side by side: the NoETL client 5.3.2 driving NoETL's own server and `noetl-vm serve`,
embedded (SQLite) and distributed (PostgreSQL, one server and two workers), on five playbooks
(3 and 100 python steps, 100 noop steps, 100-iteration sequential and parallel python loops).

Run: `NOETLC_BENCH_NOETL_SERVER=http://127.0.0.1:PORT python -m bench -k side_by_side`
(NoETL's server and workers already running: bench/side_by_side.py names the variables; the
distributed half of ours needs PostgreSQL, NOETLC_TEST_PG_DSN). Without the variable NoETL's
column is skipped with the reason and ours is still measured.

Each engine runs each playbook once to warm up, then ROUNDS rounds, the engines' order rotated
from one round to the next; the figures are the medians of wall time and of CPU (the server's
processes with their task runners and their PostgreSQL backends), with the 1-minute load
average of the machine at each run. The ratio is ours ÷ NoETL's (the table reads it as "N×
faster"); the target, on ours distributed for the python chain and the sequential loop, is
NoETL ÷ ours ≥ 20×. The client's start-up (`noetl --help`) is in every figure: it is measured
alone as a figure of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noetlc.bench import generators, peers
from noetlc.bench.figures import quick, record, target
from noetlc.bench.side_by_side import (
    PLAYBOOKS,
    TARGET_TIMES,
    TARGETED,
    Client,
    Engine,
    Run,
    legs,
    noetl_from_env,
    our_events,
    pg_backends,
    rotated,
    summary,
)
from noetlc.runtime.credentials import new_key
from noetlc.service.serving import Served

pytestmark = pytest.mark.bench

ROUNDS = 3 if quick() else 5
GROUP = "side by side"
NOETL = "NoETL"
OURS = ("ours embedded", "ours distributed")
_printed: list[str] = []


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    try:
        binary = peers.ensure("NoETL client 5.3.2").parent / "noetl"
    except peers.PeerUnavailable as exc:
        pytest.skip(str(exc))
    with tempfile.TemporaryDirectory(prefix="noetlc-bench-sbs-client-") as scratch:
        yield Client(binary, Path(scratch))


def _distributed(stack: contextlib.ExitStack, folder: Path) -> Engine | None:
    from noetlc.runtime.postgres.cluster_testing import Cluster
    from noetlc.runtime.postgres.testing import (
        dsn_for_tests,
        run_sync,
        temporary_schema,
        unreachable_reason,
    )

    if run_sync(unreachable_reason(dsn_for_tests())) is not None:
        return None
    url = stack.enter_context(temporary_schema("bench_side"))
    cluster = Cluster(url, folder)
    stack.callback(cluster.stop)
    cluster.server()
    cluster.worker(4)
    cluster.worker(4)
    served = Served(cluster.url_for("serve"), folder, new_key())
    stack.callback(served.stop)
    prefix = cluster.application_name + "%"
    return Engine(
        "ours distributed",
        served.url,
        lambda: [served.proc.pid, *(p.pid for p in cluster.procs)],
        lambda: pg_backends("application_name LIKE $1", prefix),
    )


@pytest.fixture(scope="module")
def engines() -> Iterator[list[Engine]]:
    with tempfile.TemporaryDirectory(prefix="noetlc-bench-sbs-") as scratch:
        folder = Path(scratch)
        with contextlib.ExitStack() as stack:
            found: list[Engine] = []
            noetl, _reason = noetl_from_env()
            if noetl is not None:
                found.append(noetl)
            embedded = Served(f"sqlite:///{folder / 'noetl.db'}", folder, new_key())
            stack.callback(embedded.stop)
            found.append(Engine("ours embedded", embedded.url, lambda: [embedded.proc.pid]))
            distributed = _distributed(stack, folder)
            if distributed is not None:
                found.append(distributed)
            yield found


def test_noetl_server_given() -> None:
    """Only says why NoETL's column is missing (the harness lists skips with their reason)."""
    noetl, reason = noetl_from_env()
    if noetl is None:
        pytest.skip(reason)


def test_client_startup(benchmark: Any, client: Client) -> None:
    measured: list[float] = []
    benchmark.pedantic(lambda: measured.append(client.startup_s()), rounds=1, iterations=1)
    record(
        benchmark,
        figure="NoETL client 5.3.2 start-up (`noetl --help`, median of 11)",
        value=measured[0] * 1e3,
        unit="ms",
        fair="part of every side-by-side figure: one `noetl run` and each `noetl status` poll"
        " start the client",
        group=GROUP,
    )


def _ratio_target(name: str, label: str, has_noetl: bool) -> dict[str, Any] | None:
    if name != "ours distributed" or label not in TARGETED or not has_noetl:
        return None
    return target("ratio", "<=", 1 / TARGET_TIMES, f"target: NoETL ÷ ours ≥ {TARGET_TIMES}×")


@pytest.mark.parametrize("label", list(PLAYBOOKS))
def test_side_by_side(
    benchmark: Any,
    engines: list[Engine],
    client: Client,
    label: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = PLAYBOOKS[label]()
    last = generators.last_step(text)
    paths = {e.name: client.register(e, text, label.replace(" ", "_")) for e in engines}
    for engine in engines:  # warm-up: catalog caches, connections, task runners
        client.run(engine, paths[engine.name], last)
    runs: dict[str, list[Run]] = {e.name: [] for e in engines}
    turn = itertools.count()

    def one_round() -> None:
        for engine in rotated(engines, next(turn)):
            runs[engine.name].append(client.run(engine, paths[engine.name], last))

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    medians = {name: summary(done) for name, done in runs.items()}
    for engine in engines:  # where a step's time goes, from the events of ours' last run
        if engine.name in OURS:
            medians[engine.name]["legs_ms"] = legs(
                our_events(engine, runs[engine.name][-1].execution_id)
            )
    theirs = medians.get(NOETL)
    for name in OURS:
        ours = medians.get(name)
        if ours is None:
            continue
        detail = {"ours": ours, "noetl": theirs, "rounds": ROUNDS}
        record(
            benchmark,
            figure=f"{label}, {name}: wall",
            value=ours["wall_s"],
            unit="s",
            against="NoETL's server + worker, wall" if theirs else None,
            against_value=theirs["wall_s"] if theirs else None,
            target=_ratio_target(name, label, theirs is not None),
            fair="the NoETL client 5.3.2 on both: `noetl run` to the first `noetl status` that"
            f" says ended (polled every 10 ms); medians of {ROUNDS} rounds, order rotated",
            group=GROUP,
            detail=detail,
        )
        if ours["server_s"] is not None:
            their_server = theirs["server_s"] if theirs else None
            record(
                benchmark,
                figure=f"{label}, {name}: the server's own duration",
                value=ours["server_s"],
                unit="s",
                against="NoETL's server, its own duration" if their_server else None,
                against_value=their_server,
                fair="`duration_seconds` of the status that ended the run: from the"
                " execution's first event to its end, as each server reports it (without the"
                " client's start-up and the polling interval)",
                group=GROUP,
            )
        if ours["cpu_s"] is not None:
            their_cpu = theirs["cpu_s"] if theirs else None
            record(
                benchmark,
                figure=f"{label}, {name}: CPU incl. PostgreSQL",
                value=ours["cpu_s"],
                unit="s",
                against="NoETL's server + worker + NATS, CPU" if their_cpu else None,
                against_value=their_cpu,
                fair="utime + stime of the server processes, their task runners and their"
                " PostgreSQL backends (the client's own CPU is not counted)",
                group=GROUP,
            )
    with capsys.disabled():
        print("\n" + _row(label, medians))
        for name in OURS:
            split = (medians.get(name) or {}).get("legs_ms")
            if split:
                where = ", ".join(f"{leg} {ms:.1f}" for leg, ms in split.items())
                print(f"  {label}, {name}: a step's legs, median ms: {where}")
    assert all(len(done) == ROUNDS for done in runs.values())


def _row(label: str, medians: dict[str, dict[str, Any]]) -> str:
    """One markdown row: wall and CPU per engine, NoETL ÷ ours, the load averages."""

    def cell(name: str, key: str) -> str:
        value = (medians.get(name) or {}).get(key)
        return "–" if value is None else f"{value:.3g}"

    def times(name: str, key: str) -> str:
        theirs = (medians.get(NOETL) or {}).get(key)
        ours = (medians.get(name) or {}).get(key)
        return "–" if not theirs or not ours else f"{theirs / ours:.1f}×"

    names = (NOETL, *OURS)
    if not _printed:
        _printed.append(label)
        head = "| playbook | wall s: NoETL | embedded | distributed | NoETL ÷ emb. | NoETL ÷ dist."
        head += " | server's own s: NoETL | embedded | distributed | NoETL ÷ dist."
        head += " | CPU s: NoETL | embedded | distributed | NoETL ÷ dist. | load (range) |"
        head += "\n|---|" + "---:|" * 14 + "\n"
    else:
        head = ""
    loads = [r["load"] for m in medians.values() for r in m["rounds"]]
    load = f"{statistics.median(loads):.2f} ({min(loads):.2f}–{max(loads):.2f})"
    return (
        f"{head}| {label} | "
        + " | ".join(cell(n, "wall_s") for n in names)
        + f" | {times(OURS[0], 'wall_s')} | {times(OURS[1], 'wall_s')} | "
        + " | ".join(cell(n, "server_s") for n in names)
        + f" | {times(OURS[1], 'server_s')} | "
        + " | ".join(cell(n, "cpu_s") for n in names)
        + f" | {times(OURS[1], 'cpu_s')} | {load} |"
    )
