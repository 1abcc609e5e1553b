"""The NoETL command-line client from PyPI (`noetl` 5.3.2, in its own virtualenv, installed
like the benchmark's peers) against `noetl-vm serve`: register, list, get, run, status,
cancel, credentials — embedded (SQLite) and distributed (PostgreSQL with a server and a
worker process). Outside CI a missing client (no network) skips; under CI it fails. Each run
writes its session transcript to the test artifacts folder."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from noetlc.runtime.credentials import new_key
from noetlc.runtime.postgres.testing import must_not_skip
from noetlc.service.serving import Served, artifacts_dir

pytestmark = [pytest.mark.noetl_client, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
LISTENER = REPO / "tests" / "vm" / "playbooks" / "listener.yaml"


@pytest.fixture(scope="module")
def client_bin() -> Path:
    from noetlc.bench.peers import PeerUnavailable, ensure

    try:
        python = ensure("NoETL client 5.3.2")
    except PeerUnavailable as exc:
        if must_not_skip():
            pytest.fail(f"the NoETL client cannot be installed: {exc} (CI=true)")
        pytest.skip(f"the NoETL client cannot be installed: {exc}")
    return python.parent / "noetl"


class Session:
    def __init__(self, binary: Path, served: Served, home: Path, transcript: Path) -> None:
        self.binary = binary
        self.served = served
        self.env = {**os.environ, "HOME": str(home), "NO_COLOR": "1"}
        self.env.pop("NOETL_SESSION_TOKEN", None)
        self.transcript = transcript
        self.lines: list[str] = []

    def __call__(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        command = [
            str(self.binary),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.served.port),
            *args,
        ]
        result = subprocess.run(
            command, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=120
        )
        shown = " ".join(["noetl", "--host", "127.0.0.1", "--port", "PORT", *args])
        self.lines += [
            f"$ {shown}",
            result.stdout.rstrip(),
            result.stderr.rstrip(),
            f"[exit {result.returncode}]",
            "",
        ]
        self.transcript.write_text("\n".join(self.lines), encoding="utf-8")
        return result


def _mode_url(mode: str, tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[str]]]]:
    if mode == "embedded":
        yield f"sqlite:///{tmp_path / 'noetl.db'}", []
        return
    from noetlc.runtime.postgres.cluster_testing import Cluster
    from noetlc.runtime.postgres.testing import dsn_or_skip, temporary_schema

    dsn_or_skip()
    with temporary_schema("noetl_client") as url:
        cluster = Cluster(url, tmp_path)
        cluster.server()
        cluster.worker()
        try:
            yield url, cluster.procs
        finally:
            cluster.stop()


@pytest.mark.parametrize("mode", ["embedded", "distributed"])
def test_the_noetl_client_drives_the_service(client_bin: Path, tmp_path: Path, mode: str) -> None:
    (tmp_path / "home").mkdir()
    for db, _procs in _mode_url(mode, tmp_path):
        # the client's `get credential` asks for the value: this service allows it
        served = Served(db, tmp_path, new_key(), extra=["--credential-values"])
        try:
            noetl = Session(
                client_bin, served, tmp_path / "home", artifacts_dir() / f"noetl-client-{mode}.txt"
            )
            _session(noetl, tmp_path)
        finally:
            served.stop()


def _session(noetl: Session, tmp_path: Path) -> None:
    hello = tmp_path / "hello.yaml"
    hello.write_text((REPO / "examples" / "hello.yaml").read_text(), encoding="utf-8")
    (tmp_path / "listener.yaml").write_text(LISTENER.read_text(), encoding="utf-8")

    first = noetl("register", "playbook", "--file", "hello.yaml", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert '"version":1' in first.stdout and "Playbook registered successfully" in first.stdout
    hello.write_text(hello.read_text().replace("name: world", "name: client"), encoding="utf-8")
    second = noetl("register", "playbook", "--file", "hello.yaml", cwd=tmp_path)
    assert '"version":2' in second.stdout
    listed = noetl("catalog", "list", "Playbook", "--json", cwd=tmp_path)
    assert listed.returncode == 0
    entries = json.loads(listed.stdout.strip().splitlines()[-1])["entries"]
    assert sorted(e["version"] for e in entries) == [1, 2]
    got = noetl("catalog", "get", "examples/hello", cwd=tmp_path)
    assert '"version": 2' in got.stdout

    run = noetl(
        "run", "examples/hello", "-r", "distributed", "--set", "name=noetl", "--json", cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    execution_id = json.loads(run.stdout.strip().splitlines()[-1])["execution_id"]
    status = _wait(noetl, execution_id, tmp_path)
    assert status["completed"] and not status["failed"]
    assert status["completed_steps"] == ["start", "shout"]
    shown = noetl("status", execution_id, cwd=tmp_path)
    assert "COMPLETED" in shown.stdout and "Steps:     2 completed" in shown.stdout

    v1 = noetl("run", "catalog://examples/hello@1", "-r", "distributed", "--json", cwd=tmp_path)
    assert v1.returncode == 0, v1.stderr
    assert json.loads(v1.stdout.strip().splitlines()[-1])["version"] == 1

    assert noetl("register", "playbook", "--file", "listener.yaml", cwd=tmp_path).returncode == 0
    waiting = noetl("run", "tests/listener", "-r", "distributed", "--json", cwd=tmp_path)
    waiting_id = json.loads(waiting.stdout.strip().splitlines()[-1])["execution_id"]
    running = noetl("status", waiting_id, cwd=tmp_path)
    assert "RUNNING" in running.stdout
    cancel = noetl("cancel", waiting_id, "--reason", "test", "--json", cwd=tmp_path)
    assert cancel.returncode == 0, cancel.stderr
    assert json.loads(cancel.stdout.strip().splitlines()[-1])["status"] == "cancelled"
    final = _wait(noetl, waiting_id, tmp_path)
    assert final["status"] == "CANCELLED"

    (tmp_path / "pg.json").write_text(
        json.dumps({"name": "pg_local", "type": "postgres", "data": {"password": "s3cret-pw"}}),
        encoding="utf-8",
    )
    cred = noetl("register", "credential", "--file", "pg.json", cwd=tmp_path)
    assert cred.returncode == 0 and "s3cret-pw" not in cred.stdout
    shown_cred = noetl("get", "credential", "pg_local", cwd=tmp_path)
    assert "s3cret-pw" in shown_cred.stdout

    bulk = tmp_path / "bulk"
    bulk.mkdir()
    child = (REPO / "tests" / "vm" / "playbooks" / "child" / "double.yaml").read_text()
    (bulk / "double.yaml").write_text(child, encoding="utf-8")
    (bulk / "broken.yaml").write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: b}\nworkflow: 3\n"
    )
    loaded = noetl("catalog", "load", "bulk", cwd=tmp_path)
    assert "ok   " in loaded.stdout and "FAIL" in loaded.stdout and loaded.returncode == 1
    assert "registered 1, failed 1" in loaded.stdout
    legacy = noetl("list", "Playbook", cwd=tmp_path)
    assert "tests/child/double" in legacy.stdout

    missing = noetl("status", "999", cwd=tmp_path)
    assert missing.returncode == 0 and "404" in missing.stderr
    unknown = noetl("run", "no/such/playbook", "-r", "distributed", cwd=tmp_path)
    assert unknown.returncode == 1 and "404" in unknown.stderr
    _rest_of_the_client(noetl, tmp_path, execution_id)


def _rest_of_the_client(noetl: Session, tmp_path: Path, execution_id: str) -> None:
    """`db validate|init`, `ehdb query ...`, `query SQL`: NoETL's answers are JSON or tables."""
    validated = noetl("db", "validate", cwd=tmp_path)
    assert validated.returncode == 0 and '"valid": true' in validated.stdout, validated
    initialized = noetl("db", "init", cwd=tmp_path)
    assert initialized.returncode == 0 and '"status": "ok"' in initialized.stdout
    listed = noetl("ehdb", "query", "executions", "--status", "COMPLETED", cwd=tmp_path)
    assert listed.returncode == 0 and execution_id in listed.stdout
    state = noetl("ehdb", "query", "execution", execution_id, "--json", cwd=tmp_path)
    assert state.returncode == 0 and '"exists": true' in state.stdout
    events = noetl("ehdb", "query", "events", execution_id, "--limit", "3", cwd=tmp_path)
    assert events.returncode == 0 and "step" in events.stdout
    rows = noetl(
        "query",
        f"SELECT execution_id, status FROM executions WHERE execution_id = '{execution_id}'",
        cwd=tmp_path,
    )
    assert rows.returncode == 0 and execution_id in rows.stdout and "completed" in rows.stdout
    as_json = noetl(
        "query", "SELECT count(*) AS n FROM executions", "--format", "json", cwd=tmp_path
    )
    assert as_json.returncode == 0 and '"n"' in as_json.stdout and '"result"' in as_json.stdout
    written = noetl("query", "DELETE FROM executions", cwd=tmp_path)
    assert "NOE883" in written.stdout + written.stderr
    still = noetl("query", "SELECT count(*) AS n FROM executions", "--format", "json", cwd=tmp_path)
    assert still.stdout == as_json.stdout  # nothing was deleted


def _wait(noetl: Session, execution_id: str, cwd: Path, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        result = noetl("status", execution_id, "--json", cwd=cwd)
        status: dict = json.loads(result.stdout.strip().splitlines()[-1])
        if status.get("completed"):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
