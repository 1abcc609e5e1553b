"""The embedded runtime: replay, resume after SIGKILL, cancel, signals, timers, parallel loops,
dead paths of failed-and-handled branches."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main as cli
from noetlc.compiler.pipeline import compile_file
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore, SQLiteStore
from noetlc.runtime.postgres.cluster_testing import run_vm
from noetlc.runtime.replay import check
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import Event
from tests.conftest import CONFORMANCE

HERE = Path(__file__).resolve().parent
PLAYBOOKS = HERE / "playbooks"
CASES = sorted(CONFORMANCE.glob("c[0-9][0-9]_*[!t].yaml"))


def _payload(path: Path) -> dict[str, Any]:
    unit = compile_file(str(path))
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    payload: dict[str, Any] = unit.payload
    return payload


def _expect_set(case: Path) -> dict[str, Any]:
    import yaml

    expect = yaml.safe_load(case.with_name(case.stem + ".expect.yaml").read_text())
    return dict(expect.get("set") or {})


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_replay_reproduces_every_conformance_log(case: Path) -> None:
    payload = _payload(case)
    store = MemoryStore()
    summary = run_embedded(payload, _expect_set(case), store)
    record = store.execution(summary["execution_id"])
    assert record is not None
    events = store.read(summary["execution_id"])
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    report = check(LoadedProgram(payload), summary["execution_id"], record["workload"], events)
    assert report.ok, report.divergence
    assert report.vm.status == summary["status"]
    assert report.inputs > 0


def test_replay_finds_a_tampered_log() -> None:
    payload = _payload(CONFORMANCE / "c02_exclusive.yaml")
    store = MemoryStore()
    summary = run_embedded(payload, {}, store)
    events = store.read(summary["execution_id"])
    # a worker result changed after the fact: the routing the server recorded no longer follows
    for event in events:
        if event["name"] == "step.done" and event.get("source") == "worker":
            event["payload"] = {"result": {"amount": 500}}  # was 50: now `big` would win
            break
    report = check(LoadedProgram(payload), summary["execution_id"], {}, events)
    assert not report.ok
    assert report.divergence is not None and report.divergence["recorded"] is not None


def test_replay_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'n.db'}"
    assert cli.main(["run", str(CONFORMANCE / "c04_loop_ctx.yaml"), "--json", "--db", db]) == 0
    execution = json.loads(capsys.readouterr().out.splitlines()[-1])["execution_id"]
    assert cli.main(["replay", execution, "--json", "--db", db]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["status"] == "completed"
    assert cli.main(["replay", "nope", "--db", db]) == 4  # unknown execution


def test_failed_and_handled_branch_is_a_dead_path_for_the_join() -> None:
    summary = run_embedded(_payload(PLAYBOOKS / "handled_branch.yaml"))
    assert summary["status"] == "completed", summary["error"]
    steps = summary["steps"]
    assert steps["left"]["status"] == "failed"
    assert steps["report"]["status"] == "done"
    assert steps["merge"] == {"runs": 1, "status": "done", "result": {"merged": True}}


def test_parallel_iterations_overlap_and_keep_input_order() -> None:
    events: list[Event] = []
    summary = run_embedded(
        _payload(PLAYBOOKS / "slow_parallel.yaml"), on_events=lambda b: events.extend(b)
    )
    assert summary["steps"]["start"]["result"]["results"] == [1, 2, 3, 4, 5, 6, 7, 8]
    names = [e.name for e in events if e.name.startswith("loop.iteration.")]
    first_done = names.index("loop.iteration.done")
    # max_in_flight 4: four iterations were running before the first one finished, never more
    assert names[:first_done].count("loop.iteration.started") == 4
    in_flight = peak = 0
    for name in names:
        in_flight += 1 if name == "loop.iteration.started" else -1
        peak = max(peak, in_flight)
    assert peak == 4


def test_cancel_request_ends_the_execution_cancelled() -> None:
    store = MemoryStore()
    store.request("exec-cancel", "cancel")
    summary = run_embedded(
        _payload(PLAYBOOKS / "slow_parallel.yaml"), store=store, execution_id="exec-cancel"
    )
    assert summary["status"] == "cancelled"
    assert summary["error"]["code"] == "NOE855"
    assert store.executions()[0]["status"] == "cancelled"
    names = [e["name"] for e in store.read("exec-cancel")]
    assert "execution.cancelled" in names and "workflow.finished" not in names


def test_signal_routes_a_listener_step() -> None:
    store = MemoryStore()
    store.request("exec-signal", "signal", "approve", {"user": "ada"})
    summary = run_embedded(
        _payload(PLAYBOOKS / "listener.yaml"), store=store, execution_id="exec-signal"
    )
    assert summary["status"] == "completed", summary["error"]
    assert summary["steps"]["approved"]["result"] == {"approved_by": "ada"}
    assert "expired" not in summary["steps"]
    events = store.read("exec-signal")
    record = store.execution("exec-signal")
    assert record is not None
    assert check(LoadedProgram(_payload(PLAYBOOKS / "listener.yaml")), "exec-signal", {}, events).ok


def test_timer_fires_when_no_signal_comes() -> None:
    summary = run_embedded(_payload(PLAYBOOKS / "listener_timeout.yaml"))
    assert summary["status"] == "completed"
    assert summary["steps"]["expired"]["status"] == "done"
    assert "approved" not in summary["steps"]


def _invocations(log: Path) -> Counter[str]:
    return Counter(log.read_text().splitlines()) if log.exists() else Counter()


def test_resume_after_sigkill_runs_no_finished_task_again(tmp_path: Path) -> None:
    db_path = tmp_path / "noetl.db"
    db = f"sqlite:///{db_path}"
    log = tmp_path / "invocations.log"
    playbook = str(PLAYBOOKS / "crash_loop.yaml")
    proc = run_vm("run", playbook, "--db", db, "--set", f"log={log}", "--quiet", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while sum(_invocations(log).values()) < 12 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    store = SQLiteStore(str(db_path))
    [record] = store.executions()
    assert record["status"] == "running"
    execution = record["execution_id"]
    before = store.read(execution)
    done_before = {
        (e["iteration"], e["payload"]["task"])
        for e in before
        if e["name"] == "task.done" and e.get("source") == "worker"
    }
    store.close()
    assert done_before, "the process was killed before any task finished"

    resumed = run_vm("resume", execution, "--db", db, "--json", cwd=tmp_path)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    summary = json.loads(out.splitlines()[-1])
    assert summary["status"] == "completed"
    assert summary["steps"]["total"]["result"] == sum(n * 2 + 1 for n in range(20))

    calls = _invocations(log)
    for iteration, task in done_before:
        assert calls[f"{task} {iteration}"] == 1, f"{task} {iteration} ran again"
    for n in range(20):
        for task in ("first", "second"):
            assert 1 <= calls[f"{task} {n}"] <= 2  # at most the interrupted task runs twice
    store = SQLiteStore(str(db_path))
    events = store.read(execution)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert check(
        LoadedProgram(_payload(PLAYBOOKS / "crash_loop.yaml")),
        execution,
        store.execution(execution)["workload"],
        events,
    ).ok  # type: ignore[index]
    store.close()
    assert cli.main(["resume", execution, "--db", db]) == 4  # already ended: NOE856


def test_cancel_cli_stops_a_running_process(tmp_path: Path) -> None:
    db_path = tmp_path / "noetl.db"
    db = f"sqlite:///{db_path}"
    log = tmp_path / "invocations.log"
    playbook = str(PLAYBOOKS / "crash_loop.yaml")
    proc = run_vm("run", playbook, "--db", db, "--set", f"log={log}", "--json", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not _invocations(log) and time.monotonic() < deadline:
        time.sleep(0.02)
    store = SQLiteStore(str(db_path))
    [record] = store.executions()
    store.close()
    assert cli.main(["cancel", record["execution_id"], "--db", db]) == 0
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert json.loads(out.splitlines()[-1])["status"] == "cancelled"
    assert sum(_invocations(log).values()) < 40


def test_playbook_tool_runs_a_child_and_secrets_are_redacted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NOETL_KEYCHAIN_API_TOKEN", "s3cr3t-value")
    store = SQLiteStore(str(tmp_path / "n.db"))
    summary = run_embedded(_payload(PLAYBOOKS / "parent.yaml"), store=store)
    assert summary["status"] == "completed", summary["error"]
    result = summary["steps"]["start"]["result"]
    assert result["doubled"] == 42 and result["token_length"] == len("s3cr3t-value")
    assert result["echo"] == "***"  # the summary is printed: redacted too
    [parent, child] = sorted(store.executions(), key=lambda r: r["parent_id"] is not None)
    assert child["parent_id"] == parent["execution_id"] and child["status"] == "completed"
    log = json.dumps(store.read(parent["execution_id"]))
    assert "s3cr3t-value" not in log and "***" in log  # the task echoed it: redacted
    store.close()


def test_a_bad_keychain_file_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "keys.yaml"
    bad.write_text("- not a mapping\n")
    code = cli.main(
        ["run", str(PLAYBOOKS / "parent.yaml"), "--db", "memory:", "--keychain", str(bad)]
    )
    assert code == 2  # a file named by an option
    assert "error[NOE813]" in capsys.readouterr().err


def test_large_results_are_stored_by_reference(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "n.db"))
    summary = run_embedded(_payload(PLAYBOOKS / "big_result.yaml"), store=store)
    assert summary["status"] == "completed", summary["error"]
    assert summary["steps"]["count"]["result"] == {"n": 50, "last": "row-49"}
    assert len(summary["steps"]["start"]["result"]["rows"]) == 50  # the summary shows data
    events = store.read(summary["execution_id"])
    done = [e for e in events if e["name"] == "step.done" and e["step"] == "start"]
    ref = done[0]["payload"]["result"]["$ref"]
    assert ref["size"] > 200 and store.get_result(ref["key"]) is not None
    assert "row-25" not in json.dumps(events)  # the log carries the reference only
    record = store.execution(summary["execution_id"])
    assert record is not None
    assert check(
        LoadedProgram(_payload(PLAYBOOKS / "big_result.yaml")),
        summary["execution_id"],
        record["workload"],
        events,
    ).ok
    store.close()
