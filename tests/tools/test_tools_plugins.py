"""Tool kinds as records, and the `noetlc.tools` entry-point group through which an installed
package adds a kind that the compiler checks and the runtimes run.

The example package `examples/plugin-tool` is "installed" the way pip leaves it for
`importlib.metadata`: a `*.dist-info` folder with `METADATA` and `entry_points.txt` on the path.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.stdlib_tools import kinds
from noetlc.stdlib_tools.registry import call_tool
from noetlc.stdlib_tools.schemas import NoopArgs

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_SRC = REPO / "examples" / "plugin-tool" / "src"


def _fake_install(site: Path, name: str, entry_points: str) -> None:
    info = site / f"{name}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    _fake_install(site, "noetlc_hash_tool", "[noetlc.tools]\nhash = noetlc_hash_tool:KIND\n")
    monkeypatch.syspath_prepend(str(EXAMPLE_SRC))
    monkeypatch.syspath_prepend(str(site))
    kinds.reload_plugins()
    yield site
    kinds.reload_plugins()


def _codes(source: str) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in compile_source(source).reporter.sorted()]


HASH_PLAYBOOK = """\
workload: {message: hello}
workflow:
  - step: start
    tool: {kind: hash, text: "{{ workload.message }}", algorithm: sha1}
"""


def test_every_list_of_kinds_comes_from_the_records() -> None:
    names = kinds.kind_names()
    assert set(kinds.BUILTIN) <= set(names)
    assert set(kinds.NEEDS_PLUGIN) <= set(names)
    assert {"transfer", "nats"} <= set(kinds.BUILTIN)
    sql = {n for n, r in kinds.BUILTIN.items() if r.sql}
    assert sql == {"postgres", "sqlite", "duckdb"}
    assert {n for n, r in kinds.BUILTIN.items() if r.inline} == {"noop"}
    assert "auth" in kinds.BUILTIN["postgres"].credentials


def test_without_the_plugin_the_kind_is_unknown() -> None:
    kinds.reload_plugins()
    codes = _codes(HASH_PLAYBOOK)
    assert [c for c, _ in codes] == ["NOE205"]
    outcome = call_tool("hash", {"text": "x"})
    assert outcome["status"] == "error" and outcome["error"]["type"] == "ToolUnavailable"


def test_an_installed_plugin_is_checked_by_the_compiler(plugin_site: Path) -> None:
    assert kinds.lookup("hash") is not None
    assert kinds.lookup("hash").origin == "noetlc_hash_tool"  # type: ignore[union-attr]
    assert _codes(HASH_PLAYBOOK) == []
    bad = HASH_PLAYBOOK.replace("algorithm: sha1", "algoritm: sha1")
    diags = compile_source(bad).reporter.sorted()
    assert [d.code for d in diags] == ["NOE601"]
    assert diags[0].hint == "did you mean `algorithm`?"


def test_an_installed_plugin_runs_through_the_registry(plugin_site: Path) -> None:
    outcome = call_tool("hash", {"text": "hello", "algorithm": "md5"})
    assert outcome["status"] == "ok", outcome
    assert outcome["result"]["hexdigest"] == hashlib.md5(b"hello").hexdigest()
    assert outcome["meta"]["kind"] == "hash"
    bad = call_tool("hash", {"text": "a", "file": "b"})
    assert bad["error"]["type"] == "ToolArgumentError"


def test_noetl_vm_run_runs_the_plugin_kind(plugin_site: Path, tmp_path: Path) -> None:
    playbook = tmp_path / "digest.yaml"
    playbook.write_text(HASH_PLAYBOOK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), str(EXAMPLE_SRC)])}
    done = subprocess.run(
        [sys.executable, "-m", "noetlc.cli.vm_main", "run", str(playbook), "--json", "--db",
         "memory:"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["status"] == "completed", done.stderr
    assert summary["result"]["hexdigest"] == hashlib.sha1(b"hello").hexdigest()


def test_broken_and_shadowing_plugins_are_reported_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    _fake_install(site, "broken_plugin", "[noetlc.tools]\nbroken = no_such_module_xyz:KIND\n")
    _fake_install(site, "shadow_plugin", "[noetlc.tools]\npython = shadow_plugin_mod:KIND\n")
    (site / "shadow_plugin_mod.py").write_text(
        "from noetlc.stdlib_tools.kinds import ToolKind\n"
        "from noetlc.stdlib_tools.schemas import NoopArgs\n"
        "KIND = ToolKind('python', NoopArgs, None)\n"
    )
    monkeypatch.syspath_prepend(str(site))
    kinds.reload_plugins()
    try:
        problems = kinds.plugin_problems()
        assert any("no_such_module_xyz" in p for p in problems), problems
        assert any("redefines the built-in kind `python`" in p for p in problems), problems
        assert kinds.lookup("python") is kinds.BUILTIN["python"]
        codes = _codes("workflow:\n  - step: start\n    tool: {kind: broken}\n")
        assert codes[0][0] == "NOE205"
    finally:
        kinds.reload_plugins()


@pytest.mark.parametrize("kind", sorted(kinds.NEEDS_PLUGIN))
def test_cloud_kinds_check_with_a_note_and_fail_when_run(kind: str) -> None:
    diags = compile_source(
        f"workflow:\n  - step: start\n    tool: {{kind: {kind}, anything: 1}}\n"
    ).reporter.sorted()
    assert [(d.code, d.severity.value) for d in diags] == [("NOE607", "note")]
    assert "noetlc.tools" in (diags[0].hint or "")
    outcome = call_tool(kind, {"anything": 1})
    assert outcome["error"]["type"] == "ToolUnavailable"
    assert f"`{kind}` tool is not installed" in outcome["error"]["message"]


def test_a_misspelt_kind_stays_an_error_with_a_suggestion() -> None:
    diags = compile_source("workflow:\n  - step: start\n    tool: {kind: snowflak}\n")
    found = [(d.code, d.hint) for d in diags.reporter.sorted()]
    assert found[0][0] == "NOE205" and "snowflake" in (found[0][1] or "")
    diags = compile_source("workflow:\n  - step: start\n    tool: {kind: tranfser}\n")
    assert "transfer" in (diags.reporter.sorted()[0].hint or "")


def test_a_record_can_come_from_a_callable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    _fake_install(site, "made_plugin", "[noetlc.tools]\nmade = made_plugin_mod:make\n")
    (site / "made_plugin_mod.py").write_text(
        "from noetlc.stdlib_tools.kinds import ToolKind\n"
        "from noetlc.stdlib_tools.schemas import NoopArgs\n"
        "def make():\n    return ToolKind('made', NoopArgs, None, inline=True)\n"
    )
    monkeypatch.syspath_prepend(str(site))
    kinds.reload_plugins()
    try:
        record = kinds.lookup("made")
        assert record is not None and record.schema is NoopArgs and record.inline
    finally:
        kinds.reload_plugins()
