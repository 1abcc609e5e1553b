"""The playbook tool is a client of `ToolContext.run_playbook` (the runtime runs the child):
without `return_step` it only starts the child (NoETL's executor result), with it it waits and
gives NoETL's status view, with noetlc's `wait: true` it gives the child's result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from noetlc.stdlib_tools.registry import ToolContext, call_tool


class FakeRuntime:
    def __init__(self, summary: dict[str, Any]) -> None:
        self.summary = summary
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.waits: list[bool] = []

    def __call__(self, path: str, workload: dict[str, Any], wait: bool = True) -> dict[str, Any]:
        self.calls.append((path, workload))
        self.waits.append(wait)
        if not wait and self.summary.get("execution_id") is not None:
            return {"execution_id": self.summary["execution_id"], "status": "started"}
        return self.summary


def test_without_return_step_the_child_is_started_and_not_waited_for(tmp_path: Path) -> None:
    runtime = FakeRuntime({"execution_id": "c-9", "status": "failed", "result": None})
    ctx = ToolContext(workdir=tmp_path, run_playbook=runtime)
    out = call_tool("playbook", {"path": "child"}, None, ctx)
    # NoETL's executor result: the child's later failure is not the caller's
    assert out["status"] == "ok" and runtime.waits == [False]
    result = out["result"]
    assert result["status"] == "success" and result["execution_id"] == "c-9"
    assert result["data"] == {"execution_id": "c-9", "status": "started"}
    assert set(result) == {"id", "status", "data", "execution_id", "duration"}


def test_a_child_that_cannot_start_fails_the_call_in_every_way() -> None:
    failed = {"execution_id": None, "status": "failed", "result": None,
              "error": {"code": "NOE004", "message": "no playbook file nope"}}  # fmt: skip
    for extra in ({}, {"return_step": "end"}, {"wait": True}):
        ctx = ToolContext(run_playbook=FakeRuntime(failed))
        out = call_tool("playbook", {"path": "nope", **extra}, None, ctx)
        assert out["status"] == "error" and out["error"]["type"] == "PlaybookError", extra
        assert "no playbook file nope" in out["error"]["message"]


def test_return_step_waits_and_gives_noetls_status_view() -> None:
    summary = {
        "execution_id": "c-5",
        "status": "failed",
        "result": None,
        "ctx": {"seen": 2},
        "steps": {"start": {"status": "done", "result": 1}, "end": {"status": "failed"}},
        "error": {"message": "end failed"},
    }
    runtime = FakeRuntime(summary)
    out = call_tool("playbook", {"path": "p", "return_step": "start"}, None,
                    ToolContext(run_playbook=runtime))  # fmt: skip
    # a failed child is `failed: true` in the view, not a failed call (NoETL's worker)
    assert out["status"] == "ok" and runtime.waits == [True]
    view = out["result"]
    assert (view["execution_id"], view["failed"], view["completed"]) == ("c-5", True, False)
    assert view["completed_steps"] == ["start"] and view["current_step"] == "end"
    assert view["variables"] == {"seen": 2} and view["completion_inferred"] is False
    assert {"start_time", "end_time", "duration_seconds", "duration_human"} <= set(view)
    assert view["result"] == 1 and view["child_status"] == "failed"  # noetlc's additions
    assert "status" not in view


def test_return_step_past_its_timeout_gives_the_started_shape() -> None:
    def slow(path: str, workload: dict[str, Any], wait: bool = True) -> dict[str, Any]:
        time.sleep(1)
        return {"execution_id": "c-6", "status": "completed"}

    ctx = ToolContext(run_playbook=slow, child_id="c-6")
    args = {"path": "p", "return_step": "end", "timeout": "50ms"}
    out = call_tool("playbook", args, None, ctx)
    assert out["status"] == "ok"
    assert out["result"] == {"status": "started", "execution_id": "c-6", "path": "p",
                             "async": False}  # fmt: skip


def test_a_child_file_relative_to_the_playbook_and_its_result(tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text("workflow: []\n")
    runtime = FakeRuntime({"execution_id": "c-1", "status": "completed", "result": {"n": 3}})
    ctx = ToolContext(workdir=tmp_path, run_playbook=runtime)
    out = call_tool("playbook", {"path": "child", "args": {"x": 1}, "wait": True}, None, ctx)
    assert out["status"] == "ok" and out["result"] == {"n": 3}
    assert out["meta"]["child_execution_id"] == "c-1"
    assert runtime.calls == [(str((tmp_path / "child.yaml").resolve()), {"x": 1})]


def test_a_catalog_path_and_the_corpus_spellings(tmp_path: Path) -> None:
    summary = {
        "execution_id": "c-2",
        "status": "completed",
        "result": None,
        "steps": {"finalize_result": {"status": "done", "result": {"score": 0.8}}},
    }
    runtime = FakeRuntime(summary)
    ctx = ToolContext(workdir=tmp_path, run_playbook=runtime)
    args = {
        "task": "process_users",
        "path": "fixtures/playbooks/user_profile_scorer",
        "return_step": "finalize_result",
        "input": {"user_data": {"name": "a"}},
        "wait": True,
    }
    out = call_tool("playbook", args, None, ctx)
    assert out["result"] == {"score": 0.8}
    assert runtime.calls == [
        ("fixtures/playbooks/user_profile_scorer", {"user_data": {"name": "a"}})
    ]
    missing = call_tool("playbook", {**args, "return_step": "nope"}, None, ctx)
    assert missing["error"]["type"] == "PlaybookError" and "nope" in missing["error"]["message"]


def test_with_wait_a_failed_child_is_an_error_outcome() -> None:
    runtime = FakeRuntime(
        {"execution_id": "c-3", "status": "failed", "result": None,
         "error": {"code": "X", "message": "step b failed"}}
    )  # fmt: skip
    ctx = ToolContext(run_playbook=runtime)
    out = call_tool("playbook", {"playbook": "p", "wait": True}, None, ctx)
    assert out["status"] == "error" and out["error"]["type"] == "PlaybookError"
    assert "step b failed" in out["error"]["message"]
    assert out["meta"]["child_execution_id"] == "c-3" and out["meta"]["child_status"] == "failed"


def test_without_a_runtime_callback_the_tool_is_unavailable() -> None:
    out = call_tool("playbook", {"path": "p"})
    assert out["error"]["type"] == "ToolUnavailable"


def test_catalog_paths_from_noetl_playbook_path(tmp_path: Path, monkeypatch: Any) -> None:
    from noetlc.stdlib_tools import playbook_tool

    root = tmp_path / "catalog"
    (root / "fixtures" / "child").mkdir(parents=True)
    (root / "fixtures" / "child" / "child.yaml").write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata:\n  name: child\n"
        "  path: tests/composition/child\nworkflow: []\n"
    )
    here = tmp_path / "here"
    here.mkdir()
    runtime = FakeRuntime({"execution_id": "c", "status": "completed", "result": 1})
    ctx = ToolContext(workdir=here, run_playbook=runtime)
    monkeypatch.setenv("NOETL_PLAYBOOK_PATH", str(root))
    playbook_tool._catalog.cache_clear()
    call_tool("playbook", {"path": "fixtures/child/child"}, None, ctx)  # a file under the root
    call_tool("playbook", {"path": "tests/composition/child"}, None, ctx)  # its metadata.path
    call_tool("playbook", {"path": "tests/elsewhere"}, None, ctx)  # unknown: passed on
    child = str((root / "fixtures" / "child" / "child.yaml").resolve())
    assert [path for path, _ in runtime.calls] == [child, child, "tests/elsewhere"]
