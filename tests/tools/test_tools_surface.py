"""The tool surface NoETL users write: each key with its meaning (or its clear error)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main
from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.postgres.testing import dsn_or_skip
from noetlc.stdlib_tools.registry import ToolContext, call_tool

SCRIPT = "def main(name):\n    return {'greeting': 'hello ' + name}\n"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        status, body = (200, SCRIPT.encode()) if self.path == "/script.py" else (404, b"no")
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def codes(tool: str) -> list[str]:
    src = f"workflow:\n  - step: start\n    tool: {tool}\n"
    return [d.code for d in compile_source(src).reporter.sorted()]


def run_playbook(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    code = vm_main.main(["run", str(path), "--json", "--quiet", "--db", "memory:"])
    summary: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == (0 if summary["status"] == "completed" else 1)
    return summary


# --------------------------------------------------------------------------- script sources


def test_python_script_from_a_file_and_from_http(base_url: str, tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "greet.py").write_text(SCRIPT)
    ctx = ToolContext(workdir=tmp_path)
    for ref in (
        {"uri": "scripts/greet.py", "source": {"type": "file"}},
        {"uri": f"{base_url}/script.py", "source": {"type": "http"}},
        {"source": {"type": "inline", "code": SCRIPT}},
    ):
        out = call_tool("python", {"script": ref, "args": {"name": "ann"}}, None, ctx)
        assert out["result"] == {"greeting": "hello ann"}, (ref, out)


def test_unreadable_scripts_are_clear_errors(base_url: str, tmp_path: Path) -> None:
    ctx = ToolContext(workdir=tmp_path)
    cases = [
        ({"uri": "missing.py", "source": {"type": "file"}}, "cannot read the script"),
        ({"uri": f"{base_url}/nope.py", "source": {"type": "http"}}, "HTTP 404"),
        ({"uri": "gs://b/s.py", "source": {"type": "gcs"}}, "no installed tool reads scripts from gcs"),
    ]  # fmt: skip
    for ref, fragment in cases:
        out = call_tool("python", {"script": ref}, None, ctx)
        assert out["error"]["type"] == "ScriptError" and fragment in out["error"]["message"], out
    assert "NOE603" in codes("{kind: python, script: {uri: a, source: {type: ftp}}}")
    assert "NOE605" in codes("{kind: python, code: x, script: {uri: a, source: {type: file}}}")
    assert "NOE602" in codes("{kind: python, args: {}}")


def test_postgres_script_credential_and_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = dsn_or_skip()
    (tmp_path / "q.sql").write_text("SELECT 41 + 1 AS answer;")
    monkeypatch.setenv("NOETL_KEYCHAIN_PG_LOCAL", dsn)
    from noetlc.stdlib_tools import postgres_tool
    from noetlc.stdlib_tools.keychain import Keychain

    ctx = ToolContext(workdir=tmp_path, keychain=Keychain())
    args = {"credential": "pg_local", "script": {"uri": "q.sql", "source": {"type": "file"}},
            "pool": {"name": "common", "max_size": 2, "min_size": 1, "timeout": 5}}  # fmt: skip
    out = call_tool("postgres", args, None, ctx)
    assert out["result"]["rows"] == [{"answer": 42}], out
    pools = [json.loads(k) for k in postgres_tool._pools]
    assert [{"dsn": dsn}, {"name": "common", "max_size": 2, "min_size": 1, "timeout": 5.0}] in pools
    assert codes("{kind: postgres, credential: pg, query: 'SELECT 1', pool: {max_sise: 1}}") == [
        "NOE601"
    ]


# --------------------------------------------------------------------------- small spellings


def test_http_verify_ssl_is_verify() -> None:
    from noetlc.stdlib_tools.schemas import HttpArgs

    assert HttpArgs.model_validate({"url": "https://x", "verify_ssl": False}).verify is False
    assert codes("{kind: http, url: 'https://x', verify_ssl: false}") == []


def test_shell_cmds_as_one_string_is_one_script(tmp_path: Path) -> None:
    out = call_tool("shell", {"cmds": 'X=1\necho "x=$X"'}, None, ToolContext(workdir=tmp_path))
    assert out["result"]["stdout"] == "x=1\n", out
    assert codes('{kind: shell, cmds: "echo hi"}') == []


def test_python_libs_from_import_form() -> None:
    code = "result = {'t': datetime(2026, 1, 2).isoformat(), 'j': js.dumps([1])}"
    libs = {"datetime": {"from": "datetime", "import": "datetime"}, "js": "json"}
    out = call_tool("python", {"code": code, "libs": libs})
    assert out["result"] == {"t": "2026-01-02T00:00:00", "j": "[1]"}, out
    found = codes("{kind: python, code: x, libs: {d: {from: datetime, imprt: date}}}")
    assert "NOE601" in found, found


def test_an_input_named_input_data_is_not_replaced() -> None:
    out = call_tool("python", {"code": "result = input_data['name']",
                               "input": {"input_data": {"name": "ann"}}})  # fmt: skip
    assert out["result"] == "ann", out
    plain = call_tool("python", {"code": "result = sorted(input_data)", "input": {"a": 1}})
    assert plain["result"] == ["a"]


def test_duckdb_commands_and_auth_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from noetlc.stdlib_tools.duckdb_tool import secret_statements
    from noetlc.stdlib_tools.keychain import Keychain

    out = call_tool(
        "duckdb", {"commands": "CREATE TABLE t AS SELECT 1 AS a; SELECT a + 1 AS b FROM t"}
    )
    assert out["result"]["rows"] == [{"b": 2}], out
    monkeypatch.setenv("NOETL_KEYCHAIN_PG_MAIN", "postgresql://app:s'cret@db.local:5433/shop")
    monkeypatch.setenv("NOETL_KEYCHAIN_GCS_HMAC", '{"key_id": "AK", "secret": "SK"}')
    statements = secret_statements(
        {"pg_db": {"source": "credential", "tool": "postgres", "key": "pg_main"},
         "gcs_secret": {"tool": "hmac", "key": "gcs_hmac", "scope": "gs://bucket"}},
        Keychain(),
    )  # fmt: skip
    assert statements == [
        "CREATE OR REPLACE TEMPORARY SECRET pg_db (TYPE 'postgres', HOST 'db.local', PORT 5433, "
        "DATABASE 'shop', USER 'app', PASSWORD 's''cret')",
        "CREATE OR REPLACE TEMPORARY SECRET gcs_secret (TYPE 'gcs', KEY_ID 'AK', SECRET 'SK', "
        "SCOPE 'gs://bucket')",
    ]
    bad = call_tool("duckdb", {"query": "SELECT 1", "auth": {"x": {"tool": "ftp", "key": "gcs_hmac"}}},
                    None, ToolContext(keychain=Keychain()))  # fmt: skip
    assert bad["error"]["type"] == "ToolArgumentError" and "ftp" in bad["error"]["message"]


def test_playbook_payload_and_timeout(tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text("workflow: []\n")
    seen: list[dict[str, Any]] = []

    def slow(path: str, workload: dict[str, Any], wait: bool = True) -> dict[str, Any]:
        seen.append(workload)
        time.sleep(5 if workload.get("slow") else 0)  # far past the 50 ms timeout, even under load
        return {"execution_id": "c", "status": "completed", "result": workload}

    ctx = ToolContext(workdir=tmp_path, run_playbook=slow)
    out = call_tool(
        "playbook",
        {"path": "child", "payload": {"a": 1}, "timeout": "30s", "wait": True},
        None,
        ctx,
    )
    assert out["result"] == {"a": 1}
    late = call_tool("playbook", {"path": "child", "payload": {"slow": 1}, "timeout": "50ms",
                      "wait": True},
                     None, ctx)  # fmt: skip
    assert late["error"]["type"] == "Timeout", late
    bad = call_tool("playbook", {"path": "child", "timeout": "soon"}, None, ctx)
    assert bad["error"]["type"] == "ToolArgumentError"


# --------------------------------------------------------------------------- python globals


def test_python_globals_context_ctx_and_the_iterator_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = run_playbook(
        tmp_path,
        """
