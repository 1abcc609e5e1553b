"""Several loop iterations per job (runtime/bundles.py), over the in-memory backend: how a
round groups its commands, and a server and workers running bundles — the results, a
fail_fast cancel, a takeover with bundles in flight and the reaper — each against embedded
mode and the rule that every iteration is held by exactly one job."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from noetlc.runtime.bundles import LIMIT, build_jobs, covering_jobs, job_actions, members
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.reaper import reap_expired
from noetlc.runtime.replay import check
from noetlc.runtime.server import Server
from noetlc.runtime.worker import Worker
from noetlc.vm.control_state import action_id
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import Command, CommandKind
from tests.runtime_contract.cluster_helpers import comparable, compiled, submit, until_finished

EXECUTION = "e-1"


def _runs(run: str, iterations: list[int | None], args: Any = None) -> list[Command]:
    shared = {} if args is None else args
    return [
        Command(CommandKind.RUN, "each", run, shared, action_id(EXECUTION, run, i), i, f"item{i}")
        for i in iterations
    ]


def _shape(jobs: list[Any]) -> list[list[int | None]]:
    return [
        [m[1] for m in members(j.payload)]
        if "members" in j.payload
        else [j.payload.get("iteration")]
        for j in jobs
    ]


def test_a_round_bundles_consecutive_iterations_of_one_loop() -> None:
    commands = _runs("r1", list(range(10)))
    jobs = build_jobs(commands, EXECUTION, "default", {}, {}, per_job=4, spread=2)
    assert _shape(jobs) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    first = jobs[0]
    assert first.job_id == first.action_id == commands[0].action_id  # named by its first member
    assert first.payload["members"][1] == [commands[1].action_id, 1, "item1"]
    assert "iteration" not in first.payload and "item" not in first.payload


def test_few_iterations_stay_one_per_job() -> None:
    # a round keeps at least `spread` jobs per loop: 10 iterations over 8 jobs cannot bundle
    jobs = build_jobs(_runs("r1", list(range(10))), EXECUTION, "default", {}, {}, spread=8)
    assert _shape(jobs) == [[i] for i in range(10)]
    # per_job 1 never bundles
    jobs = build_jobs(_runs("r1", list(range(300))), EXECUTION, "default", {}, {}, per_job=1)
    assert len(jobs) == 300 and all("members" not in j.payload for j in jobs)


def test_bundles_hold_consecutive_iterations_of_one_run_only() -> None:
    commands = [*_runs("r1", [0, 1, 2, 5, 6]), *_runs("r2", [0, 1]), *_runs("r3", [None])]
    jobs = build_jobs(commands, EXECUTION, "default", {}, {}, per_job=8, spread=1)
    assert _shape(jobs) == [[0, 1, 2], [5, 6], [0, 1], [None]]
    assert [j.payload["step_run_id"] for j in jobs] == ["r1", "r1", "r2", "r3"]


def test_a_takeover_finds_the_bundle_of_an_outstanding_iteration() -> None:
    async def scenario() -> dict[str, str]:
        backend = MemoryBackend()
        jobs = build_jobs(_runs("r1", list(range(40))), EXECUTION, "default", {}, {}, spread=1)
        await backend.queue.enqueue(jobs)
        # iterations 20 and 39 are outstanding: both in the bundle of 16..31 or 32..39
        return await covering_jobs(backend.queue, EXECUTION, _runs("r1", [20, 39]))

    held = asyncio.run(scenario())
    assert held[action_id(EXECUTION, "r1", 20)] == action_id(EXECUTION, "r1", 16)
    assert held[action_id(EXECUTION, "r1", 39)] == action_id(EXECUTION, "r1", 32)
    assert LIMIT >= 16


WIDE = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: bundled, path: t/bundled}
workload: {items: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: each}]}
  - step: each
    loop: {in: "{{ workload.items }}", iterator: x, spec: {mode: parallel, max_in_flight: 12}}
    tool: {kind: python, input: {x: "{{ iter.x }}"}, code: "result = x * 3"}
    next: {arcs: [{step: twice}]}
  - step: twice
    loop: {in: "{{ workload.items }}", iterator: y, spec: {mode: parallel, max_in_flight: 20}}
    tool: {kind: noop, result: "{{ iter.y + 100 }}"}
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
"""

FAIL_FAST = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fail_fast, path: t/fail_fast}
workload: {items: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]}
workflow:
  - step: start
    loop: {in: "{{ workload.items }}", iterator: x, spec: {mode: parallel, max_in_flight: 16}}
    tool:
      kind: python
      input: {x: "{{ iter.x }}"}
      code: |
        import time
        if x == 2:
            raise ValueError("two")
        # the failed iteration's own bundle (0..3) ends soon; the others are still running
        # (or queued) when its failure decides the step, however loaded the machine is
        time.sleep(0.3 if x < 4 else 6)
        result = x
