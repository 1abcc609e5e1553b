"""The distributed server and worker logic over the in-memory backend (no PostgreSQL): a
chain, a loop, a failure, a listener timer, and a takeover of a server that died mid-run.
Each summary is the embedded runtime's, and replay reproduces the distributed log."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from noetlc.runtime.driver import Driver
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.replay import check
from noetlc.runtime.server import Server
from noetlc.runtime.worker import Worker
from noetlc.vm.loaded_program import LoadedProgram
from tests.runtime_contract.cluster_helpers import comparable, compiled, submit, until_finished

PLAYBOOKS = Path(__file__).resolve().parents[1] / "vm" / "playbooks"

CHAIN = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: chain, path: t/chain}
workload: {n: 3}
workflow:
  - step: start
    tool: {kind: noop, result: "{{ workload.n }}"}
    next: {arcs: [{step: middle}]}
  - step: middle
    tool: {kind: python, code: "result = 41"}
    next: {arcs: [{step: end, when: "{{ middle == 41 }}"}]}
  - step: end
    tool: {kind: noop, result: done}
"""

LOOP = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: loop, path: t/loop}
workload: {numbers: [1, 2, 3, 4, 5]}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: each}]}
  - step: each
    loop: {in: "{{ workload.numbers }}", iterator: x, spec: {mode: parallel, max_in_flight: 2}}
    tool: {kind: python, input: {x: "{{ iter.x }}"}, code: "result = x * 10"}
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
"""

FAILURE = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: failure, path: t/failure}
workflow:
  - step: start
    tool: {kind: python, code: "raise ValueError('boom')"}
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
"""

LISTENER = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: listener, path: t/listener}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: wait}]}
  - step: wait
    eval_mode: on_event
    spec: {timeout: 0.2}
    tool: {kind: noop}
    next:
      arcs:
        - step: timed_out
          when: "{{ event.name == 'timer.fired' }}"
  - step: timed_out
    tool: {kind: noop, result: late}
