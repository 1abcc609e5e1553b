"""What a waiting client reads: `PostgresStore.execution` reads the first event only (it
carries the program), never the whole log, and `submit --wait` polls the execution's row
(`state`) without the program. Both used to read and decode far more on every wake-up of a
busy execution (every commit wakes the client): `execution` read the whole log to keep its
first event."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from noetlc.runtime.postgres.event_store import PostgresStore
from noetlc.runtime.postgres.testing import schema_or_skip
from noetlc.vm.protocol import EventName, Source, envelope


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    yield from schema_or_skip()


def test_execution_reads_the_first_event_only(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = PostgresStore(url)
    try:
        execution_id = str(uuid.uuid4())
        store.create_execution(execution_id, "t", program=b"program", workload={"n": 1})
        events = [
            envelope(EventName.SIGNAL_RECEIVED, Source.CLIENT, event_id=f"e{i}", payload={})
            for i in range(50)
        ]
        store.append(execution_id, events)
        reads: list[tuple[Any, ...]] = []
        read = store.db.events.read

        async def spy(*args: Any) -> Any:
            reads.append(args)
            return await read(*args)

        monkeypatch.setattr(store.db.events, "read", spy)
        record = store.execution(execution_id)
        assert record is not None
        assert record["program"] == b"program" and record["workload"] == {"n": 1}
        assert reads == [(execution_id, 0, 1)]
        state = store.state(execution_id)
        assert state is not None and state["status"] == "running"
        assert state["last_seq"] == 51 and "program" not in state
        assert len(reads) == 1  # the row only
    finally:
        store.close()
