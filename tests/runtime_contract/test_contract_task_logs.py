"""Task logs: what tasks print is captured (python in process and in a child, shell), bounded
per task and per execution with one marker, escaped, redacted, stored with the execution
(memory, SQLite, PostgreSQL) and never printed by the runtime; and the events that say what
runs (`task.started` once per action, within the per-step event budget)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore, SQLiteStore
from noetlc.runtime.logs import ActionLog, Budget, clean


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        s: Any = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(str(tmp_path / "logs.db"))
    else:
        from noetlc.runtime.postgres.event_store import PostgresStore

        s = PostgresStore(request.getfixturevalue("pg_url"))
    yield s
    s.close()


def _payload(text: str) -> dict[str, Any]:
    unit = compile_source(text, "logs.yaml")
    assert unit.payload is not None, [d.message for d in unit.reporter.diagnostics]
    return unit.payload


PRINTS = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: prints, path: t/prints}
keychain:
  - {name: token, kind: secret}
workflow:
  - step: start
    tool:
      kind: python
      input: {tok: "{{ keychain.token }}"}
      code: |
        import sys
        print("hello out")
        print("hello err", file=sys.stderr)
        print(f"secret is {tok}")
        result = 1
    next: child
  - step: child
    tool:
      kind: python
      spec: {isolation: subprocess, timeout: 30}
      code: |
        print("from the child")
        result = 2
    next: each
  - step: each
    loop: {in: [1, 2, 3], iterator: n}
    tool: {kind: shell, command: "echo item {{ iter.n }}; echo oops >&2"}
"""


def test_task_output_is_stored_redacted_and_never_printed(
    store: Any, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    keychain = tmp_path / "keychain.yaml"
    keychain.write_text("token: s3cr3t-value\n")
    execution_id = str(uuid.uuid4())
    summary = run_embedded(
        _payload(PRINTS), store=store, execution_id=execution_id, keychain_file=str(keychain)
    )
    assert summary["status"] == "completed", summary.get("error")
    printed = capfd.readouterr()
    assert "hello" not in printed.out + printed.err  # nothing reaches this process's output
    assert "from the child" not in printed.out + printed.err
    rows = store.read_logs(execution_id)
    text = {(r["step"], r["stream"]): "" for r in rows}
    for r in rows:
        text[(r["step"], r["stream"])] += r["text"]
    assert "hello out\n" in text[("start", "stdout")]
    assert text[("start", "stderr")] == "hello err\n"
    assert "s3cr3t-value" not in "".join(text.values())
    assert "secret is ***" in text[("start", "stdout")]
    # a child process's prints keep their stream (its outcome travels apart from them)
    assert "from the child" in text[("child", "stdout")]
    items = sorted(r["iteration"] for r in rows if r["step"] == "each" and r["stream"] == "stdout")
    assert items == [0, 1, 2]
    assert [r["text"] for r in store.read_logs(execution_id, step="each", iteration=1)] == [
        "item 2\n",
        "oops\n",
    ]
    # the cursor: rows after a seq, in seq order
    seqs = [r["seq"] for r in rows]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert [r["seq"] for r in store.read_logs(execution_id, after=seqs[1])] == seqs[2:]
    assert store.read_logs(execution_id, limit=2) == rows[:2]


def test_a_task_that_prints_megabytes_is_cut_once_per_task() -> None:
    rows: list[dict[str, Any]] = []
    log = ActionLog(rows.extend, Budget(6_000), "s", "a", None, per_task=5_000)
    write = log.writer("t", 1)
    for _ in range(2000):
        write("stdout", "x" * 100 + "\n")
    log.flush()
    text = "".join(r["text"] for r in rows)
    assert text.count("[output cut: the task's log limit of 5,000 characters") == 1
    assert text.count("x") == 5000 - text[:5000].count("\n")
    # the execution's budget: a second task call is cut at what is left, then nothing
    other = log.writer("u", 1)
    for _ in range(200):
        other("stderr", "y" * 100)
    log.flush()
    total = "".join(r["text"] for r in rows)
    assert total.count("y") == 1_000
    assert total.count("the execution's log limit") == 1
    third = log.writer("v", 1)
    third("stdout", "z" * 10)
    log.flush()
    assert "z" not in "".join(r["text"] for r in rows)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"ok \xff\xfe bytes", "ok \\xff\\xfe bytes"),
        ("nul \x00 bell \x07 esc \x1b[31m", "nul \\x00 bell \\x07 esc \\x1b[31m"),
        ("lone \udcff surrogate", "lone \\xff surrogate"),
        ("lone \ud800 high", "lone \\ud800 high"),
        ("tab\tnewline\ncr\r", "tab\tnewline\ncr\r"),
    ],
)
def test_binary_and_invalid_text_is_escaped(raw: Any, shown: str) -> None:
    assert clean(raw) == shown
    clean(raw).encode("utf-8")  # storable everywhere


