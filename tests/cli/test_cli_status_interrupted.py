"""`status` of an embedded execution whose process died: not shown as running, but as
`interrupted` with the `noetl-vm resume ID` that finishes it (text and JSON), while a live
run is still `running`."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from noetlc.cli import vm_main
from noetlc.runtime.postgres.cluster_testing import run_vm

NAPPING = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: napping}
workload: {marker: marker.txt}
workflow:
  - step: start
    tool:
      kind: python
      input: {marker: "{{ workload.marker }}"}
      code: |
        import time
        open(marker, "w").close()
        time.sleep(120)
        result = 1
"""


def _wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_an_execution_whose_process_died_is_interrupted_with_a_resume_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "napping.yaml").write_text(NAPPING, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'noetl.db'}"
    proc = run_vm("run", "napping.yaml", "--db", db, cwd=tmp_path)
    try:
        _wait_for(tmp_path / "marker.txt")
        assert vm_main.main(["status", "--db", db]) == 0
        live = capsys.readouterr()
        assert "  running  " in live.out and "interrupted" not in live.out + live.err
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert vm_main.main(["status", "--db", db]) == 0
    listed = capsys.readouterr()
    [line] = listed.out.strip().splitlines()
    execution = line.split()[0]
    assert line.split()[1] == "interrupted"
    assert "noetl-vm resume ID" in listed.err
    assert vm_main.main(["status", execution, "--db", db]) == 0
    shown = capsys.readouterr().out
    assert f"pid {proc.pid}" in shown and f"noetl-vm resume {execution}" in shown
    assert vm_main.main(["status", "--json", "--db", db]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["status"] == "running" and row["interrupted"] is True
    assert row["dead_owner"]["pid"] == proc.pid
