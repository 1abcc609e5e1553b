"""A long loop's iteration results go to the result store in chunks (vm/loop_results.py): the
control VM holds a bounded number of them, the loop's result is a stored reference assembled
from the chunks, and every reader sees the same values as before — guards, tool arguments,
the summary, a replay and a resumed execution. CHUNK is made small so the loops stay short."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main
from noetlc.compiler.pipeline import compile_source
from noetlc.expr.runtime import REF_KEY
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore, SQLiteStore
from noetlc.runtime.results import ResultSpill
from noetlc.vm import loop_results
from noetlc.vm.loop_results import LoopResults

LOOP = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: long_loop}
workload: {n: 45}
workflow:
  - step: each
    loop:
      in: "{{ range(workload.n) | list }}"
      iterator: x
      spec: {mode: parallel, max_in_flight: 5, SPEC}
    tool: TOOL
    next:
      arcs:
        - step: check
          when: "{{ each.stats.total > 0 and (each.results | length) == LENGTH }}"
  - step: check
    tool:
      kind: python
      input: {values: "{{ each.results }}", failed: "{{ each.stats.failed }}"}
      code: "result = [sum(v['x'] for v in values if v), failed]"
"""
NOOP = '{kind: noop, result: {x: "{{ iter.x }}"}}'


def _playbook(spec: str = "", tool: str = NOOP, length: int = 45) -> dict[str, Any]:
    text = LOOP.replace("SPEC", spec).replace("TOOL", tool).replace("LENGTH", str(length))
    unit = compile_source(text, "long_loop.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    return unit.payload


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_results, "CHUNK", 8)


def _stored(db: Path) -> int:
    store = SQLiteStore(str(db))
    try:
        return int(store._db.execute("SELECT count(*) FROM results").fetchone()[0])
    finally:
        store.close()


def test_a_long_loop_spills_its_results_and_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "noetl.db"
    store = SQLiteStore(str(db))
    summary = run_embedded(_playbook(), store=store, execution_id="long-1")
    store.close()
    assert summary["status"] == "completed", summary["error"]
    # guards, tool arguments and the summary read the values they read unchunked
    monkeypatch.setattr(loop_results, "CHUNK", 1000)
    kept = run_embedded(_playbook(), store=MemoryStore(), execution_id="long-2")
    assert summary["steps"] == kept["steps"]
    assert summary["steps"]["check"]["result"] == [sum(range(45)), 0]
    assert summary["steps"]["each"]["result"]["results"] == [{"x": x} for x in range(45)]
    assert _stored(db) >= 45 // 8 + 1  # the complete chunks, and the loop's result
    assert vm_main.main(["replay", "long-1", "--db", f"sqlite:///{db}"]) == 0


def test_failed_iterations_fill_their_slots(tmp_path: Path) -> None:
    failing = (
        '{kind: python, input: {x: "{{ iter.x }}"},'
        " code: \"if x % 7 == 3:\\n    raise ValueError(x)\\nresult = {'x': x}\"}"
    )
    store = SQLiteStore(str(tmp_path / "noetl.db"))
    summary = run_embedded(
        _playbook("on_error: continue", failing), store=store, execution_id="failing"
    )
    results = summary["steps"]["each"]["result"]["results"]
    assert results == [None if x % 7 == 3 else {"x": x} for x in range(45)]
    assert summary["steps"]["check"]["result"] == [
        sum(x for x in range(45) if x % 7 != 3),
        len([x for x in range(45) if x % 7 == 3]),
    ]
    store.close()


def test_truncated_chunks_keep_the_first_slots() -> None:
    spill = ResultSpill(MemoryStore())
    results = LoopResults(20, spill)
    for index in range(20):
        results[index] = index
    assert [isinstance(c, str) for c in results.chunks.values()] == [True, True, True]
    cut = results.truncated(11)  # stop_when ended the loop: a stored chunk is cut
    ref = cut.result({"total": 11})[REF_KEY]
    value = json.loads(spill.store.get_result(ref["key"]) or b"null")
    assert value == {"results": list(range(11)), "stats": {"total": 11}}
    assert ref["key"] in spill.joined


def test_the_loop_result_has_the_key_of_its_json() -> None:
    """The assembled text is what `encode_payload` gives for the value: the same key as any
    other way of storing that value (a replay, a summary stored by reference)."""
    import hashlib

    from noetlc.runtime.event_store import encode_payload

    spill = ResultSpill(MemoryStore())
    results = LoopResults(19, spill)
    for index in range(19):
        results[index] = {"i": index, "s": "é"}
    ref = results.result({"total": 19, "success": 19, "failed": 0})[REF_KEY]
    value = {
        "results": [{"i": i, "s": "é"} for i in range(19)],
        "stats": {"total": 19, "success": 19, "failed": 0},
    }
    assert ref["key"] == hashlib.sha256(encode_payload(value).encode()).hexdigest()


def test_the_chunks_in_memory_stay_bounded() -> None:
    """Results arriving out of order within a window (parallel iterations) keep at most the
    chunks that window spans in memory, however long the loop."""
    spill = ResultSpill(MemoryStore())
    results = LoopResults(8 * 100, spill)
    window = 5
    most = 0
    for start in range(0, 800, window):  # each window's results in reverse order
        for index in reversed(range(start, start + window)):
            results[index] = {"i": index}
            in_memory = [c for c in results.chunks.values() if isinstance(c, list)]
            most = max(most, len(in_memory))
    assert most <= 2
    assert all(isinstance(c, str) for c in results.chunks.values())