"""


async def _run_cluster(payload: dict[str, Any], workers: int = 1) -> tuple[Any, list[Any]]:
    backend = MemoryBackend()
    stop = asyncio.Event()
    server = Server(backend, ttl=2.0, poll=0.05)
    tasks = [asyncio.create_task(server.run(stop))]
    for _ in range(workers):
        worker = Worker(backend, concurrency=2, ttl=2.0, poll=0.05)
        tasks.append(asyncio.create_task(worker.run(stop)))
    try:
        execution_id = await submit(backend, payload)
        record = await until_finished(backend, execution_id)
        events = await backend.events.read(execution_id)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
    return record, events


@pytest.mark.parametrize("source", [CHAIN, LOOP, FAILURE, LISTENER], ids=["chain", "loop", "failure", "listener"])  # fmt: skip
def test_server_and_worker_over_memory_match_embedded_mode(source: str) -> None:
    payload = compiled(source)
    record, events = asyncio.run(_run_cluster(payload, workers=2))
    embedded = run_embedded(payload)
    assert comparable(record["summary"]) == comparable(embedded)
    # a gap-free log that replay reproduces
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    report = check(
        LoadedProgram(payload), record["execution_id"], dict(payload["workload"] or {}), events
    )
    assert report.ok, report.divergence


def test_the_loop_runs_every_iteration_once() -> None:
    record, events = asyncio.run(_run_cluster(compiled(LOOP), workers=2))
    assert record["summary"]["steps"]["each"]["result"]["results"] == [10, 20, 30, 40, 50]
    done = [e["iteration"] for e in events if e["name"] == "loop.iteration.done"]
    assert sorted(done) == [0, 1, 2, 3, 4]


def test_a_server_that_dies_mid_execution_is_taken_over() -> None:
    """Server A owns the execution and dies (its lease is never renewed, nothing released);
    server B claims it when the lease expires, rebuilds the VM by replay, and finishes."""
    payload = compiled(CHAIN)

    async def scenario() -> tuple[Any, list[Any], str]:
        backend = MemoryBackend()
        stop = asyncio.Event()
        execution_id = await submit(backend, payload)
        dead = Server(backend, ttl=0.3, poll=0.05, owner="server-a")
        await dead.tick()  # adopts the execution, enqueues `start`; then never runs again
        assert execution_id in dead.owned
        worker = Worker(backend, concurrency=2, ttl=2.0, poll=0.05)
        worker_task = asyncio.create_task(worker.run(stop))
        await asyncio.sleep(0.5)  # the dead server's lease expires meanwhile
        heir = Server(backend, ttl=2.0, poll=0.05, owner="server-b")
        heir_task = asyncio.create_task(heir.run(stop))
        try:
            record = await until_finished(backend, execution_id)
            events = await backend.events.read(execution_id)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(worker_task, heir_task), 10)
        owner = (await backend.owners.owner_of(execution_id)) or None
        assert owner is None  # retired by the heir
        return record, events, execution_id

    record, events, execution_id = asyncio.run(scenario())
    assert comparable(record["summary"]) == comparable(run_embedded(payload))
    report = check(LoadedProgram(payload), execution_id, dict(payload["workload"] or {}), events)
    assert report.ok, report.divergence
    # every server event appears once: the heir appended only what the dead one had not
    server_ids = [e["event_id"] for e in events if e["source"] == "server"]
    assert len(server_ids) == len(set(server_ids))


def test_large_results_go_through_the_memory_result_store() -> None:
    source = (PLAYBOOKS / "big_result_guard.yaml").read_text()
    record, events = asyncio.run(_run_cluster(compiled(source)))
    assert record["summary"]["steps"]["count"]["result"] == {"first": "row-0"}
    done = next(e for e in events if e["name"] == "step.done" and e["step"] == "start")
    assert "$ref" in done["payload"]["result"]


NOOPS = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: noops, path: t/noops}
workload: {items: [1, 2, 3]}
workflow:
  - step: start
    tool: {kind: noop, result: "{{ workload.items | length }}"}
    next: {arcs: [{step: each}]}
  - step: each
    loop: {in: "{{ workload.items }}", iterator: x, spec: {mode: sequential}}
    tool: {kind: noop, result: "{{ iter.x * 2 }}"}
    next: {arcs: [{step: last}]}
  - step: last
    tool: {kind: python, code: "result = 7"}
"""


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "queued"])
def test_noop_steps_run_inside_the_server_round(inline: bool) -> None:
    """A noop-only step has no effect: the server runs it in its round (no job, no worker,
    its events committed with the round), unless told to enqueue it; the outcome is the
    same, and a step with a real tool still goes to a worker."""
    payload = compiled(NOOPS)

    async def scenario() -> tuple[Any, list[Any], dict[str, Any]]:
        backend = MemoryBackend()
        stop = asyncio.Event()
        server = Server(backend, ttl=2.0, poll=0.05, inline=inline)
        worker = Worker(backend, concurrency=2, ttl=2.0, poll=0.05)
        tasks = [asyncio.create_task(server.run(stop)), asyncio.create_task(worker.run(stop))]
        try:
            execution_id = await submit(backend, payload)
            record = await until_finished(backend, execution_id)
            events = await backend.events.read(execution_id)
            actions = {e["action_id"] for e in events if e["name"] in ("step.done", "loop.iteration.done")}  # fmt: skip
            jobs = {a: await backend.queue.get(a) for a in actions}
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 10)
        return record, events, jobs

    record, events, jobs = asyncio.run(scenario())
    assert comparable(record["summary"]) == comparable(run_embedded(payload))
    assert record["summary"]["steps"]["each"]["result"]["results"] == [2, 4, 6]
    report = check(
        LoadedProgram(payload), record["execution_id"], dict(payload["workload"]), events
    )
    assert report.ok, report.divergence
    queued = sorted(job.payload["step"] for job in jobs.values() if job is not None)
    assert queued == (["last"] if inline else ["each", "each", "each", "last", "start"])


