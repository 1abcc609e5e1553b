"""The PostgreSQL floor of distributed mode: raw queue and event-log throughput.

Run: `python -m bench -k pg_queue` (or pytest: `-m bench --benchmark-enable -s`).

* lease+complete: N jobs are enqueued (untimed), then C consumers (asyncio tasks, one pooled
  connection each) drain them with `lease(limit=B)` + `complete(batch)` — two statements per
  batch, the cost every distributed task pays at least once. B ∈ {1, 10}, C ∈ {1, 2, 4}.
* event appends, per event: one event per transaction vs batches of 100 through
  `noetl_append_events` (what PostgresEventStore uses: one round trip per batch), and COPY
  into the log under the same per-execution lock (the alternative we measured and did not pick
  for small batches).

`test_pg_floor_table` prints jobs/s and µs/event side by side with the reference
figures. Skips when PostgreSQL is unreachable.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noetlc.bench.figures import quick, record, target
from noetlc.ir.events import EventName
from noetlc.runtime.postgres.arrays import envelope_arrays
from noetlc.runtime.postgres.connect import connect
from noetlc.runtime.postgres.database import Database
from noetlc.runtime.postgres.queries import q
from noetlc.runtime.postgres.testing import schema_or_skip
from noetlc.runtime.queue import JobSpec
from noetlc.vm.protocol import Event, Source, envelope

pytestmark = pytest.mark.bench

JOBS = {1: 500, 10: 2000} if quick() else {1: 2000, 10: 6000}
CONSUMERS = (1, 2, 4)
EVENTS = 500 if quick() else 2000
ROUNDS = 2 if quick() else 3
REFERENCE = {1: 3000, 10: 18000}  # jobs/s, 4 consumers, measured on a faster 2-core machine


@pytest.fixture(scope="module")
def pg_bench_url() -> Iterator[str]:
    yield from schema_or_skip()


class Harness:
    """A database on a private event loop, so pytest-benchmark can time plain calls."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.loop = asyncio.new_event_loop()
        self.db: Database = self.run(Database.open(url, min_size=4, max_size=8))

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.db.close())
        self.loop.close()


@pytest.fixture(scope="module")
def harness(pg_bench_url: str) -> Iterator[Harness]:
    h = Harness(pg_bench_url)
    yield h
    h.close()


RESULTS: dict[str, float] = {}


async def _refill(db: Database, n: int) -> None:
    async with db.pool.acquire() as conn:
        await conn.execute("TRUNCATE jobs")
    specs = [JobSpec(f"j{i}", "bench", f"a{i}", {"i": i}) for i in range(n)]
    for start in range(0, n, 1000):
        await db.queue.enqueue(specs[start : start + 1000])
    async with db.pool.acquire() as conn:
        await conn.execute("VACUUM ANALYZE jobs")


async def _drain(db: Database, batch: int, consumers: int, combined: bool) -> int:
    done = 0

    async def consumer(name: str) -> None:
        nonlocal done
        if combined:
            leases = await db.queue.lease(name, limit=batch)
            while leases:
                accepted, leases = await db.queue.complete_and_lease(leases, name, limit=batch)
                done += len(accepted)
            return
        while leases := await db.queue.lease(name, limit=batch):
            accepted = await db.queue.complete(leases)
            done += len(accepted)  # not `done += len(await ...)`: that reads `done` first

    await asyncio.gather(*(consumer(f"w{i}") for i in range(consumers)))
    return done


LEASE_CASES = (
    [("2 statements", 1, 4), ("combined", 10, 4)]
    if quick()
    else [("2 statements", b, c) for b in (1, 10) for c in CONSUMERS]
    + [("combined", b, c) for b in (1, 10) for c in (1, 4)]
)


def round_trip_s(harness: Harness, n: int = 200) -> float:
    """Seconds per `SELECT 1` on a pooled connection: the floor under every statement."""

    async def ping() -> float:
        async with harness.db.pool.acquire() as conn:
            start = time.perf_counter()
            for _ in range(n):
                await conn.fetchval("SELECT 1")
            return (time.perf_counter() - start) / n

    return float(harness.run(ping()))


