"""Split brain, with real processes: `noetl-vm run` is stopped (SIGSTOP) past its lease,
`noetl-vm resume` takes the execution over, then the old process is continued (SIGCONT). The
old process must stop at its next commit (NOE833, exit 4) and write nothing: every iteration is
recorded once, the final step runs once, and the log keeps its invariants."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from noetlc.runtime.event_store import SQLiteStore
from noetlc.runtime.logcheck import violations

TTL = 1.0  # NOETL_LEASE_TTL for both processes: the takeover needs no 15 s wait

LOOPING = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: split_brain}
workload: {n: 300, marks: marks.txt}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: each}]}
  - step: each
    loop: {in: "{{ range(workload.n) | list }}", iterator: x, spec: {mode: parallel, max_in_flight: 4}}
    tool:
      - name: work
        kind: python
        input: {x: "{{ x }}"}
        code: |
          import time
          time.sleep(0.01)
          result = x
    next: {arcs: [{step: final}]}
  - step: final
    tool:
      - name: mark
        kind: python
        input: {marks: "{{ workload.marks }}"}
        code: |
          with open(marks, "a") as f:
              f.write("final\\n")
          result = 1
"""


def _vm(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "NOETL_LEASE_TTL": str(TTL)}
    return subprocess.Popen(
        [sys.executable, "-m", "noetlc.cli.vm_main", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _count(db: Path, name: str) -> int:
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            (n,) = conn.execute("SELECT COUNT(*) FROM events WHERE name = ?", (name,)).fetchone()
    except sqlite3.OperationalError:  # the store is being created
        return 0
    return int(n)


def _stop_outside_a_write(proc: subprocess.Popen[str], db: Path) -> None:
    """SIGSTOP `proc` at a moment it holds no SQLite write lock: stopped inside a write, it
    would keep every other process from writing until continued (the takeover stops with
    NOE814 then, test_vm_store.py), which is not the split brain this file is about."""
    for _ in range(200):
        os.kill(proc.pid, signal.SIGSTOP)
        probe = sqlite3.connect(db, timeout=0.05, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:  # it was stopped inside a write: let it finish
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.01)
        finally:
            probe.close()
    raise AssertionError("the process was inside a write every time it was stopped")


def _wait(predicate: object, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.02)


@pytest.mark.parametrize("continued", ["after_the_new_owner_ended", "while_it_runs"])
def test_a_process_that_lost_its_execution_writes_nothing_more(
    tmp_path: Path, continued: str
) -> None:
    (tmp_path / "loop.yaml").write_text(LOOPING)
    db = tmp_path / "noetl.db"
    url = f"sqlite:///{db}"
    old = _vm("run", "loop.yaml", "--db", url, "--quiet", cwd=tmp_path)
    resumed: subprocess.Popen[str] | None = None
    try:
        _wait(lambda: db.exists() and _count(db, "loop.iteration.done") >= 40, "40 iterations")
        _stop_outside_a_write(old, db)
        store = SQLiteStore(str(db))
        [record] = store.executions()
        execution = record["execution_id"]
        time.sleep(TTL * 2.5)  # the heartbeat is stale: the owner is dead to `resume`
        resumed = _vm("resume", execution, "--db", url, "--quiet", cwd=tmp_path)
        if continued == "after_the_new_owner_ended":
            _, err = resumed.communicate(timeout=120)
            assert resumed.returncode == 0, err
        else:
            _wait(
                lambda: _count(db, "execution.resumed") == 1 or resumed.poll() is not None,
                "the takeover",
            )
            assert _count(db, "execution.resumed") == 1, resumed.communicate()[1]
        before = len(store.read(execution)) if continued != "while_it_runs" else None
        os.kill(old.pid, signal.SIGCONT)
        _, old_err = old.communicate(timeout=60)
        assert old.returncode == 4, old_err
        assert "error[NOE833]" in old_err and execution in old_err
        if before is not None:
            assert len(store.read(execution)) == before  # the old process wrote nothing
        if continued == "while_it_runs":
            _, err = resumed.communicate(timeout=120)
            assert resumed.returncode == 0, err
        events = store.read(execution)
        done = [
            (e["step_run_id"], e["iteration"]) for e in events if e["name"] == "loop.iteration.done"
        ]
        assert len(done) == len(set(done)) == 300  # every iteration recorded once
        assert (tmp_path / "marks.txt").read_text() == "final\n"  # the final step ran once
        assert store.execution(execution)["status"] == "completed"  # type: ignore[index]
        assert violations(store) == []
        store.close()
    finally:
        for proc in (old, resumed):
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
                proc.wait()