def test_invalid_bytes_printed_by_a_task_reach_the_store(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "bin.db"))
    playbook = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: binary, path: t/binary}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import sys
        sys.stdout.write("bad \\udcff byte and \\x00 nul\\n")
        sys.stdout.buffer.write(b"raw \\xc3\\xa9 \\xff <b>\\n")
        result = 1
"""
    try:
        summary = run_embedded(_payload(playbook), store=store, execution_id="bin")
        assert summary["status"] == "completed"
        text = "".join(row["text"] for row in store.read_logs("bin"))
        assert text == "bad \\xff byte and \\x00 nul\nraw \u00e9 \\xff <b>\n"
    finally:
        store.close()


CHAIN = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: started, path: t/started}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    next: each
  - step: each
    loop: {in: [1, 2, 3, 4], iterator: n}
    tool: {kind: python, input: {n: "{{ iter.n }}"}, code: "result = n"}
    next: end
  - step: end
    tool: {kind: noop}
"""


def test_each_action_records_one_task_started_within_the_event_budget() -> None:
    store = MemoryStore()
    summary = run_embedded(_payload(CHAIN), store=store, execution_id="x")
    assert summary["status"] == "completed"
    events = store.read("x")
    started = [e for e in events if e["name"] == "task.started"]
    # one per action: the two plain steps and each of the four iterations
    assert sorted((e["step"], e["iteration"]) for e in started) == sorted(
        [("start", None), ("end", None)] + [("each", i) for i in range(4)]
    )
    for e in started:
        assert e["source"] == "worker" and e["payload"]["worker"] == "embedded"
        assert e["payload"]["call"] == 0 and e["attempt"] == 1
    for e in started:
        if e["step"] != "end":  # pool actions: handed over, then started
            assert e["payload"]["handed_at"] <= e["ts"]
    per_step: dict[tuple[str, Any], int] = {}
    for e in events:
        if e["step"] == "start":
            per_step[("start", None)] = per_step.get(("start", None), 0) + 1
        if e["step"] == "each" and e["iteration"] is not None:
            key = ("each", e["iteration"])
            per_step[key] = per_step.get(key, 0) + 1
    assert per_step[("start", None)] == 4  # scheduled, started, done, next.selected
    assert all(per_step[("each", i)] == 3 for i in range(4))  # iteration started, task, done
    # a task.started never reaches the control VM: the log still replays
    from noetlc.runtime.replay import check
    from noetlc.vm.loaded_program import LoadedProgram

    payload = _payload(CHAIN)
    report = check(LoadedProgram(payload), "x", dict(payload.get("workload") or {}), events)
    assert report.ok, report.divergence


def test_a_step_printing_megabytes_is_stored_cut_and_the_run_goes_on(tmp_path: Path) -> None:
    from noetlc.runtime.logs import PER_TASK

    store = SQLiteStore(str(tmp_path / "big.db"))
    playbook = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: loud, path: t/loud}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        for i in range(50000):
            print("x" * 100)
        result = "still fine"
"""
    try:
        summary = run_embedded(_payload(playbook), store=store, execution_id="loud")
        assert summary["status"] == "completed"
        assert summary["steps"]["start"]["result"] == "still fine"
        text = "".join(r["text"] for r in store.read_logs("loud", limit=5000))
        assert text.count("x") <= PER_TASK
        assert text.endswith("the rest is not kept]\n")
        assert len(text) < PER_TASK + 200
    finally:
        store.close()
