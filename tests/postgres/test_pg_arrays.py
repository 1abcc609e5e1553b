"""Array literals (runtime/postgres/arrays.py): what PostgreSQL parses back is what was sent."""

from __future__ import annotations

import json
import math
import random

import pytest

from noetlc.runtime.postgres.arrays import number_array, text_array
from noetlc.runtime.postgres.connect import connect
from noetlc.runtime.postgres.database import Database
from noetlc.runtime.postgres.eventlog import encode_payload
from noetlc.runtime.postgres.testing import truncate_all
from noetlc.runtime.queue import JobSpec

pytestmark = pytest.mark.postgres

AWKWARD = [
    "plain",
    "",
    " padded ",
    "NULL",
    "null",
    "a,b",
    "{braces}",
    '"quoted"',
    "back\\slash",
    '\\"',
    "trailing\\",
    "new\nline\ttab",
    "é ü 日本",
    '{"k":"v \\"x\\"","n":[1,2]}',
    None,
]


async def test_text_array_round_trips_every_character(pg_url):
    conn = await connect(pg_url)
    try:
        back = await conn.fetchval("SELECT $1::text::text[]", text_array(AWKWARD))
        empty = await conn.fetchval("SELECT $1::text::text[]", text_array([]))
    finally:
        await conn.close()
    assert back == AWKWARD
    assert empty == []


def _one_by_one(values: list[str | None]) -> str:
    """The literal built value by value (what text_array did before it joined first)."""
    quoted = [
        '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values if v is not None
    ]
    it = iter(quoted)
    return "{" + ",".join("NULL" if v is None else next(it) for v in values) + "}"


def test_text_array_is_the_value_by_value_literal():
    # joined first, escaped in one pass: separators and the None marker hold a NUL, which
    # no value can hold; a value that does hold one is quoted value by value
    pieces = ["a", ",", '"', "\\", "N", "\x00", "\x00N", "\x00,", "{", "}", " ", "é", "\n"]
    rng = random.Random(7)
    for _ in range(20_000):
        values = [
            None if rng.random() < 0.2 else "".join(rng.choices(pieces, k=rng.randint(0, 4)))
            for _ in range(rng.randint(0, 6))
        ]
        assert text_array(values) == _one_by_one(values), values
        assert text_array(iter(values)) == _one_by_one(values), values


def test_payloads_encode_as_compact_json():
    for payload in (
        {"a": [1, 2.5, None, True, 'é\u2028"q"'], "b": {"c": float("-0.0"), 1: 2}},
        None,
        {"when": object},
        [],
    ):
        expected = json.dumps(
            {} if payload is None else payload,
            separators=(",", ":"),
            default=str,
            ensure_ascii=False,
        )
        assert encode_payload(payload) == expected


async def test_number_arrays_round_trip_exactly(pg_url):
    floats = [1795566472.9166617, 0.1, -0.0, 1e-300, 123456789.123456789, None]
    ints = [0, -1, 2**31 - 1, None]
    conn = await connect(pg_url)
    try:
        f = await conn.fetchval("SELECT $1::text::float8[]", number_array(floats))
        i = await conn.fetchval("SELECT $1::text::integer[]", number_array(ints))
    finally:
        await conn.close()
    assert f[:-1] == floats[:-1] and f[-1] is None
    assert math.copysign(1.0, f[2]) == -1.0
    assert i == ints


async def test_events_and_jobs_with_awkward_text_are_stored_verbatim(pg_url):
    await truncate_all(pg_url)
    db = await Database.open(pg_url, max_size=2)
    try:
        await db.events.create_execution("x,{y}", "playbook")
        events = [
            {"event_id": f'e{i}"\\', "name": "task.done", "step": text, "payload": {"v": text}}
            for i, text in enumerate(t for t in AWKWARD if t is not None)
        ]
        jobs = [
            JobSpec(f'j"{i}\\', "x,{y}", f"a{{{i}}}", {"item": text})
            for i, text in enumerate(AWKWARD)
        ]
        stored = await db.events.append_and_enqueue("x,{y}", events, jobs)
        assert [seq for _, seq in stored] == list(range(1, len(events) + 1))
        back = await db.events.read("x,{y}")
        assert [(e["event_id"], e["step"], e["payload"]) for e in back] == [
            (e["event_id"], e["step"], e["payload"]) for e in events
        ]
        for i, text in enumerate(AWKWARD):
            state = await db.queue.get(f'j"{i}\\')
            assert state is not None and state.payload == {"item": text}
            assert state.action_id == f"a{{{i}}}"
    finally:
        await db.close()
