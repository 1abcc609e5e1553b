"""An embedded execution has one owner: `resume` refuses a live `run` (naming its pid and
host) and takes over a dead one, with real processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from noetlc.cli import vm_main
from noetlc.runtime.event_store import SQLiteStore
from noetlc.runtime.ownership import ExecutionLease, Owner
from noetlc.runtime.postgres.cluster_testing import run_vm

# the first run of `nap` leaves a marker and sleeps; a resumed run finds the marker and ends
NAPPING = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: napping}
workload: {marker: marker.txt}
workflow:
  - step: start
    tool:
      - name: nap
        kind: python
        input: {marker: "{{ workload.marker }}"}
        code: |
          import os, time
          if not os.path.exists(marker):
              open(marker, "w").close()
              time.sleep(120)
          result = {"slept": True}
"""


def _wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_resume_refuses_a_live_owner_and_takes_over_a_dead_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "napping.yaml").write_text(NAPPING)
    db_path = tmp_path / "noetl.db"
    db = f"sqlite:///{db_path}"
    proc = run_vm("run", "napping.yaml", "--db", db, "--json", cwd=tmp_path)
    try:
        _wait_for(tmp_path / "marker.txt")
        store = SQLiteStore(str(db_path))
        [record] = store.executions()
        store.close()
        execution = record["execution_id"]
        assert vm_main.main(["resume", execution[:8], "--db", db]) == 4
        err = capsys.readouterr().err
        assert f"error[NOE831]: execution {execution} is running in process {proc.pid}" in err
        assert f"on {socket.gethostname()}" in err
        assert proc.poll() is None  # the refusal did not disturb the owner
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert vm_main.main(["resume", execution, "--json", "--db", db]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["status"] == "completed"
    assert summary["steps"]["start"]["result"] == {"slept": True}
    assert ExecutionLease(str(db_path), execution).owner() is None  # released at the end


def test_a_stale_heartbeat_is_a_dead_owner_even_when_the_pid_exists() -> None:
    now = time.time()
    here = socket.gethostname()
    assert Owner(os.getpid(), here, now).alive(15.0, now)
    assert not Owner(os.getpid(), here, now - 60).alive(15.0, now)  # a reused pid
    assert Owner(os.getpid(), "elsewhere", now - 5).alive(15.0, now)  # trust the heartbeat
    assert not Owner(2**22 + 12345, here, now).alive(15.0, now)  # no such process


def test_a_finished_run_leaves_no_owner(tmp_path: Path) -> None:
    db_path = tmp_path / "n.db"
    (tmp_path / "g.yaml").write_text(NAPPING.replace("time.sleep(120)", "pass"))
    assert vm_main.main(["run", str(tmp_path / "g.yaml"), "--quiet", "--db", f"sqlite:///{db_path}",
                         "--set", f"marker={tmp_path / 'm'}"]) == 0  # fmt: skip
    store = SQLiteStore(str(db_path))
    [record] = store.executions()
    store.close()
    assert ExecutionLease(str(db_path), record["execution_id"]).owner() is None