workload: {tenant: acme, users: [{name: ann}, {name: bob}]}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'n': 2}"}
    next: {arcs: [{step: each}]}
  - step: each
    loop: {in: "{{ workload.users }}", iterator: user}
    tool:
      kind: python
      code: |
        result = {"who": user["name"], "tenant": ctx["tenant"],
                  "n": context.get("start")["n"], "eid": execution_id == context["execution_id"]}
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
""",
        capsys,
    )
    assert summary["status"] == "completed", summary["error"]
    results = summary["steps"]["each"]["result"]
    flat = results if isinstance(results, list) else results.get("results", results)
    assert {"who": "ann", "tenant": "acme", "n": 2, "eid": True} in flat, results


def test_python_globals_reach_an_isolated_child_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = run_playbook(
        tmp_path,
        """
workload: {tenant: acme}
workflow:
  - step: start
    tool:
      kind: python
      code: "result = {'t': ctx['tenant'], 'w': context['tenant']}"
      spec: {isolation: subprocess, timeout: 60}
""",
        capsys,
    )
    assert summary["result"] == {"t": "acme", "w": "acme"}, summary


def test_the_example_plugin_digest_matches(tmp_path: Path) -> None:
    # the hash example's digest equals hashlib's (sanity of the worked example's executor)
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples/plugin-tool/src"))
    try:
        from noetlc_hash_tool import HashArgs
        from noetlc_hash_tool.run import run

        (tmp_path / "f.bin").write_bytes(b"abc" * 100000)
        out = run(HashArgs(file="f.bin"), {}, ToolContext(workdir=tmp_path), None)  # type: ignore[arg-type]
        assert out["result"]["hexdigest"] == hashlib.sha256(b"abc" * 100000).hexdigest()
        assert out["result"]["bytes"] == 300000
    finally:
        sys.path.remove(str(Path(__file__).resolve().parents[2] / "examples/plugin-tool/src"))


def test_templates_in_python_code_are_rendered_as_noetl_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = """
workload: {initial: 5, label: run}
workflow:
  - step: start
    tool:
      kind: python
      input: {test_var: "{{ workload.initial }}"}
      code: |
        test_var = {{ test_var }}
        result = {"doubled": test_var * 2, "label": "{{ workload.label }}"}
