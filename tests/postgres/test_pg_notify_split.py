"""Who an append wakes (migration 0010): a batch with an event a server reads notifies
`noetl_events`, a batch of progress only (a task started or done) `noetl_progress`, which no
server listens to; followers of a log (`wait_for_events`) wake on both. A process listens only
to the channels it waits on, so a worker does not hear the event log and a server not the
queue."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from noetlc.runtime.backend import EVENTS, JOBS, PROGRESS, SERVER_READS
from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.postgres.database import Database
from noetlc.runtime.postgres.eventlog import COPY_THRESHOLD
from noetlc.runtime.postgres.testing import truncate_all
from noetlc.runtime.queue import JobSpec

pytestmark = pytest.mark.postgres


@pytest.fixture
async def dbs(pg_url):
    await truncate_all(pg_url)
    listener = await Database.open(pg_url, max_size=2)
    writer = await Database.open(pg_url, max_size=2)
    yield listener, writer
    await writer.close()
    await listener.close()


def _events(prefix: str, name: str, n: int = 1) -> list[dict]:
    return [{"event_id": f"{prefix}{i}", "name": name, "step": "s"} for i in range(n)]


async def _woken(listener: Database, channel: str, key: str, timeout: float) -> bool:
    event = listener.notifications.register(channel, key)
    try:
        return await listener.notifications.sleep_on(event, timeout)
    finally:
        listener.notifications.unregister(channel, key, event)


@pytest.mark.parametrize("size", [1, COPY_THRESHOLD], ids=["function", "copy"])
async def test_progress_does_not_wake_servers(dbs, size):
    listener, writer = dbs
    assert await listener.notifications.ensure_listening(EVENTS, PROGRESS)
    for i, name in enumerate(sorted(SERVER_READS | {"task.started", "task.done"})):
        execution_id = f"x{i}"
        await writer.events.create_execution(execution_id, "p")
        events = listener.notifications.register(EVENTS, execution_id)
        progress = listener.notifications.register(PROGRESS, execution_id)
        await writer.events.append(execution_id, _events(name, name, size))
        read = name in SERVER_READS
        # the channel that was notified wakes at once; then the other one surely was not
        assert await listener.notifications.sleep_on(events if read else progress, 15), name
        await asyncio.sleep(0.05)
        assert not (progress if read else events).is_set(), name


async def test_followers_wake_on_progress(dbs):
    listener, writer = dbs
    await writer.events.create_execution("x", "p")
    follow = asyncio.ensure_future(listener.events.wait_for_events("x", 0, 15))
    await asyncio.sleep(0.2)  # registered and listening
    await writer.events.append("x", _events("t", "task.started"))
    assert await asyncio.wait_for(follow, 15)


async def test_a_process_hears_only_the_channels_it_waits_on(dbs):
    listener, writer = dbs
    notes = listener.notifications
    assert await notes.ensure_listening(JOBS)
    await writer.events.create_execution("x", "p")
    await writer.events.append("x", _events("d", "step.done"))  # noetl_events: not listened to
    await writer.events.create_execution("y", "p")
    # a pool of this test's own: channels are database-wide, and another schema's processes
    # in the same database notify `noetl_jobs` for their pools
    pool = f"split-{uuid.uuid4().hex[:8]}"
    pending = asyncio.ensure_future(_woken(listener, JOBS, pool, 15))
    await asyncio.sleep(0.05)
    await writer.queue.enqueue([JobSpec("j", "y", "a", {}, pool=pool)])
    assert await pending
    assert set(notes.received) == {JOBS}  # the job's notification, not the append's
    # a channel asked for later is listened to from then on
    assert await notes.ensure_listening(EVENTS)
    assert await _woken_after(listener, writer)


async def _woken_after(listener: Database, writer: Database) -> bool:
    pending = asyncio.ensure_future(_woken(listener, EVENTS, "y", 15))
    await asyncio.sleep(0.05)
    await writer.events.append("y", _events("d", "step.done"))
    return await pending


async def test_memory_backend_splits_the_same_way() -> None:
    backend = MemoryBackend()
    notes = backend.notifications
    await backend.events.create_execution("x", "p")
    collected = notes.collect(EVENTS)
    progress = notes.collect(PROGRESS)
    await backend.events.append("x", _events("t", "task.started"))
    assert collected == set() and progress == {"x"}
    await backend.events.append("x", _events("d", "step.done"))
    assert collected == {"x"}