def test_inline_events_read_back_after_a_gap_are_not_fed_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When another process appended between the server's read and its commit, the server
    reads its own round back: the results of the steps it ran inline are in it, and the VM
    is not fed them a second time (it would ignore them, at the cost of the work)."""
    payload = compiled(NOOPS)
    fed: list[str | None] = []
    feed = Driver.feed

    def counting_feed(self: Driver, event: Any) -> Any:
        fed.append(event.event_id)
        return feed(self, event)

    monkeypatch.setattr(Driver, "feed", counting_feed)

    async def scenario() -> tuple[Any, list[Any]]:
        backend = MemoryBackend()
        stop = asyncio.Event()
        server = Server(backend, ttl=2.0, poll=0.05)
        commit = backend.events.append_and_enqueue
        injected: list[str] = []

        async def with_a_gap(execution_id: str, events: Any, jobs: Any) -> Any:
            if not injected:  # someone else's event lands just before our first commit
                injected.append(execution_id)
                foreign = {"event_id": "foreign", "name": "task.started", "source": "worker",
                           "step": "start", "payload": {}}  # fmt: skip
                await backend.events.append(execution_id, [foreign])
            return await commit(execution_id, events, jobs)

        backend.events.append_and_enqueue = with_a_gap  # type: ignore[method-assign]
        worker = Worker(backend, concurrency=2, ttl=2.0, poll=0.05)
        tasks = [asyncio.create_task(server.run(stop)), asyncio.create_task(worker.run(stop))]
        try:
            execution_id = await submit(backend, payload)
            record = await until_finished(backend, execution_id)
            events = await backend.events.read(execution_id)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert injected == [execution_id]
        return record, events

    record, events = asyncio.run(scenario())
    assert comparable(record["summary"]) == comparable(run_embedded(payload))
    assert record["summary"]["steps"]["each"]["runs"] == 1
    server_ids = [e["event_id"] for e in events if e["source"] == "server"]
    assert len(server_ids) == len(set(server_ids))
    assert sum(1 for e in events if e["name"] == "step.scheduled" and e["step"] == "last") == 1
    assert len(fed) == len(set(fed))
    inline_done = [e["event_id"] for e in events if e["name"] == "loop.iteration.done"]
    assert len(inline_done) == 3 and set(inline_done) <= set(fed)


WIDE = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: wide, path: t/wide}
workload: {items: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: each}]}
  - step: each
    loop: {in: "{{ workload.items }}", iterator: x, spec: {mode: parallel, max_in_flight: 4}}
    tool:
      kind: python
      input: {x: "{{ iter.x }}"}
      code: |
        import time
        time.sleep(0.003 * (x % 4))
        result = x * 2
    next: {arcs: [{step: last}]}
  - step: last
    tool: {kind: noop, result: 7}
"""


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "queued"])
def test_rounds_overlap_but_commit_in_order(monkeypatch: pytest.MonkeyPatch, inline: bool) -> None:
    """A slow commit stays in flight while the server reads and feeds the next round; the
    next commit starts only after it (never two at once), no event is fed twice, and the
    outcome and the log are those of embedded mode."""
    payload = compiled(WIDE)
    fed: list[str | None] = []
    feed = Driver.feed

    def counting_feed(self: Driver, event: Any) -> Any:
        fed.append(event.event_id)
        return feed(self, event)

    monkeypatch.setattr(Driver, "feed", counting_feed)
    in_flight: list[int] = []
    overlapped: list[int] = []  # events fed while a commit was in flight

    async def scenario() -> tuple[Any, list[Any]]:
        backend = MemoryBackend()
        stop = asyncio.Event()
        server = Server(backend, ttl=2.0, poll=0.05, inline=inline)
        commit = backend.events.append_and_enqueue

        async def slow(execution_id: str, events: Any, jobs: Any) -> Any:
            in_flight.append(1)
            assert len(in_flight) == 1, "two commits of one server at once"
            before = len(fed)
            try:
                await asyncio.sleep(0.02)
                return await commit(execution_id, events, jobs)
            finally:
                overlapped.append(len(fed) - before)
                in_flight.pop()

        backend.events.append_and_enqueue = slow  # type: ignore[method-assign]
        workers = [Worker(backend, concurrency=4, ttl=2.0, poll=0.05) for _ in range(2)]
        tasks = [asyncio.create_task(server.run(stop))]
        tasks += [asyncio.create_task(w.run(stop)) for w in workers]
        try:
            execution_id = await submit(backend, payload)
            record = await until_finished(backend, execution_id)
            events = await backend.events.read(execution_id)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 10)
        return record, events

    record, events = asyncio.run(scenario())
    assert comparable(record["summary"]) == comparable(run_embedded(payload))
    assert record["summary"]["steps"]["each"]["result"]["results"] == [2 * x for x in range(1, 17)]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len(fed) == len(set(fed))
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))
    done = sorted(e["iteration"] for e in events if e["name"] == "loop.iteration.done")
    assert done == list(range(16))
    report = check(
        LoadedProgram(payload), record["execution_id"], dict(payload["workload"]), events
    )
    assert report.ok, report.divergence
    # the workers' results arrive, and are fed, while a round's commit is in flight
    assert any(overlapped), overlapped
