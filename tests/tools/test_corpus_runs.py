"""NoETL's own playbooks run to the outcome NoETL gives them (`scripts/corpus_run.py`).

The whole corpus (both folders, ~250 files) is run by `python scripts/corpus_run.py`; this test
runs the `corpus/noetl` sample (skipped with its reason where the shared data is absent) and the
rule that decides which playbooks need an outside service."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import NOETL_CORPUS, NOETL_MISSING, SHARED

REPO = Path(__file__).resolve().parents[2]


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("corpus_run", REPO / "scripts" / "corpus_run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus_run"] = module
    spec.loader.exec_module(module)
    return module


corpus_run = _runner()

# files that do not reach NoETL's outcome yet, and why: the runner's own list
KNOWN: dict[str, str] = corpus_run.KNOWN_DIFFERENCES


def test_the_outside_service_rule(tmp_path: Path) -> None:
    def reasons(text: str) -> list[str]:
        import yaml

        return corpus_run.outside_services(yaml.safe_load(text), text, tmp_path / "p.yaml", {})

    assert reasons("workflow: [{step: s, tool: {kind: http, url: 'http://127.0.0.1:9/x'}}]") == []
    assert reasons("workflow: [{step: s, tool: {kind: http, url: 'https://api.example.com'}}]") == [
        "HTTP host api.example.com"
    ]
    assert reasons("workflow: [{step: s, tool: {kind: snowflake, command: x}}]")[0].startswith(
        "tool kind snowflake"
    )
    found = reasons("workflow: [{step: s, tool: {kind: shell, cmds: ['kubectl get pods']}}]")
    assert found == ["program kubectl (a service client)"]
    assert reasons("workflow: [{step: s, tool: {kind: shell, cmds: ['echo hi | wc -l']}}]") == []
    # a database client connects to the server its command line names
    found = reasons("workflow: [{step: s, tool: {kind: shell, cmds: ['pg_isready -p 54321']}}]")
    assert found == ["program pg_isready (a service client)"]
    found = reasons("workflow: [{step: s, tool: {kind: python, code: 'import no_such_mod_x'}}]")
    assert found == ["python module no_such_mod_x (not installed)"]
    env, outside = corpus_run.local_credentials(
        {"pg_local", "pg_k8s", "nats_credential", "sf_test"}, "postgresql://x", "nats://y"
    )
    assert outside == ["sf_test"]
    assert env["NOETL_KEYCHAIN_PG_LOCAL"] == "postgresql://x"
    assert "nats://y" in env["NOETL_KEYCHAIN_NATS_CREDENTIAL"]


def test_a_playbooks_own_timeouts_raise_its_time_limit_up_to_noetls_default() -> None:
    import yaml

    def limit(text: str) -> float:
        return float(corpus_run.time_limit(yaml.safe_load(text)))

    assert limit("workflow: [{step: s, tool: {kind: noop}}]") == corpus_run.RUN_TIMEOUT
    assert limit("workflow: [{step: s, tool: {kind: playbook, timeout: 150}}]") == 150
    assert limit("workflow: [{step: s, spec: {timeout: 2m30s}, tool: {kind: noop}}]") == 150
    assert limit("workflow: [{step: s, tool: {kind: playbook, timeout: 1200}}]") == 300


def test_noetl_result_checks_read_as_intent() -> None:
    summary = {"steps": {"s": {"status": "done", "result": {"data": {"message": "hi"}}}}}
    checks = [
        {"step": "s", "field": "status", "value": "success"},
        {"step": "s", "field": "data.message", "value": "hi"},
    ]
    assert corpus_run.check_results(summary, checks) == []
    wrong = [{"step": "s", "field": "data.message", "value": "bye"}]
    assert corpus_run.check_results(summary, wrong) == ["s.data.message = 'hi', expected 'bye'"]


@pytest.mark.slow
def test_the_noetl_sample_runs_to_noetls_outcome() -> None:
    folder = NOETL_CORPUS
    if not folder.is_dir():
        pytest.skip(NOETL_MISSING)
    rows = corpus_run.run_corpus(SHARED, only="corpus/noetl/", jobs=2)
    by_outcome: dict[str, list[str]] = {}
    for row in rows:
        by_outcome.setdefault(row.outcome, []).append(row.file)
    ran = len(by_outcome.get("passed", [])) + len(by_outcome.get("failed", []))
    print(
        f"\ncorpus/noetl: {len(rows)} playbooks, {ran} need no outside service: "
        f"{len(by_outcome.get('passed', []))} reach NoETL's outcome, "
        f"{len(by_outcome.get('failed', []))} do not, "
        f"{len(by_outcome.get('rejected', []))} rejected by the compiler, "
        f"{len(by_outcome.get('skipped', []))} skipped (outside services)"
    )
    for row in rows:
        if row.again:
            print(f"passed only when run again alone: {row.file} (first: {row.again})")
    unexpected = [
        f"{row.file}: {row.status}: {row.error}"
        for row in rows
        if row.outcome in ("failed", "rejected") and row.file not in KNOWN
    ]
    assert unexpected == []
    assert len(by_outcome.get("passed", [])) >= 28  # measured: 28 (25 before the stand-in)


def test_a_database_file_made_by_a_playbook_that_needs_a_service_is_an_outside_need(
    tmp_path: Path,
) -> None:
    writer = tmp_path / "make.yaml"
    writer.write_text(
        "workflow:\n"
        "  - step: s\n"
        "    tool: {kind: http, url: 'https://storage.example.com/x'}\n"
        "  - step: t\n"
        "    tool: {kind: duckdb, database: /tmp/x-state.duckdb, "
        "command: 'CREATE TABLE r (a INT)'}\n"
    )
    reader = tmp_path / "read.yaml"
    reader.write_text(
        "workflow:\n"
        "  - step: s\n"
        "    tool: {kind: duckdb, database: /tmp/x-state.duckdb, command: 'SELECT * FROM r'}\n"
    )
    items = [
        (writer, corpus_run.Row(file="corpus/noetl/make.yaml", dialect="canonical")),
        (reader, corpus_run.Row(file="corpus/noetl/read.yaml", dialect="canonical")),
    ]
    found = corpus_run.data_producers(items, {}, "postgresql://x", "nats://y")
    assert list(found) == [reader.resolve()]
    assert "made by make.yaml" in found[reader.resolve()]
    assert "storage.example.com" in found[reader.resolve()]


_MAKER = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: make, path: make}
workflow:
  - step: start
    tool: {kind: http, url: "URL"}
"""