"""
    assert "NOE608" in [d.code for d in compile_source(source).reporter.sorted()]
    summary = run_playbook(tmp_path, source, capsys)
    assert summary["result"] == {"doubled": 10, "label": "run"}, summary
    not_a_template = call_tool("python", {"code": "# {{ vars.* }}\nresult = 1"})
    assert not_a_template["result"] == 1, not_a_template  # runs as written
    broken = call_tool("python", {"code": "result = {{ 1 // 0 }}"})
    assert broken["error"]["type"] == "TemplateError", broken


def test_sql_results_carry_every_statement_as_command_n(tmp_path: Path) -> None:
    ctx = ToolContext(workdir=tmp_path)
    script = "CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2); SELECT a FROM t ORDER BY a"
    for kind in ("sqlite", "duckdb"):
        out = call_tool(kind, {"query": script, "database": f"{kind}.db"}, None, ctx)
        result = out["result"]
        assert result["rows"] == [{"a": 1}, {"a": 2}], (kind, out)
        assert result["command_2"]["rows"] == result["rows"]
        assert result["command_1"]["row_count"] == 2, (kind, result)
        assert result["statements"] == 3
        one = call_tool(kind, {"query": "SELECT 7 AS x"}, None, ctx)["result"]
        assert one["command_0"]["rows"] == [{"x": 7}]


def test_postgres_results_carry_command_n() -> None:
    dsn = dsn_or_skip()
    out = call_tool("postgres", {"auth": dsn, "query": "SELECT 1 AS a; SELECT 2 AS b"})
    assert out["result"]["command_0"]["rows"] == [{"a": 1}], out
    assert out["result"]["command_1"]["status"] == "SELECT 1"
    assert out["result"]["rows"] == [{"b": 2}]


def test_a_script_path_from_the_catalog_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "s.py").write_text("result = 'from the root'")
    playbook_dir = root / "playbooks" / "deep"
    playbook_dir.mkdir(parents=True)
    ref = {"uri": "./scripts/s.py", "source": {"type": "file"}}
    ctx = ToolContext(workdir=playbook_dir)
    assert call_tool("python", {"script": ref}, None, ctx)["error"]["type"] == "ScriptError"
    monkeypatch.setenv("NOETL_PLAYBOOK_PATH", str(root))
    assert call_tool("python", {"script": ref}, None, ctx)["result"] == "from the root"


def test_output_select_and_the_legacy_result_spelling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for spelling in ("output", "result"):
        source = f"""
workflow:
  - step: start
    tool: {{kind: python, code: "result = {{'status': 'ok', 'count': 2, 'items': [1, 2]}}"}}
    {spelling}:
      output_select: [status, count]
      store: {{kind: auto}}
    next: {{arcs: [{{step: end}}]}}
  - step: end
    tool: {{kind: python, input: {{n: "{{{{ start.count }}}}", s: "{{{{ start.status }}}}"}},
           code: "result = [n, s]"}}
"""
        diags = compile_source(source).reporter.sorted()
        assert [(d.code, d.severity.value) for d in diags] == [("NOE609", "note")], diags
        summary = run_playbook(tmp_path, source, capsys)
        assert summary["result"] == [2, "ok"], summary
    found = codes("{kind: noop}\n    output: {output_selct: [a]}")
    assert found == ["NOE101"], found


def test_task_level_output_choices_are_noted_not_arguments() -> None:
    source = """
workflow:
  - step: start
    tool:
      - fetch:
          kind: python
          code: "result = 1"
          output: {store: {kind: auto}, inline_max_bytes: 1000}
      - name: other
        kind: noop
        output_select: {strategy: size_threshold, threshold_kb: 100}
"""
    diags = compile_source(source).reporter.sorted()
    assert not any(d.severity.value == "error" for d in diags), [(d.code, d.message) for d in diags]
    notes = [(d.code, d.span.line if d.span else 0) for d in diags if d.code == "NOE609"]
    assert notes == [("NOE609", 8), ("NOE609", 11)]