@pytest.mark.parametrize(("mode", "batch", "consumers"), LEASE_CASES)
def test_lease_complete(
    benchmark: Any, harness: Harness, mode: str, batch: int, consumers: int
) -> None:
    n = JOBS[batch]

    def setup() -> tuple[tuple[()], dict[str, Any]]:
        harness.run(_refill(harness.db, n))
        return (), {}

    def drain() -> int:
        return int(harness.run(_drain(harness.db, batch, consumers, mode == "combined")))

    done = benchmark.pedantic(drain, setup=setup, rounds=ROUNDS, iterations=1)
    assert done == n
    rate = n / benchmark.stats.stats.median
    benchmark.extra_info["jobs_per_s"] = round(rate)
    RESULTS[f"{mode} b={batch} c={consumers}"] = rate
    # Floor: one consumer's round trips, `batch` jobs per lease, 1 or 2 statements per batch.
    statements = 1 if mode == "combined" else 2
    floor = batch / (statements * round_trip_s(harness))
    goal = None
    if batch == 10 and consumers == 4:
        goal = target("value", ">=", 10_000, "target: distributed ≥ 10,000 tasks/s (queue alone)")
    record(
        benchmark,
        figure=f"queue lease+complete ({mode}), batch {batch}, {consumers} consumer(s)",
        value=rate,
        unit="jobs/s",
        better="higher",
        against="floor: one connection's SELECT 1 round trips, as jobs/s",
        against_value=floor,
        target=goal,
        group="postgres",
    )