"""


def _jobs_by_action(backend: MemoryBackend, events: list[dict[str, Any]]) -> Any:
    """Every stored job that holds one of the execution's iterations, by action id."""
    actions = {
        action_id(e["execution_id"], e["step_run_id"], e["iteration"])
        for e in events
        if e["name"] == "loop.iteration.started"
    }

    async def lookup() -> dict[str, list[str]]:
        held: dict[str, list[str]] = {}
        for job in await backend.queue.get_many(sorted(actions)):
            for member, _, _ in job_actions(job.action_id, job.payload):
                held.setdefault(member, []).append(job.job_id)
        return held

    return actions, lookup


async def _cluster(
    backend: MemoryBackend, payload: dict[str, Any], *, workers: int = 2, concurrency: int = 3
) -> tuple[Any, list[Any], dict[str, list[str]], set[str]]:
    stop = asyncio.Event()
    server = Server(backend, ttl=2.0, poll=0.05, inline=False, per_job=4, spread=2)
    tasks = [asyncio.create_task(server.run(stop))]
    for _ in range(workers):
        worker = Worker(backend, concurrency=concurrency, ttl=2.0, poll=0.05)
        tasks.append(asyncio.create_task(worker.run(stop)))
    try:
        execution_id = await submit(backend, payload)
        record = await until_finished(backend, execution_id)
        events = await backend.events.read(execution_id)
        actions, lookup = _jobs_by_action(backend, events)
        held = await lookup()
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
    return record, events, held, actions


def test_bundled_iterations_run_once_each_with_embedded_results() -> None:
    payload = compiled(WIDE)
    record, events, held, actions = asyncio.run(_cluster(MemoryBackend(), payload))
    assert comparable(record["summary"]) == comparable(run_embedded(payload))
    steps = record["summary"]["steps"]
    assert steps["each"]["result"]["results"] == [x * 3 for x in range(20)]
    assert steps["twice"]["result"]["results"] == [y + 100 for y in range(20)]
    # bundles were made, and every iteration is held by exactly one job
    assert any(len(jobs) == 1 and jobs[0] != a for a, jobs in held.items())
    assert set(held) == actions and all(len(jobs) == 1 for jobs in held.values())
    for name in ("loop.iteration.started", "loop.iteration.done"):
        ids = [e["event_id"] for e in events if e["name"] == name]
        assert len(ids) == 40 and len(set(ids)) == 40
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    report = check(
        LoadedProgram(payload), record["execution_id"], dict(payload["workload"]), events
    )
    assert report.ok, report.divergence


def test_a_fail_fast_loop_cancels_the_bundles_in_flight() -> None:
    payload = compiled(FAIL_FAST)
    backend = MemoryBackend()
    record, events, held, _ = asyncio.run(_cluster(backend, payload, concurrency=8))
    assert comparable(record["summary"]) == comparable(run_embedded(payload))
    assert record["status"] == "failed"

    async def statuses() -> dict[str, str]:
        jobs = await backend.queue.get_many(sorted({j for js in held.values() for j in js}))
        return {job.job_id: job.status for job in jobs if "members" in job.payload}

    # the bundles still running when iteration 2 failed were cancelled, not completed
    assert "cancelled" in set(asyncio.run(statuses()).values())
    # a bundle commits its members together: only the failed iteration's own bundle (0..3)
    # logged results, after the failure decided the step; the VM ignores them
    late = {e["iteration"] for e in events if e["name"] == "loop.iteration.done"}
    assert late <= {0, 1, 3}


