"""Event stores (memory, SQLite) and the commands that read them."""

from __future__ import annotations

import dataclasses
import datetime
import json
import multiprocessing
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main as cli
from noetlc.runtime.event_store import (
    MemoryStore,
    SQLiteStore,
    StoreError,
    encode_payload,
)
from noetlc.runtime.store_url import open_store
from tests.conftest import CONFORMANCE


def _events(n: int, start: int = 1) -> list[dict[str, Any]]:
    return [
        {"event_id": f"e{s}", "name": "task.done", "step": "start", "payload": {"i": s}}
        for s in range(start, start + n)
    ]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    s = MemoryStore() if request.param == "memory" else SQLiteStore(str(tmp_path / "e.db"))
    yield s
    s.close()


def test_append_is_idempotent_and_ordered(store: Any) -> None:
    store.create_execution("x", "p")
    assert store.append("x", _events(5)) == 5
    assert store.append("x", _events(5)) == 0  # the same batch again: nothing changes
    assert store.append("x", _events(3, start=4)) == 1  # only e6 is new: it gets seq 6
    assert [e["seq"] for e in store.read("x")] == [1, 2, 3, 4, 5, 6]
    assert [e["seq"] for e in store.read("x", after_seq=4)] == [5, 6]
    assert len({e["event_id"] for e in store.read("x")}) == 6
    store.finish_execution("x", "completed", {"ok": True})
    assert store.executions()[0]["status"] == "completed"


def _append_forever(path: str) -> None:
    s = SQLiteStore(path)
    s.create_execution("crash", "p")
    seq = 1
    while True:
        s.append("crash", _events(10, start=seq))
        seq += 10


def test_sqlite_survives_a_killed_writer(tmp_path: Path) -> None:
    path = str(tmp_path / "crash.db")
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_append_forever, args=(path,))
    proc.start()
    try:
        for _ in range(200):
            if Path(path).exists() and SQLiteStore(path).read("crash"):
                break
            proc.join(0.05)
    finally:
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
    events = SQLiteStore(path).read("crash")
    seqs = [e["seq"] for e in events]
    assert seqs and seqs == list(range(1, len(seqs) + 1))  # committed batches only, no gaps
    assert len(seqs) % 10 == 0


def test_bad_store_urls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for url in ("mysql://x", "postgresql://localhost/x", "nonsense"):
        with pytest.raises(StoreError):
            open_store(url)
    case = str(CONFORMANCE / "c01_chain.yaml")
    assert cli.main(["run", case, "--db", "mysql://x"]) == 5
    assert "error[NOE803]" in capsys.readouterr().err
    blocked = tmp_path / "file"
    blocked.write_text("x")
    assert cli.main(["run", case, "--db", f"sqlite:///{blocked}/sub/e.db"]) == 5


