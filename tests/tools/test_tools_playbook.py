"""The playbook tool is a client of `ToolContext.run_playbook` (the runtime runs the child)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from noetlc.stdlib_tools.registry import ToolContext, call_tool


class FakeRuntime:
    def __init__(self, summary: dict[str, Any]) -> None:
        self.summary = summary
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, path: str, workload: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((path, workload))
        return self.summary


def test_a_child_file_relative_to_the_playbook_and_its_result(tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text("workflow: []\n")
    runtime = FakeRuntime({"execution_id": "c-1", "status": "completed", "result": {"n": 3}})
    ctx = ToolContext(workdir=tmp_path, run_playbook=runtime)
    out = call_tool("playbook", {"path": "child", "args": {"x": 1}}, None, ctx)
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
    }
    out = call_tool("playbook", args, None, ctx)
    assert out["result"] == {"score": 0.8}
    assert runtime.calls == [
        ("fixtures/playbooks/user_profile_scorer", {"user_data": {"name": "a"}})
    ]
    missing = call_tool("playbook", {**args, "return_step": "nope"}, None, ctx)
    assert missing["error"]["type"] == "PlaybookError" and "nope" in missing["error"]["message"]


def test_a_failed_child_is_an_error_outcome() -> None:
    runtime = FakeRuntime(
        {"execution_id": "c-3", "status": "failed", "result": None,
         "error": {"code": "X", "message": "step b failed"}}
    )  # fmt: skip
    out = call_tool("playbook", {"playbook": "p"}, None, ToolContext(run_playbook=runtime))
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