def _failing_on_table(tmp_path: Path, table: str, url: str) -> tuple[Path, Any]:
    (tmp_path / "e2e").mkdir()
    (tmp_path / "e2e" / "make.yaml").write_text(_MAKER.replace("URL", url))
    use = tmp_path / "e2e" / "use.yaml"
    use.write_text(_MAKER.replace("URL", "http://127.0.0.1:9/x"))
    row = corpus_run.Row(file="e2e/use.yaml", dialect="canonical", outcome="failed")
    row.error = f'step count: relation "{table}" does not exist'
    return use, row


def test_a_run_failing_on_a_table_only_other_playbooks_create_is_skipped(tmp_path: Path) -> None:
    corpus_run.TABLE_MAKERS.clear()
    corpus_run.TABLE_MAKERS.update({"stress_items": ["e2e/make.yaml"]})
    args = ({}, 90.0, {}, "postgresql://x", "nats://y")
    try:
        use, row = _failing_on_table(
            tmp_path, "public.stress_items", "https://storage.example.com/"
        )
        corpus_run.data_from_elsewhere(use, row, *args)
        assert row.outcome == "skipped" and "made by make.yaml" in row.reason
        assert "does not run here: make.yaml needs HTTP host storage.example.com" in row.reason
        own = corpus_run.Row(file="e2e/use.yaml", dialect="canonical", outcome="failed")
        own.error = 'step count: relation "other_table" does not exist'
        corpus_run.data_from_elsewhere(use, own, *args)
        assert own.outcome == "failed"  # nothing in the corpus makes it: a real failure
    finally:
        corpus_run.TABLE_MAKERS.clear()