def test_a_store_another_process_holds_locked_is_noe814(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a stopped noetl-vm or a sqlite3 shell inside a transaction holds the write lock past
    # the store's busy wait: a clear error, not an internal one, and nothing lost
    db = tmp_path / "noetl.db"
    url = f"sqlite:///{db}"
    case = str(CONFORMANCE / "c01_chain.yaml")
    assert cli.main(["run", case, "--db", url, "--quiet"]) == 0
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        capsys.readouterr()
        assert cli.main(["run", case, "--db", url, "--quiet"]) == 5
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    err = capsys.readouterr().err
    assert "error[NOE814]" in err and "database is locked" in err and "NOE900" not in err
    assert cli.main(["status", "--json", "--db", url]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in rows] == ["completed"]  # the first run's, kept


def test_only_sqlite_failures_a_user_can_fix_are_noe814() -> None:
    from noetlc.runtime.event_store import store_error_of

    locked = store_error_of(sqlite3.OperationalError("database is locked"))
    assert locked is not None and locked.code == "NOE814"
    full = store_error_of(sqlite3.OperationalError("database or disk is full"))
    assert full is not None and full.code == "NOE814"
    assert store_error_of(sqlite3.OperationalError('near "SELEC": syntax error')) is None
    assert store_error_of(ValueError("database is locked")) is None


def test_run_records_events_and_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'noetl.db'}"
    assert cli.main(["run", str(CONFORMANCE / "c03_fanout_join.yaml"), "--json", "--db", db]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    execution = summary["execution_id"]
    assert cli.main(["status", "--json", "--db", db]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["execution_id"], row["status"]) == (execution, "completed")
    assert cli.main(["events", execution, "--json", "--db", db]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == summary["events"]
    assert json.loads(lines[-1])["name"] == "workflow.finished"
    assert cli.main(["events", "nope", "--db", db]) == 4
    assert "error[NOE804]" in capsys.readouterr().err


def test_payload_encoder_writes_what_json_dumps_writes() -> None:
    # compact UTF-8 JSON; unknown types, datetimes, dataclasses and non-str keys as
    # json.dumps(default=str) writes them; integers past 64 bits through the fallback
    @dataclasses.dataclass
    class Point:
        x: int

    values: list[Any] = [
        {"result": None, "ctx_writes": [["i", 3]]},
        {"x": [1, 2.5, True, "é\n\"'\u2028"], "when": datetime.date(2020, 1, 2), "n": {"deep": {}}},
        {"at": datetime.datetime(2020, 1, 2, 3, 4, 5), 1: "int key", None: 0, "p": Point(1)},
        "text",
        [-0.0, 10**30, 1e-300, 2**63 - 1],
    ]
    for value in values:
        want = json.dumps(value, default=str, separators=(",", ":"), ensure_ascii=False)
        assert encode_payload(value) == want


def test_non_finite_floats_are_written_as_null() -> None:
    # PostgreSQL's json type refuses NaN and Infinity: they are null in every store
    assert (
        encode_payload([float("nan"), float("inf"), -float("inf"), 1.5]) == "[null,null,null,1.5]"
    )
    circular: list[Any] = []
    circular.append(circular)
    with pytest.raises((ValueError, RecursionError)):
        encode_payload(circular)


def test_two_connections_append_to_one_execution_without_gaps(tmp_path: Path) -> None:
    path = str(tmp_path / "e.db")
    first, second = SQLiteStore(path), SQLiteStore(path)
    first.create_execution("x", "pb")

    def events(prefix: str, count: int) -> list[dict[str, Any]]:
        return [{"event_id": f"{prefix}{i}", "name": "n"} for i in range(count)]

    assert first.append("x", events("a", 2)) == 2
    # `second` guesses the last seq (2), then `first` appends before `second` inserts
    guess_rows = second._rows

    def interleaved(*args: Any) -> list[tuple[Any, ...]]:
        second._rows = guess_rows  # type: ignore[method-assign]
        first.append("x", events("b", 3))
        return guess_rows(*args)

    second._rows = interleaved  # type: ignore[method-assign]
    assert second.append("x", events("c", 2)) == 2
    assert first.append("x", events("d", 1)) == 1  # its cached last seq (5) is stale too
    assert second.append("x", events("c", 2) + events("e", 1)) == 1  # c0, c1 are known
    logged = first.read("x")
    assert [e["seq"] for e in logged] == list(range(1, 10))
    assert [e["event_id"] for e in logged] == ["a0", "a1", "b0", "b1", "b2", "c0", "c1", "d0", "e0"]
    first.close()
    second.close()


def test_the_result_limit_counts_utf8_bytes() -> None:
    from noetlc.runtime.results import REF_KEY, References

    class Memory:
        def __init__(self) -> None:
            self.data: dict[str, bytes] = {}

        def put_result(self, key: str, data: bytes) -> None:
            self.data[key] = data

    refs = References(Memory(), limit=12)  # type: ignore[arg-type]
    assert refs.shrink("abcdefghij") == "abcdefghij"  # 12 bytes with its quotes
    shrunk = refs.shrink("éééééééééé")  # 10 characters, 22 bytes
    assert shrunk != "éééééééééé" and shrunk[REF_KEY]["size"] == 22


def test_a_store_in_a_missing_folder_is_refused_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "some" / "new" / "x.db"
    hello = str(Path(__file__).resolve().parents[2] / "examples" / "hello.yaml")
    assert cli.main(["run", hello, "--db", f"sqlite:///{missing}"]) == 5
    err = capsys.readouterr().err
    assert "error[NOE803]" in err and f"mkdir -p {missing.parent}" in err
    assert not (tmp_path / "some").exists()  # nothing created on the way


def test_the_default_store_folder_is_created_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SQLiteStore(".noetl/noetl.db")
    store.close()
    assert (tmp_path / ".noetl" / "noetl.db").is_file()
    with pytest.raises(StoreError) as caught:
        SQLiteStore(str(tmp_path / "deeper" / ".noetl" / "noetl.db"))
    assert caught.value.code == "NOE803"


def test_none_fields_are_stored_as_null(tmp_path: Path) -> None:
    """The SQLite store registers an adapter for None (runtime/event_store.py: the sqlite3
    module's adaptation of None was 10 % of a logged run's instructions); what is bound is
    still NULL, and reads give None back."""
    path = str(tmp_path / "e.db")
    s = SQLiteStore(path)
    s.create_execution("x", "p")
    s.append("x", [{"event_id": "e1", "name": "task.done", "payload": {"v": None}}])
    (event,) = s.read("x")
    assert event["step"] is None and event["iteration"] is None and event["payload"] == {"v": None}
    s.close()
    raw = sqlite3.connect(path)
    row = raw.execute("SELECT step IS NULL, iteration IS NULL, action_id IS NULL FROM events")
    assert row.fetchone() == (1, 1, 1)
    assert raw.execute("SELECT ? IS NULL", (None,)).fetchone() == (1,)
    raw.close()