ROUND_JOBS = 4_000 if quick() else 20_000
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def _backend_cpu_s(pid: int) -> float:
    """utime + stime of a PostgreSQL backend so far (the server on this machine), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


async def _worker_rounds(url: str, n: int) -> tuple[float, float]:
    """A worker's steady state on one connection: ~1,000 jobs queued (256 more enqueued per
    round, as a server keeps a loop's window full), rounds of up to 4 picks of 64 and one
    finish with a loop.iteration.done event per job. (PostgreSQL CPU, client CPU) per job."""
    db = await Database.open(url, min_size=1, max_size=1)
    try:
        async with db.pool.acquire() as conn:
            await conn.execute("TRUNCATE jobs")
            pid = int(await conn.fetchval("SELECT pg_backend_pid()"))
        execution = str(uuid.uuid4())
        await db.events.create_execution(execution, "bench")

        def specs(start: int, stop: int) -> list[JobSpec]:
            return [JobSpec(f"r{i}", execution, f"r{i}", {"i": i}) for i in range(start, stop)]

        await db.queue.enqueue(specs(0, 1000))
        enqueued, done = 1000, 0
        pg, client = _backend_cpu_s(pid), time.process_time()
        while done < n:
            if enqueued < n:
                await db.queue.enqueue(specs(enqueued, min(n, enqueued + 256)))
                enqueued = min(n, enqueued + 256)
            async with db.queue.round("bench") as tx:
                ran: list[Any] = []
                for _ in range(4):
                    picked = await tx.pick(64)
                    ran += [
                        (lease, [_iteration_done(lease.action_id, lease.payload["i"])])
                        for lease in picked
                    ]
                    if len(picked) < 64:
                        break
                done += len(await tx.finish([], ran))
        return (_backend_cpu_s(pid) - pg) / n, (time.process_time() - client) / n
    finally:
        await db.close()


def _iteration_done(action_id: str, i: int) -> Event:
    return envelope(
        EventName.LOOP_ITERATION_DONE,
        Source.WORKER,
        event_id=f"{action_id}:1:0",
        ts=time.time(),
        step="each",
        step_run_id="each#1",
        iteration=i,
        attempt=1,
        action_id=action_id,
        payload={"status": "ok", "result": None},
    )


def test_worker_round_cpu(benchmark: Any, pg_bench_url: str) -> None:
    """PostgreSQL CPU per job of a worker's rounds of inline jobs (pick, finish with events,
    one commit): what docs/distributed.md's 0005 measured (a finish that matched the jobs
    with `job_id = ANY` scanned every queued job against the batch)."""
    measured: list[tuple[float, float]] = []
    benchmark.pedantic(
        lambda: measured.append(asyncio.run(_worker_rounds(pg_bench_url, ROUND_JOBS))),
        rounds=ROUNDS,
        iterations=1,
    )
    pg, client = min(measured)
    RESULTS["worker round pg"], RESULTS["worker round client"] = pg, client
    for side, value in (("PostgreSQL backend", pg), ("client", client)):
        record(
            benchmark,
            figure=f"worker round (4 picks of 64 + finish, 1,000 queued), {side} CPU per job",
            value=value * 1e6,
            unit="µs",
            better="lower",
            group="postgres",
        )


SERVER_ROUND = 490  # iterations a server's round handles in the distributed loop bench


async def _server_rounds(url: str, n: int) -> tuple[float, float]:
    """A server's steady state on one connection: rounds of `append_and_enqueue` of
    SERVER_ROUND loop iterations (a `loop.iteration.started` event and a job each, shaped as
    runtime/server.py builds them); the previous round's jobs are finished meanwhile from
    another connection, as the workers do. (PostgreSQL CPU, client CPU) per iteration."""
    db = await Database.open(url, min_size=2, max_size=2)
    try:
        async with db.pool.acquire() as conn:
            await conn.execute("TRUNCATE jobs")
        execution = str(uuid.uuid4())
        await db.events.create_execution(execution, "bench")
        run_id = f"start#{uuid.uuid4().hex[:12]}"

        def iteration(i: int) -> tuple[Event, JobSpec]:
            action_id = uuid.uuid5(uuid.NAMESPACE_OID, f"{execution}:{i}").hex
            event = envelope(
                EventName.LOOP_ITERATION_STARTED,
                Source.SERVER,
                event_id=f"{execution}:s:{i}",
                ts=time.time(),
                step="start",
                step_run_id=run_id,
                iteration=i,
                pc=3,
                payload={"index": i},
            )
            # runtime/server.py leaves out the empty args, ctx and results
            payload = {"step": "start", "step_run_id": run_id, "iteration": i, "item": i}
            return event, JobSpec(action_id, execution, action_id, payload)

        async with db.pool.acquire() as worker:
            async with db.pool.acquire() as conn:
                pid = int(await conn.fetchval("SELECT pg_backend_pid()"))
            pg, client = _backend_cpu_s(pid), time.process_time()
            previous: list[str] = []
            for start in range(0, n, SERVER_ROUND):
                made = [iteration(i) for i in range(start, min(n, start + SERVER_ROUND))]
                await db.events.append_and_enqueue(
                    execution, [e for e, _ in made], [j for _, j in made]
                )
                if previous:
                    await worker.execute(
                        "UPDATE jobs j SET status = 'done' FROM unnest($1::text[]) AS p(job_id)"
                        " WHERE j.job_id = p.job_id",
                        previous,
                    )
                previous = [j.job_id for _, j in made]
            return (_backend_cpu_s(pid) - pg) / n, (time.process_time() - client) / n
    finally:
        await db.close()


def test_server_round_cpu(benchmark: Any, pg_bench_url: str) -> None:
    """PostgreSQL and client CPU per iteration of a server's rounds (`append_and_enqueue`
    of ~490 events and jobs): the serial part of the distributed loop bench."""
    measured: list[tuple[float, float]] = []
    benchmark.pedantic(
        lambda: measured.append(asyncio.run(_server_rounds(pg_bench_url, ROUND_JOBS))),
        rounds=ROUNDS,
        iterations=1,
    )
    pg, client = min(measured)
    RESULTS["server round pg"], RESULTS["server round client"] = pg, client
    for side, value in (("PostgreSQL backend", pg), ("client", client)):
        record(
            benchmark,
            figure=f"server round (append_and_enqueue of {SERVER_ROUND}), {side} CPU per task",
            value=value * 1e6,
            unit="µs",
            better="lower",
            group="postgres",
        )


def test_round_trip(benchmark: Any, harness: Harness) -> None:
    """`SELECT 1` on a pooled connection: the machine's floor under every statement."""

    async def ping(n: int) -> None:
        async with harness.db.pool.acquire() as conn:
            for _ in range(n):
                await conn.fetchval("SELECT 1")

    benchmark.pedantic(lambda: harness.run(ping(500)), rounds=ROUNDS, iterations=1)
    RESULTS["round trip"] = benchmark.stats.stats.median / 500


def _events(n: int) -> list[tuple[Any, ...]]:
    return [
        # event_id, ts, name, source, step, step_run_id, task_run_id, iteration, attempt,
        # parent_id, action_id, pc, payload
        (
            str(uuid.uuid4()),
            time.time(),
            EventName.TASK_DONE.value,
            "worker",
            "step",
            None,
            None,
            None,
            1,
            None,
            None,
            None,
            '{"status":"ok","result":{"n":1}}',
        )
        for _ in range(n)
    ]


async def _append(url: str, batch: int, copy: bool) -> float:
    conn = await connect(url)
    execution = str(uuid.uuid4())
    await conn.execute(q("create_execution"), execution, "bench", None)
    rows = _events(EVENTS)
    started = time.perf_counter()
    for start in range(0, EVENTS, batch):
        chunk = rows[start : start + batch]
        if copy:
            await _append_copy(conn, execution, chunk)
        else:
            await conn.fetch(q("append_events"), execution, *envelope_arrays(chunk))
    elapsed = time.perf_counter() - started
    count = await conn.fetchval("SELECT count(*) FROM events WHERE execution_id = $1", execution)
    await conn.close()
    assert count == EVENTS
    return elapsed / EVENTS