def test_a_takeover_does_not_enqueue_bundled_iterations_again() -> None:
    """Server A commits the first round's bundles and dies; server B replays, finds the
    stored bundles of the outstanding iterations and enqueues none of them again."""
    payload = compiled(WIDE)

    async def scenario() -> tuple[Any, list[Any], dict[str, list[str]], set[str], int]:
        backend = MemoryBackend()
        stop = asyncio.Event()
        execution_id = await submit(backend, payload)
        dead = Server(backend, ttl=0.3, poll=0.05, owner="a", inline=False, per_job=4, spread=2)
        await dead.tick()  # adopts, runs `start`'s round: its job is enqueued
        worker = Worker(backend, concurrency=3, ttl=2.0, poll=0.05)
        await worker._round()  # runs `start`
        await dead.tick()  # reads the result, enqueues the loop's first 12 iterations bundled
        assert dead.owned[execution_id].bundles  # bundles in flight, then the server dies
        await asyncio.sleep(0.4)  # its lease expires
        heir = Server(backend, ttl=2.0, poll=0.05, owner="b", inline=False, per_job=4, spread=2)
        tasks = [asyncio.create_task(heir.run(stop)), asyncio.create_task(worker.run(stop))]
        try:
            record = await until_finished(backend, execution_id)
            events = await backend.events.read(execution_id)
            actions, lookup = _jobs_by_action(backend, events)
            held = await lookup()
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 10)
        return record, events, held, actions, len(heir.owned)

    record, events, held, actions, _ = asyncio.run(scenario())
    assert comparable(record["summary"]) == comparable(run_embedded(payload))
    assert set(held) == actions and all(len(jobs) == 1 for jobs in held.values()), held
    done = [e["iteration"] for e in events if e["name"] == "loop.iteration.done"]
    assert sorted(done) == sorted([*range(20), *range(20)])
    report = check(
        LoadedProgram(payload), record["execution_id"], dict(payload["workload"]), events
    )
    assert report.ok, report.divergence


def test_the_reaper_fails_every_member_of_a_bundle_out_of_attempts() -> None:
    async def scenario() -> list[dict[str, Any]]:
        backend = MemoryBackend()
        await backend.events.create_execution(EXECUTION, "t")
        jobs = build_jobs(_runs("r1", [0, 1, 2]), EXECUTION, "default", {}, {}, spread=1)
        [bundle] = jobs
        await backend.queue.enqueue([_replace_attempts(bundle, 1)])
        await backend.queue.lease("w", limit=1, ttl=0.01)
        await asyncio.sleep(0.05)
        assert await reap_expired(backend)
        return await backend.events.read(EXECUTION)

    events = asyncio.run(scenario())
    assert [(e["name"], e["iteration"]) for e in events] == [
        ("loop.iteration.failed", 0),
        ("loop.iteration.failed", 1),
        ("loop.iteration.failed", 2),
    ]
    assert [e["action_id"] for e in events] == [action_id(EXECUTION, "r1", i) for i in range(3)]
    assert all(e["payload"]["error"]["type"] == "LeaseExpired" for e in events)


def _replace_attempts(job: Any, attempts: int) -> Any:
    from dataclasses import replace

    return replace(job, max_attempts=attempts)


@pytest.mark.parametrize("value,ok", [("1", True), ("64", True), ("0", False), ("65", False), ("x", False)])  # fmt: skip
def test_iterations_per_job_is_bounded(value: str, ok: bool) -> None:
    import argparse

    from noetlc.cli.vm_commands.server import _per_job

    if ok:
        assert _per_job(value) == int(value)
    else:
        with pytest.raises(argparse.ArgumentTypeError):
            _per_job(value)


SLOW_PAIRS = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: slow_pairs, path: t/slow_pairs}
workload: {items: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}
workflow:
  - step: start
    loop: {in: "{{ workload.items }}", iterator: x, spec: {mode: parallel, max_in_flight: 12}}
    tool:
      kind: python
      input: {x: "{{ iter.x }}"}
      code: |
        import time
        time.sleep(0.05)
        result = x
"""


def test_a_bundle_larger_than_the_free_slots_waits_without_spinning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One worker with 5 slots and bundles of 4: the first bundle runs, the others are left
    in the queue (one free slot) until it is done — the worker waits for its
    running job instead of picking again in a tight loop (which, over the memory backend,
    never yielded to the job it waited for)."""
    commits = 0
    commit = Worker._commit

    async def counted(self: Worker, limit: int) -> Any:
        nonlocal commits
        commits += 1
        if commits > 200:
            raise RuntimeError("the worker spins on a bundle it has no slots for")
        return await commit(self, limit)

    monkeypatch.setattr(Worker, "_commit", counted)
    payload = compiled(SLOW_PAIRS)

    async def scenario() -> Any:
        backend = MemoryBackend()
        stop = asyncio.Event()
        server = Server(backend, ttl=2.0, poll=0.05, inline=False, per_job=4, spread=1)
        worker = Worker(backend, concurrency=5, ttl=2.0, poll=0.05)
        tasks = [asyncio.create_task(server.run(stop)), asyncio.create_task(worker.run(stop))]
        try:
            execution_id = await submit(backend, payload)
            return await until_finished(backend, execution_id)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 10)

    record = asyncio.run(scenario())
    assert record["summary"]["steps"]["start"]["result"]["results"] == list(range(12))
    assert commits < 50
