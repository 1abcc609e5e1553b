"""Test support: real `noetl-vm` server and worker processes on one PostgreSQL schema.

`Cluster` starts servers and workers as subprocesses (stopped with SIGTERM, then SIGKILL), and
submits playbooks through `noetl-vm submit`. Each cluster names its connections
`<application_name>_server` / `_worker`, so a test can terminate this cluster's backends
without touching anyone else's.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from noetlc.runtime.postgres.store import PostgresStore


def run_vm(*args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
    """`python -m noetlc.cli.vm_main ARGS...` with captured text output."""
    return subprocess.Popen(
        [sys.executable, "-m", "noetlc.cli.vm_main", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class Cluster:
    def __init__(self, url: str, tmp: Path) -> None:
        self.url = url
        self.tmp = tmp
        self.procs: list[subprocess.Popen[str]] = []
        self.application_name = f"noetl_test_{uuid.uuid4().hex[:12]}"

    def name_of(self, role: str) -> str:
        return f"{self.application_name}_{role}"

    def url_for(self, role: str) -> str:
        joiner = "&" if "?" in self.url else "?"
        return f"{self.url}{joiner}application_name={self.name_of(role)}"

    def server(self, ttl: float = 2.0, poll: float = 0.2, *extra: str) -> subprocess.Popen[str]:
        url = self.url_for("server")
        proc = run_vm(
            "server", *extra, "--db", url, "--ttl", str(ttl), "--poll", str(poll), cwd=self.tmp
        )
        self.procs.append(proc)
        return proc

    def worker(self, concurrency: int = 4, ttl: float = 2.0, *extra: str) -> subprocess.Popen[str]:
        proc = run_vm(
            "worker",
            *extra,
            "--db",
            self.url_for("worker"),
            "--concurrency",
            str(concurrency),
            "--ttl",
            str(ttl),
            "--poll",
            "0.2",
            "--grace",
            "1",
            cwd=self.tmp,
        )
        self.procs.append(proc)
        return proc

    def submit(
        self, playbook: Path, *sets: str, wait: bool = True, timeout: float = 90
    ) -> dict[str, Any]:
        """`noetl-vm submit --json`: the summary (with `wait`) or the started execution."""
        args = ["submit", str(playbook), "--db", self.url, "--json"]
        for item in sets:
            args += ["--set", item]
        if wait:
            args += ["--wait", "--timeout", str(timeout)]
        proc = run_vm(*args, cwd=self.tmp)
        out, err = proc.communicate(timeout=timeout + 30)
        assert out.strip(), err
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def events(self, execution_id: str) -> list[dict[str, Any]]:
        store = PostgresStore(self.url)
        try:
            return store.read(execution_id)
        finally:
            store.close()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
