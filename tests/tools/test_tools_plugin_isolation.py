"""Plugin kinds that ask for isolation (`ToolKind(..., isolated=True)`): where task code is
kept away from the service, their calls run in a warm runner process like python tasks, with a
clean environment and only the keychain entries their `credentials` arguments name; kinds that
do not ask, and every kind in `inline` mode, run in the calling process.

The plugin is "installed" as pip leaves it (a `*.dist-info` with `entry_points.txt`) in
tmp_path, put on `sys.path` here and on PYTHONPATH for the runner processes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from noetlc.stdlib_tools import isolation, kinds
from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.keychain import Keychain, env_var
from noetlc.stdlib_tools.registry import call_tool

PLUGIN = """\
import os
import sys

from noetlc.stdlib_tools.envelope import ok
from noetlc.stdlib_tools.kinds import ToolKind
from noetlc.stdlib_tools.schemas import ToolArgs


class ProbeArgs(ToolArgs):
    auth: str | None = None
    other: str | None = None


def run(args, spec, ctx, keychain):
    out = {
        "pid": os.getpid(),
        "env": sorted(os.environ),
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "execution_id": ctx.execution_id,
    }
    if args.auth:
        out["auth"] = keychain.resolve(args.auth)
    if args.other:
        try:
            keychain.resolve(args.other)
            out["other"] = "read"
        except Exception as exc:
            out["other"] = getattr(exc, "code", type(exc).__name__)
    print("probe says hello")
    return ok(out)


ISOLATED = ToolKind("probe_iso", ProbeArgs, "probe_plugin", credentials=("auth",), isolated=True)
PLAIN = ToolKind("probe_plain", ProbeArgs, "probe_plugin", credentials=("auth",))
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    info = site / "probe_plugin-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe_plugin\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[noetlc.tools]\nprobe_iso = probe_plugin:ISOLATED\nprobe_plain = probe_plugin:PLAIN\n"
    )
    (site / "probe_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(site))
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(site) + (os.pathsep + path if path else ""))
    kinds.reload_plugins()
    yield site
    kinds.reload_plugins()


@pytest.fixture
def process_mode(plugin: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("NOETL_CREDENTIAL_KEY", "the-master-key-value")
    isolation.configure("process", spare=0)
    try:
        yield
    finally:
        isolation.pool().close()
        isolation.configure("inline")


def _context(tmp_path: Path, log: list[tuple[str, str]] | None = None) -> ToolContext:
    keychain = Keychain(
        env={env_var("pg_main"): "pg-secret-value", env_var("api"): "api-secret-value"},
        no_file=True,
    )
    sink = None if log is None else (lambda stream, text: log.append((stream, text)))
    return ToolContext(execution_id="42", keychain=keychain, workdir=tmp_path, log=sink)


def test_a_kind_that_asks_runs_in_a_runner_with_its_own_credentials_only(
    process_mode: None, tmp_path: Path
) -> None:
    assert kinds.lookup("probe_iso") is not None and kinds.lookup("probe_iso").isolated  # type: ignore[union-attr]
    lines: list[tuple[str, str]] = []
    args = {"auth": "pg_main", "other": "api"}
    out = call_tool("probe_iso", args, None, _context(tmp_path, lines))
    assert out["status"] == "ok", out
    result = out["result"]
    assert result["pid"] != os.getpid()
    assert "NOETL_CREDENTIAL_KEY" not in result["env"]
    assert not any(name.startswith("NOETL_KEYCHAIN") for name in result["env"])
    assert "the-master-key-value" not in " ".join(result["argv"])
    assert result["auth"] == "pg-secret-value"  # named by a `credentials` argument: given
    assert result["other"] == "NOE812"  # in the caller's keychain, not named: not given
    assert result["cwd"] == str(tmp_path) and result["execution_id"] == "42"
    assert lines == [("stdout", "probe says hello\n")]
    assert "py" not in out  # a plugin's outcome keeps its own shape


def test_a_kind_that_does_not_ask_runs_here(process_mode: None, tmp_path: Path) -> None:
    out = call_tool("probe_plain", {"auth": "pg_main"}, None, _context(tmp_path))
    assert out["status"] == "ok", out
    assert out["result"]["pid"] == os.getpid()


def test_inline_mode_runs_it_here_unless_the_task_asks(plugin: Path, tmp_path: Path) -> None:
    assert isolation.policy().mode == "inline"
    here = call_tool("probe_iso", {}, None, _context(tmp_path))
    assert here["status"] == "ok" and here["result"]["pid"] == os.getpid()
    try:
        away = call_tool("probe_iso", {}, {"isolation": "subprocess"}, _context(tmp_path))
    finally:
        isolation.pool().close()
    assert away["status"] == "ok", away
    assert away["result"]["pid"] != os.getpid()


def test_bad_arguments_are_refused_before_a_process_is_used(
    process_mode: None, tmp_path: Path
) -> None:
    out = call_tool("probe_iso", {"auth": 3}, None, _context(tmp_path))
    assert out["status"] == "error" and out["error"]["type"] == "ToolArgumentError"
    missing = call_tool("probe_iso", {"auth": "nowhere"}, None, _context(tmp_path))
    assert missing["error"]["code"] == "NOE812"
