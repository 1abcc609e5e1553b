"""The service engine's worker threads (service/engine.py): an execution runs on a thread of
its own while it runs, and the thread (with its store connection) is kept for the next."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.stored_program import encode_program
from noetlc.service.engine import Engine
from noetlc.vm.protocol import TERMINAL_NAMES

REPO = Path(__file__).resolve().parents[2]
ONE_STEP = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: one, path: tests/one}
workflow:
  - step: start
    tool: {kind: noop}
"""


def _program(text: str) -> bytes:
    unit = compile_source(text)
    assert unit.payload is not None
    return encode_program(unit.payload)


def _workers() -> int:
    return sum(t.name == "execution-worker" and t.is_alive() for t in threading.enumerate())


def _wait_ended(engine: Engine, execution_id: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        record = engine.execution(execution_id)
        if record is not None and record["status"] != "running":
            return str(record["status"])
        assert time.monotonic() < deadline, f"{execution_id} did not end"
        time.sleep(0.01)


def test_a_waiting_execution_holds_its_worker_and_the_others_reuse_one(tmp_path: Path) -> None:
    before = _workers()
    engine = Engine(f"sqlite:///{tmp_path / 'noetl.db'}")
    try:
        listener = (REPO / "tests" / "vm" / "playbooks" / "listener.yaml").read_text()
        waiting = engine.start(_program(listener), "listener", {})
        program = _program(ONE_STEP)
        ids = []
        for _ in range(20):  # one after another: an idle worker takes each
            ids.append(engine.start(program, "one", {}))
            assert _wait_ended(engine, ids[-1]) == "completed"
            run, _stop = engine._running.get(ids[-1], (None, None))
            if run is not None:
                run.join(10)
        assert _workers() - before <= 3  # the listener's, and one or two for the rest
        assert engine.running_here(waiting)
        record = engine.execution(waiting)
        assert record is not None and record["status"] == "running"
        engine.cancel(waiting, "test")
        assert _wait_ended(engine, waiting) == "cancelled"
        for execution_id in [waiting, *ids]:  # one terminal event, last; seq without gaps
            events = engine.events(execution_id)
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert [e["name"] in TERMINAL_NAMES for e in events].count(True) == 1
            assert events[-1]["name"] in TERMINAL_NAMES
    finally:
        engine.close()
    deadline = time.monotonic() + 10
    while _workers() > before:  # closed: the idle workers leave
        assert time.monotonic() < deadline, "idle workers stayed after close"
        time.sleep(0.01)
