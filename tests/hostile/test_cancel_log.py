"""A cancel is one terminal event carrying the requester's reason: the iterations still
running when it arrives finish unrecorded (never after the terminal event), a second cancel
(the service sets the stop flag and stores the request) adds nothing, and the stored summary
keeps no step `running`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from noetlc.cli import vm_main
from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import SQLiteStore
from noetlc.runtime.logcheck import check_log, violations

NAPS = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: naps}
workload: {n: 200}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: each}]}
  - step: each
    loop: {in: "{{ range(workload.n) | list }}", iterator: x, spec: {mode: parallel, max_in_flight: 4}}
    tool:
      - name: nap
        kind: python
        input: {x: "{{ x }}"}
        code: |
          import time
          time.sleep(0.3)
          result = x
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
"""


def _payload() -> dict[str, Any]:
    unit = compile_source(NAPS, "naps.yaml")
    assert not unit.reporter.has_errors
    payload: dict[str, Any] = unit.payload
    return payload


def _done(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            (n,) = conn.execute(
                "SELECT COUNT(*) FROM events WHERE name = 'loop.iteration.done'"
            ).fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(n)


def _wait_done(db: Path, n: int) -> None:
    deadline = time.monotonic() + 60
    while _done(db) < n:
        assert time.monotonic() < deadline, "the loop never ran"
        time.sleep(0.02)


def _assert_one_cancel(store: SQLiteStore, execution: str, reason: str) -> None:
    events = store.read(execution)
    cancels = [e for e in events if e["name"] == "execution.cancelled"]
    assert len(cancels) == 1, [e["payload"] for e in cancels]
    assert cancels[0]["payload"]["reason"] == reason
    assert events[-1] is not None and events[-1]["seq"] == cancels[0]["seq"]  # nothing after
    record = store.execution(execution)
    assert record is not None and record["status"] == "cancelled"
    steps = record["summary"]["steps"]
    assert "running" not in {s["status"] for s in steps.values()}
    assert steps["each"]["status"] == "cancelled"
    assert check_log(execution, events, record["status"]) == []


def test_the_service_cancel_is_one_terminal_event_with_its_reason(tmp_path: Path) -> None:
    db = tmp_path / "noetl.db"
    store = SQLiteStore(str(db))
    stop = threading.Event()
    summary: dict[str, Any] = {}

    def run() -> None:
        summary.update(run_embedded(_payload(), store=store, execution_id="naps-1", stop=stop))

    thread = threading.Thread(target=run)
    thread.start()
    _wait_done(db, 6)
    other = SQLiteStore(str(db))
    # what the service's cancel does: the request with its reason, then the stop flag
    other.request("naps-1", "cancel", None, {"reason": "maintenance window"})
    stop.set()
    thread.join(60)
    assert summary["status"] == "cancelled"
    _assert_one_cancel(other, "naps-1", "maintenance window")
    other.close()
    store.close()


def test_cancel_cli_records_the_reason_and_nothing_after(tmp_path: Path) -> None:
    (tmp_path / "naps.yaml").write_text(NAPS)
    db = tmp_path / "noetl.db"
    url = f"sqlite:///{db}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "noetlc.cli.vm_main", "run", "naps.yaml", "--db", url, "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_done(db, 6)
        store = SQLiteStore(str(db))
        [record] = store.executions()
        execution = record["execution_id"]
        assert vm_main.main(["cancel", execution, "--reason", "wrong input", "--db", url]) == 0
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 3, err
        assert json.loads(out.splitlines()[-1])["status"] == "cancelled"
        _assert_one_cancel(store, execution, "wrong input")
        store.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cancel_now_ends_an_execution_whose_process_is_gone(tmp_path: Path) -> None:
    (tmp_path / "naps.yaml").write_text(NAPS)
    db = tmp_path / "noetl.db"
    url = f"sqlite:///{db}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "noetlc.cli.vm_main", "run", "naps.yaml", "--db", url, "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_done(db, 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = SQLiteStore(str(db))
    [record] = store.executions()
    execution = record["execution_id"]
    assert record["status"] == "running"
    assert vm_main.main(["cancel", execution, "--now", "--reason", "gone", "--db", url]) == 0
    events = store.read(execution)
    assert [e["name"] for e in events].count("execution.cancelled") == 1
    assert events[-1]["name"] == "execution.cancelled"
    assert events[-1]["payload"]["reason"] == "gone"
    assert violations(store) == []
    assert vm_main.main(["cancel", execution, "--now", "--db", url]) == 4  # already ended
    store.close()
