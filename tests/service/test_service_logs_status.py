"""What runs now and why it failed, through the API: the status's running steps, loop
progress and attempts, the error at its YAML line; the task logs route (pages, filters,
follow); the execution's graph; the list's search."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx

from noetlc.service.progress import StepProgress
from noetlc.service.testing import register, wait_done

FAILING = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: failing_logs, path: demo/failing_logs}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import sys
        print("starting up")
        print("about to fail", file=sys.stderr)
        raise ValueError("deliberate failure")
"""

SLOW_LOOP = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: slow_loop, path: demo/slow_loop}
workload: {pause: 0.3}
workflow:
  - step: slow
    tool:
      kind: python
      input: {p: "{{ workload.pause }}"}
      code: |
        import time
        time.sleep(p)
        result = 1
    next: each
  - step: each
    loop: {in: [1, 2, 3, 4, 5], iterator: n}
    tool:
      kind: python
      input: {n: "{{ iter.n }}"}
      code: |
        print(f"item {n}")
        result = n
"""


async def _start(api: httpx.AsyncClient, path: str, workload: Any = None) -> str:
    reply = await api.post("/api/execute", json={"path": path, "workload": workload or {}})
    assert reply.status_code == 200, reply.text
    execution_id: str = reply.json()["execution_id"]
    return execution_id


async def test_a_failing_step_s_error_line_and_logs(api: httpx.AsyncClient) -> None:
    await register(api, FAILING)
    execution_id = await _start(api, "demo/failing_logs")
    status = await wait_done(api, execution_id)
    assert status["status"] == "FAILED" and status["running_steps"] == []
    assert status["steps"]["start"]["state"] == "failed"
    detail = status["error_detail"]
    raising = FAILING.splitlines().index('        raise ValueError("deliberate failure")') + 1
    assert detail["type"] == "ValueError"
    assert detail["yaml"]["line"] == raising and detail["yaml"]["column"] == 9
    assert (
        f":{raising}:9)" in status["error"] and "ValueError: deliberate failure" in status["error"]
    )

    reply = await api.get(f"/api/executions/{execution_id}/logs")
    assert reply.status_code == 200
    body = reply.json()
    assert body["status"] == "FAILED" and body["more"] is False
    texts = [(r["step"], r["stream"], r["text"]) for r in body["logs"]]
    assert texts == [
        ("start", "stdout", "starting up\n"),
        ("start", "stderr", "about to fail\n"),
    ]
    assert all(r["task"] == "start_task" and r["attempt"] == 1 for r in body["logs"])
    # the cursor and the filters
    first = body["logs"][0]["seq"]
    after = (await api.get(f"/api/executions/{execution_id}/logs?after={first}")).json()
    assert [r["text"] for r in after["logs"]] == ["about to fail\n"]
    assert (await api.get(f"/api/executions/{execution_id}/logs?step=other")).json()["logs"] == []
    page = (await api.get(f"/api/executions/{execution_id}/logs?limit=1")).json()
    assert len(page["logs"]) == 1 and page["more"] is True and page["next_after"] == first
    # follow: every row, then the end
    reply = await api.get(f"/api/executions/{execution_id}/logs?follow=true")
    assert reply.headers["content-type"].startswith("text/event-stream")
    assert reply.text.count("event: log\n") == 2 and "event: end" in reply.text
    assert (await api.get("/api/executions/404/logs")).status_code == 404
    assert (await api.get(f"/api/executions/{execution_id}/logs?limit=0")).status_code == 422


async def test_status_shows_the_running_step_then_loop_progress(api: httpx.AsyncClient) -> None:
    await register(api, SLOW_LOOP)
    execution_id = await _start(api, "demo/slow_loop", {"pause": 1.0})
    seen_running = False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = (await api.get(f"/api/executions/{execution_id}/status")).json()
        if status["running_steps"] == ["slow"]:
            seen_running = True
            assert status["current_step"] == "slow"
            assert status["steps"]["slow"]["state"] == "running"
            break
        if status["completed"]:
            break
        await asyncio.sleep(0.02)
    assert seen_running, "the slow step was never reported running"
    status = await wait_done(api, execution_id)
    assert status["status"] == "COMPLETED"
    loop = status["loops"]["each"]
    assert loop == {"total": 5, "done": 5, "failed": 0, "in_flight": 0, "running": 0}
    assert status["steps"]["each"]["state"] == "done"
    assert status["steps"]["slow"] == {"state": "done", "runs": 1, "attempts": 1}
    logs = (await api.get(f"/api/executions/{execution_id}/logs?step=each&iteration=3")).json()
    assert [r["text"] for r in logs["logs"]] == ["item 4\n"]
    graph = (await api.get(f"/api/executions/{execution_id}/graph")).json()
    assert [s["name"] for s in graph["steps"]] == ["slow", "each"]
    assert [s["loop"] for s in graph["steps"]] == [False, True]


async def test_the_list_is_searchable(api: httpx.AsyncClient) -> None:
    await register(api, FAILING)
    await register(api, SLOW_LOOP)
    failing = await _start(api, "demo/failing_logs")
    looping = await _start(api, "demo/slow_loop", {"pause": 0})
    await wait_done(api, failing)
    await wait_done(api, looping)

    async def ids(query: str) -> list[str]:
        reply = await api.get(f"/api/executions?{query}")
        assert reply.status_code == 200, reply.text
        return [r["execution_id"] for r in reply.json()]

    assert await ids("q=DELIBERATE") == [failing]  # the error's text, any case
    assert await ids("q=slow_loop") == [looping]
    assert await ids(f"q={failing[-6:]}") == [failing]
    assert set(await ids(f"since={time.time() - 600}")) == {failing, looping}
    assert await ids(f"until={time.time() - 600}") == []
    assert (await api.get("/api/executions?since=-1")).status_code == 422


def _event(seq: int, name: str, step: str | None, **extra: Any) -> dict[str, Any]:
    return {"seq": seq, "name": name, "step": step, "payload": {}, **extra}


def test_progress_folds_loops_attempts_and_what_runs() -> None:
    progress = StepProgress()
    events = [
        _event(1, "step.scheduled", "a"),
        _event(2, "task.started", "a", action_id="a1", attempt=1),
        _event(3, "task.retry", "a", action_id="a1", attempt=1),
        _event(4, "step.done", "a", action_id="a1", attempt=2),
        _event(5, "loop.started", "l", payload={"count": 3}),
        _event(6, "loop.iteration.started", "l", iteration=0),
        _event(7, "loop.iteration.started", "l", iteration=1),
        _event(8, "task.started", "l", iteration=0, action_id="i0", attempt=1),
    ]
    progress.feed(events)
    view = progress.view(False, False)
    assert view["running_steps"] == ["l"] and view["scheduled_steps"] == []
    assert view["steps"]["a"] == {"state": "done", "runs": 1, "attempts": 2}
    assert view["loops"]["l"] == {"total": 3, "done": 0, "failed": 0, "in_flight": 2, "running": 1}
    progress.feed(
        [
            _event(9, "loop.iteration.failed", "l", iteration=0, action_id="i0"),
            _event(10, "loop.iteration.done", "l", iteration=1, action_id="i1"),
        ]
    )
    loop = progress.view(False, False)["loops"]["l"]
    assert loop == {"total": 3, "done": 1, "failed": 1, "in_flight": 0, "running": 0}
    # the execution ended: nothing runs any more, and what did not finish was cancelled
    ended = progress.view(True, True)
    assert ended["running_steps"] == [] and ended["steps"]["l"]["state"] == "cancelled"
    assert progress.after == 10
    json.dumps(ended)  # plain data


def test_a_loop_shows_nothing_in_flight_once_the_execution_ended() -> None:
    """A fail-fast loop fails the execution while other iterations run: the status said
    `in_flight: 3, running: 3` for ever after the end."""
    progress = StepProgress()
    progress.feed(
        [
            _event(1, "loop.started", "l", payload={"count": 5}),
            *[_event(2 + i, "loop.iteration.started", "l", iteration=i) for i in range(3)],
            *[
                _event(5 + i, "task.started", "l", iteration=i, action_id=f"i{i}", attempt=1)
                for i in range(3)
            ],
            _event(8, "loop.iteration.failed", "l", iteration=0, action_id="i0"),
            _event(9, "step.failed", "l"),
            _event(10, "execution.failed", None),
        ]
    )
    live = progress.view(False, False)["loops"]["l"]
    assert live["in_flight"] == 2 and live["running"] == 2
    ended = progress.view(True, False)
    assert ended["loops"]["l"] == {"total": 5, "done": 0, "failed": 1, "in_flight": 0, "running": 0}
    assert ended["running_steps"] == [] and ended["steps"]["l"]["state"] == "failed"