async def _append_copy(conn: Any, execution: str, chunk: list[tuple[Any, ...]]) -> None:
    # The same protocol as noetl_append_events, in four round trips: lock the counter, drop
    # ids already stored, COPY the rest with their seqs, move the counter.
    async with conn.transaction():
        last = await conn.fetchval(
            "SELECT last_seq FROM executions WHERE execution_id = $1 FOR UPDATE", execution
        )
        ids = [r[0] for r in chunk]
        seen = {
            r[0]
            for r in await conn.fetch(
                "SELECT event_id FROM events WHERE execution_id = $1 AND event_id = ANY($2)",
                execution,
                ids,
            )
        }
        fresh = [r for r in chunk if r[0] not in seen]
        records = [(execution, last + i + 1, *r) for i, r in enumerate(fresh)]
        await conn.copy_records_to_table(
            "events",
            records=records,
            columns=[
                "execution_id", "seq", "event_id", "ts", "name", "source", "step",
                "step_run_id", "task_run_id", "iteration", "attempt", "parent_id",
                "action_id", "pc", "payload",
            ],
        )  # fmt: skip
        await conn.execute(
            "UPDATE executions SET last_seq = $2 WHERE execution_id = $1",
            execution,
            last + len(records),
        )


APPEND_CASES = [
    ("single", 1, False),
    ("batch10", 10, False),
    ("copy10", 10, True),
    ("batch100", 100, False),
    ("copy100", 100, True),
]


@pytest.mark.parametrize(
    ("label", "batch", "copy"),
    [c for c in APPEND_CASES if not quick() or c[0] in ("single", "batch100")],
)
def test_event_append(
    benchmark: Any, harness: Harness, pg_bench_url: str, label: str, batch: int, copy: bool
) -> None:
    per_event = benchmark.pedantic(
        lambda: asyncio.run(_append(pg_bench_url, batch, copy)), rounds=ROUNDS, iterations=1
    )
    assert per_event > 0
    RESULTS[f"append {label}"] = per_event
    benchmark.extra_info["us_per_event"] = round(per_event * 1e6, 1)
    record(
        benchmark,
        figure=f"event append, {label} (batch {batch}{', COPY' if copy else ''}), per event",
        value=per_event * 1e6,
        unit="µs",
        against="floor: one SELECT 1 round trip per batch, per event",
        against_value=round_trip_s(harness) * 1e6 / batch,
        group="postgres",
    )


def test_pg_floor_table() -> None:
    """Printed last (file order): the figures docs/distributed.md quotes."""
    if not RESULTS:
        pytest.skip("no benchmark ran")
    trip = RESULTS.get("round trip")
    if trip is not None:
        print(f"\nSELECT 1 round trip on this machine: {trip * 1e6:.0f} µs")
    print("lease+complete                     jobs/s   (reference, 4 consumers)")
    for mode in ("2 statements", "combined"):
        for batch in (1, 10):
            for consumers in CONSUMERS:
                rate = RESULTS.get(f"{mode} b={batch} c={consumers}")
                if rate is not None:
                    ref = f"≈{REFERENCE[batch]:,}" if consumers == 4 else ""
                    label = f"{mode}, batch {batch}, {consumers} consumer(s)"
                    print(f"  {label:<34} {rate:>7,.0f}   {ref}")
    pg, client = RESULTS.get("worker round pg"), RESULTS.get("worker round client")
    if pg is not None and client is not None:
        print(
            f"worker round, per job: PostgreSQL {pg * 1e6:.1f} µs CPU, client {client * 1e6:.1f} µs"
        )
    pg, client = RESULTS.get("server round pg"), RESULTS.get("server round client")
    if pg is not None and client is not None:
        print(
            f"server round, per task: PostgreSQL {pg * 1e6:.1f} µs CPU,"
            f" client {client * 1e6:.1f} µs"
        )
    print("event append                       µs/event (reference: COPY ≈17–22, single ≈360)")
    for label in ("single", "batch10", "copy10", "batch100", "copy100"):
        value = RESULTS.get(f"append {label}")
        if value is not None:
            print(f"  {label:<34} {value * 1e6:>7.1f}")