def test_a_run_failing_on_a_table_another_playbook_makes_here_runs_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NoETL's suite runs its playbooks one after another in one database: the maker runs
    # first, on the same database, and the playbook again after it
    ran: list[str] = []

    def run_one(path: Path, row: Any, env: dict[str, str], limit: float | None = None) -> None:
        ran.append(path.name)
        row.outcome, row.status = "passed", "completed"

    monkeypatch.setattr(corpus_run, "run_one", run_one)
    monkeypatch.setattr(corpus_run, "_compile", lambda path, env: [])
    corpus_run.TABLE_MAKERS.clear()
    corpus_run.TABLE_MAKERS.update({"stress_items": ["e2e/make.yaml"]})
    try:
        use, row = _failing_on_table(tmp_path, "stress_items", "http://127.0.0.1:9/make")
        corpus_run.data_from_elsewhere(use, row, {}, 90.0, {}, "postgresql://x", "nats://y")
    finally:
        corpus_run.TABLE_MAKERS.clear()
    assert ran == ["make.yaml", "use.yaml"]
    assert row.outcome == "passed" and row.reason.startswith("run after make.yaml made table")


def test_a_child_counts_only_through_a_parent_that_runs() -> None:
    Row = corpus_run.Row
    child = Row(file="c.yaml", dialect="canonical")
    skipped = Row(file="p1.yaml", dialect="canonical", outcome="skipped", reason="HTTP host x")
    rejected = Row(file="p2.yaml", dialect="canonical", outcome="rejected", error="NOE101 bad")
    # no parent runs: not counted, the reasons named (the runner then runs it on its own)
    assert corpus_run.through_parent(child, [skipped, rejected]) is False
    assert "p1.yaml does not run (skipped: HTTP host x)" in child.reason
    assert "p2.yaml does not run (rejected: NOE101 bad)" in child.reason
    failed = Row(file="p3.yaml", dialect="canonical", outcome="failed", error="step s: boom")
    passed = Row(file="p4.yaml", dialect="canonical", outcome="passed", status="completed")
    assert corpus_run.through_parent(child, [skipped, failed]) is True
    assert (child.outcome, child.error) == ("failed", "its parent failed: step s: boom")
    assert corpus_run.through_parent(child, [failed, passed]) is True
    assert (child.outcome, child.reason) == ("passed", "runs as the child of p4.yaml (passed)")


def test_the_e2e_test_servers_urls_point_at_the_stand_in(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "data"
    folder = root / "corpus" / "noetl"
    folder.mkdir(parents=True)
    (folder / "v10__p.yaml").write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p, path: p}\n"
        "workload: {api_url: 'http://paginated-api.test-server.svc.cluster.local:5555'}\n"
        "workflow: [{step: start, tool: {kind: http, url: '{{ workload.api_url }}/health'}}]\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    [(path, _row)] = corpus_run.collect(root, work, None, "http://127.0.0.1:9")
    assert "http://127.0.0.1:9" in path.read_text() and "paginated-api" not in path.read_text()
    assert corpus_run.outside_services({}, path.read_text(), path, {}) == []
    shutil.rmtree(work)


def test_a_file_noetl_fails_is_expected_to_fail(tmp_path: Path) -> None:
    # the outcome NoETL's engine gives the file, not its configuration's: failed on both
    # is a match (the file here is a stand-in with that name)
    name = "corpus/noetl/v10__pagination__pipeline__test_pipeline_error_handling.yaml"
    assert corpus_run.NOETL_OUTCOMES[name][0] == "failed"
    root = tmp_path / "data"  # a stand-in for the third-party folder
    path = root / name
    path.parent.mkdir(parents=True)
    path.write_text("workflow: [{step: start, tool: {kind: noop}}]\n", encoding="utf-8")
    [(_, row)] = corpus_run.collect(root, tmp_path / "work", None)
    assert (row.file, row.expected) == (name, "failed")
    assert set(corpus_run.KNOWN_DIFFERENCES).isdisjoint(corpus_run.NOETL_OUTCOMES)
