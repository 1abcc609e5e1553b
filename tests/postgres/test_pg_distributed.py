"""Distributed mode with real processes: servers, workers and submit on one PostgreSQL.

Every conformance case gives the same summary as embedded mode; chaos: a SIGKILLed worker
and a SIGKILLed server mid-execution; concurrent workers never run a job twice; bad URLs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from noetlc.compiler.pipeline import compile_file
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.postgres.cluster_testing import Cluster
from noetlc.runtime.postgres.cluster_testing import run_vm as _vm
from noetlc.runtime.postgres.event_store import PostgresStore
from noetlc.vm.protocol import folded_task
from tests.conftest import CONFORMANCE

HERE = Path(__file__).resolve().parent
PLAYBOOKS = HERE.parent / "vm" / "playbooks"
CASES = sorted(CONFORMANCE.glob("c[0-9][0-9]_*[!t].yaml"))


def _sets(case: Path) -> list[str]:
    expect = yaml.safe_load(case.with_name(case.stem + ".expect.yaml").read_text())
    return [f"{k}={json.dumps(v)}" for k, v in (expect.get("set") or {}).items()]


def _comparable(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": summary["status"],
        "steps": summary["steps"],
        "ctx": summary["ctx"],
        "error": (summary["error"] or {}).get("code"),
    }


def test_conformance_cases_match_embedded_mode(cluster: Cluster) -> None:
    cluster.server()
    cluster.worker()
    cluster.worker()
    for case in CASES:
        sets = _sets(case)
        distributed = cluster.submit(case, *sets)
        overrides = {k: json.loads(v) for k, v in (s.split("=", 1) for s in sets)}
        embedded = run_embedded(compile_file(str(case)).payload, overrides)
        assert _comparable(distributed) == _comparable(embedded), case.name


def _invocations(log: Path) -> Counter[str]:
    return Counter(log.read_text().splitlines()) if log.exists() else Counter()


def _wait_for(predicate: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _task_done_before(url: str, execution_id: str) -> set[tuple[int, str]]:
    store = PostgresStore(url)
    try:
        return {
            (e["iteration"], e["payload"]["task"])
            for e in store.read(execution_id)
            if e["name"] == "task.done" and e.get("source") == "worker"
        }
    finally:
        store.close()


def _latest_execution(url: str) -> str:
    store = PostgresStore(url)
    try:
        return str(store.executions()[-1]["execution_id"])
    finally:
        store.close()


def _check_crash_run(cluster: Cluster, log: Path, execution_id: str, done: set[Any]) -> None:
    store = PostgresStore(cluster.url)
    try:
        _wait_for(lambda: store.execution(execution_id)["status"] != "running", 120)  # type: ignore[index]
        record = store.execution(execution_id)
        events = store.read(execution_id)
    finally:
        store.close()
    assert record is not None and record["status"] == "completed", record
    assert record["summary"]["steps"]["total"]["result"] == sum(n * 2 + 1 for n in range(20))
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    calls = _invocations(log)
    for iteration, task in done:
        assert calls[f"{task} {iteration}"] == 1, f"{task} {iteration} ran again"
    for n in range(20):
        for task in ("first", "second"):
            assert 1 <= calls[f"{task} {n}"] <= 2
    terminal = Counter(
        e["action_id"]
        for e in events
        if e["name"].startswith("loop.iteration.") and e["name"] != "loop.iteration.started"
    )
    assert len(terminal) == 20


def test_sigkill_a_worker_mid_task(cluster: Cluster, tmp_path: Path) -> None:
    log = tmp_path / "invocations.log"
    cluster.server()
    victim = cluster.worker(concurrency=1)
    cluster.submit(PLAYBOOKS / "crash_loop.yaml", f"log={log}", wait=False)
    _wait_for(lambda: sum(_invocations(log).values()) >= 9)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    execution_id = _latest_execution(cluster.url)
    done = _task_done_before(cluster.url, execution_id)
    assert done
    cluster.worker(concurrency=1)  # the job is leased again once the dead lease expires
    _check_crash_run(cluster, log, execution_id, done)


def test_sigkill_a_server_mid_execution(cluster: Cluster, tmp_path: Path) -> None:
    log = tmp_path / "invocations.log"
    victim = cluster.server()
    cluster.worker(concurrency=1)
    cluster.submit(PLAYBOOKS / "crash_loop.yaml", f"log={log}", wait=False)
    _wait_for(lambda: sum(_invocations(log).values()) >= 9)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    execution_id = _latest_execution(cluster.url)
    done = _task_done_before(cluster.url, execution_id)
    cluster.server()  # takes the execution over when the dead server's lease expires
    _check_crash_run(cluster, log, execution_id, done)


def test_concurrent_workers_never_run_a_job_twice(cluster: Cluster, tmp_path: Path) -> None:
    cluster.server()
    for _ in range(3):
        # leases long enough never to expire here: a lease that expires (a worker starved of
        # the CPU past its TTL) is run again by design, which is not what this test is about
        cluster.worker(concurrency=4, ttl=60.0)
    playbook = tmp_path / "wide.yaml"
    playbook.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: wide, path: t/wide}\n"
        f"workload: {{items: {list(range(60))}, log: {str(tmp_path / 'calls.log')!r}}}\n"
        "workflow:\n  - step: start\n"
        '    loop: {in: "{{ workload.items }}", iterator: n, spec: {mode: parallel,'
        " max_in_flight: 12}}\n"
        "    tool:\n      kind: python\n"
        '      input: {n: "{{ iter.n }}", log: "{{ workload.log }}"}\n'
        "      code: |\n"
        "        with open(log, 'a') as fh:\n"
        "            fh.write(f'{n}\\n')\n"
        "        result = n\n"
    )
    summary = cluster.submit(playbook)
    assert summary["status"] == "completed"
    assert summary["steps"]["start"]["result"]["results"] == list(range(60))
    calls = Counter((tmp_path / "calls.log").read_text().split())
    assert calls == Counter(str(n) for n in range(60))  # every item exactly once


def test_cancel_and_signal_through_the_database(cluster: Cluster) -> None:
    cluster.server()
    cluster.worker()
    started = cluster.submit(PLAYBOOKS / "listener.yaml", wait=False)
    execution_id = started["execution_id"]
    proc = _vm("signal", execution_id, "approve", "--data", '{"user": "ada"}', "--db", cluster.url)
    assert proc.wait(timeout=60) == 0
    store = PostgresStore(cluster.url)
    try:
        _wait_for(lambda: store.execution(execution_id)["status"] != "running")  # type: ignore[index]
        record = store.execution(execution_id)
        assert record is not None
        assert record["summary"]["steps"]["approved"]["result"] == {"approved_by": "ada"}
    finally:
        store.close()
    started = cluster.submit(PLAYBOOKS / "listener.yaml", wait=False)
    proc = _vm("cancel", started["execution_id"], "--db", cluster.url)
    assert proc.wait(timeout=60) == 0
    store = PostgresStore(cluster.url)
    try:
        _wait_for(lambda: store.execution(started["execution_id"])["status"] != "running")  # type: ignore[index]
        assert store.execution(started["execution_id"])["status"] == "cancelled"  # type: ignore[index]
    finally:
        store.close()
    replay = _vm("replay", execution_id, "--db", cluster.url, "--json")
    out, err = replay.communicate(timeout=60)
    assert replay.returncode == 0, out + err
    assert json.loads(out)["ok"]


def test_sigkill_a_worker_mid_round_of_inline_jobs(cluster: Cluster, tmp_path: Path) -> None:
    # noop iterations run inline inside the worker's round transaction (the server is told
    # to enqueue them rather than run them itself): a worker killed in it must leave nothing
    # half-done (its picks go back to the queue, their events were not committed) and the
    # rerun must log every iteration once
    n = 5000
    playbook = tmp_path / "wide.yaml"
    playbook.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: wide, path: tests/wide}\n"
        f"workload: {{items: {list(range(n))}}}\n"
        "workflow:\n  - step: start\n"
        '    loop: {in: "{{ workload.items }}", iterator: x,'
        " spec: {mode: parallel, max_in_flight: 300}}\n"
        "    tool: {kind: noop}\n"
    )
    cluster.server(2.0, 0.2, "--no-inline")
    doomed = cluster.worker(64)
    execution_id = cluster.submit(playbook, wait=False)["execution_id"]
    store = PostgresStore(cluster.url)
    try:

        def logged() -> int:
            record = store.execution(execution_id)
            return int(record["last_seq"]) if record else 0

        _wait_for(lambda: logged() >= 1000)  # a few hundred iterations in
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=30)
        done = sum(1 for e in store.read(execution_id) if e["name"] == "loop.iteration.done")
        assert done < n  # killed mid-run: the rest needs the next worker
        cluster.worker(64)
        _wait_for(lambda: store.execution(execution_id)["status"] != "running", 120)  # type: ignore[index]
        record = store.execution(execution_id)
        events = store.read(execution_id)
    finally:
        store.close()
    assert record is not None and record["status"] == "completed", record
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(folded_task(e["payload"]) for e in events if e["name"] == "loop.iteration.done")
    for name in ("loop.iteration.done", "loop.iteration.started"):
        per_iteration = Counter(e["iteration"] for e in events if e["name"] == name)
        assert sorted(per_iteration) == list(range(n)) and set(per_iteration.values()) == {1}
    replay = _vm("replay", execution_id, "--db", cluster.url, "--json")
    out, err = replay.communicate(timeout=60)
    assert replay.returncode == 0 and json.loads(out)["ok"], out + err


def test_a_timer_wakes_its_server(cluster: Cluster) -> None:
    # the server ignores the NOTIFY of its own appends, so the timer that fires in it must
    # wake it directly: with a 300 s polling fallback, only that wake-up finishes in time
    cluster.server(poll=300)
    cluster.worker()
    summary = cluster.submit(PLAYBOOKS / "listener_timeout.yaml", timeout=60)
    assert summary["status"] == "completed", summary
    assert summary["steps"]["expired"]["status"] == "done" and "approved" not in summary["steps"]


def test_workers_resolve_the_keychain_and_redact_it(cluster: Cluster, tmp_path: Path) -> None:
    secret = "s3cr3t-dist-token"
    playbook = PLAYBOOKS / "keychain_worker.yaml"
    keychain = tmp_path / "worker-keychain.yaml"
    keychain.write_text(f"api_token: {secret}\n")
    cluster.server()  # the server has no keychain: templates read it in the worker
    cluster.worker(4, 2.0, "--keychain", str(keychain))
    summary = cluster.submit(playbook)
    assert summary["status"] == "completed", summary
    result = summary["steps"]["start"]["result"]
    assert result == {"token_length": len(secret), "echo": "token=***"}
    store = PostgresStore(cluster.url)
    try:
        events = store.read(summary["execution_id"])
    finally:
        store.close()
    assert any(folded_task(e["payload"]) for e in events if e["name"] == "step.done")
    assert secret not in json.dumps([e["payload"] for e in events])
    embedded = run_embedded(compile_file(str(playbook)).payload, {}, keychain_file=str(keychain))
    assert embedded["steps"]["start"]["result"] == result


@pytest.mark.parametrize(
    "url, code",
    [
        ("postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=2", "NOE805"),
        ("postgresql://postgres@127.0.0.1:5432/postgres?bogus=1", "NOE806"),
    ],
)
def test_bad_database_urls(url: str, code: str) -> None:
    case = str(CASES[0]) if CASES else "x.yaml"
    for args in (["submit", case, "--db", url], ["worker", "--db", url], ["server", "--db", url]):
        proc = _vm(*args)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 5, (args, err)  # the database cannot be used
        assert f"error[{code}]" in err and "Traceback" not in err
    proc = _vm("worker", "--db", "sqlite:///x.db")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 5 and "error[NOE806]" in err


def _terminate_backends(cluster: Cluster) -> Counter[str]:
    """What the cluster's processes see when PostgreSQL restarts: all their connections drop
    at once. Only this cluster's (by application_name): other sessions share the database.
    Returns how many connections of each application_name were terminated."""
    import asyncio

    from noetlc.runtime.postgres.connect import connect

    async def kill() -> Counter[str]:
        conn = await connect(cluster.url)
        bystander = await connect(cluster.url)  # another client of the same database
        try:
            rows = await conn.fetch(
                "SELECT application_name, pg_terminate_backend(pid) AS gone"
                " FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND backend_type = 'client backend' AND starts_with(application_name, $1)",
                cluster.application_name + "_",
            )
            assert await bystander.fetchval("SELECT 1") == 1  # left alone
            return Counter(r["application_name"] for r in rows if r["gone"])
        finally:
            await bystander.close()
            await conn.close()

    return asyncio.run(kill())


def test_connections_dropped_mid_execution(cluster: Cluster, tmp_path: Path) -> None:
    log = tmp_path / "invocations.log"
    cluster.server()
    cluster.worker(concurrency=1)
    cluster.submit(PLAYBOOKS / "crash_loop.yaml", f"log={log}", wait=False)
    execution_id = _latest_execution(cluster.url)
    for threshold in (6, 20):
        _wait_for(lambda t=threshold: sum(_invocations(log).values()) >= t)  # type: ignore[misc]
        dropped = _terminate_backends(cluster)
        # the server's and the worker's connections went down, and no one else's
        assert set(dropped) == {cluster.name_of("server"), cluster.name_of("worker")}
    _check_crash_run(cluster, log, execution_id, set())
    assert all(p.poll() is None for p in cluster.procs)  # nobody died of it


def _restart_postgres() -> str | None:
    """Restart the local cluster; None when done, else why it cannot be done here."""
    import shutil

    if shutil.which("pg_ctlcluster") is None or not Path("/etc/postgresql").is_dir():
        return "pg_ctlcluster is not available"
    if os.geteuid() != 0:
        return "restarting PostgreSQL needs root"
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[0]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    for _ in range(60):
        ready = subprocess.run(["pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"])
        if ready.returncode == 0:
            return None
        time.sleep(0.5)
    raise AssertionError("PostgreSQL did not come back after the restart")


@pytest.mark.skipif(
    os.environ.get("CI", "").lower() != "true" and not os.environ.get("NOETLC_TEST_PG_RESTART"),
    reason="restarts the machine's PostgreSQL: runs under CI=true or NOETLC_TEST_PG_RESTART=1",
)
def test_postgres_restarted_mid_execution(cluster: Cluster, tmp_path: Path) -> None:
    log = tmp_path / "invocations.log"
    cluster.server()
    cluster.worker(concurrency=1)
    cluster.submit(PLAYBOOKS / "crash_loop.yaml", f"log={log}", wait=False)
    execution_id = _latest_execution(cluster.url)
    _wait_for(lambda: sum(_invocations(log).values()) >= 8)
    why = _restart_postgres()
    if why is not None:
        pytest.skip(why)
    _check_crash_run(cluster, log, execution_id, set())
    assert all(p.poll() is None for p in cluster.procs)  # servers and workers rode it out
