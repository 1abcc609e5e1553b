"""`noetl-vm run --json` writes the whole summary line to a pipe, however large and however
slowly the reader reads (after the event loop has run, a large write can come back short)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def test_a_large_summary_reaches_a_slow_reader_whole(tmp_path: Path) -> None:
    playbook = tmp_path / "big.yaml"
    playbook.write_text(
        "workflow:\n  - step: start\n    tool: {kind: python, code: \"result = 'A' * 300000\"}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "noetlc.cli.vm_main", "run", str(playbook), "--json", "--quiet",
         "--db", "memory:"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
    )  # fmt: skip
    time.sleep(3)  # let the writer fill the pipe before anything is read
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    summary = json.loads(out.decode().strip().splitlines()[-1])
    assert summary["result"] == "A" * 300000
