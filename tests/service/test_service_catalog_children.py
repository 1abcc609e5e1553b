"""`kind: playbook` tasks name catalog paths: `catalog://PATH@VERSION`, `PATH@VERSION`, or a
path that is not a file (the latest version) — in embedded runs through the API, in the
`noetl-vm run` command line on the same store, and in distributed runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from noetlc.runtime.catalog import SQLiteCatalog
from noetlc.runtime.children import catalog_reference, compile_child
from noetlc.runtime.ids import is_execution_id
from noetlc.service.registry import register as register_entry
from noetlc.service.testing import register, wait_done

REPO = Path(__file__).resolve().parents[2]
CHILD = (REPO / "tests" / "vm" / "playbooks" / "child" / "double.yaml").read_text()


def parent(path: str) -> str:
    return f"""apiVersion: noetl.io/v2
kind: Playbook
metadata: {{name: parent_catalog, path: t/parent}}
workflow:
  - step: start
    tool:
      - name: call_child
        kind: playbook
        path: "{path}"
        args: {{n: 21}}
        wait: true
      - name: use
        kind: python
        input: {{doubled: "{{{{ call_child }}}}"}}
        code: |
          result = {{"doubled": doubled}}
"""


def test_catalog_references() -> None:
    assert catalog_reference("catalog://a/b@3") == ("a/b", 3)
    assert catalog_reference("a/b@latest") == ("a/b", None)
    assert catalog_reference("a/b") == ("a/b", None)
    assert catalog_reference("mail@example") == ("mail@example", None)


def test_compile_child_prefers_files_then_the_catalog(tmp_path: Path) -> None:
    catalog = SQLiteCatalog(":memory:")
    register_entry(catalog, CHILD, "Playbook")
    register_entry(catalog, CHILD.replace("result = n * 2", "result = n * 3"), "Playbook")
    latest, _ = compile_child("tests/child/double", catalog)
    first, _ = compile_child("catalog://tests/child/double@1", catalog)
    assert latest is not None and first is not None
    assert latest != first
    missing, failed = compile_child("tests/nothing@2", catalog)
    assert missing is None and failed is not None
    assert (
        failed["error"]["code"] == "NOE004"
        and "catalog entry tests/nothing version 2" in (failed["error"]["message"])
    )
    no_catalog, failed = compile_child("tests/child/double")
    assert (
        no_catalog is None
        and failed is not None
        and "no playbook file" in failed["error"]["message"]
    )


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("tests/child/double", 63),
        ("catalog://tests/child/double@1", 42),
        ("tests/child/double@2", 63),
    ],
)
async def test_an_api_execution_runs_a_catalog_child(
    api: httpx.AsyncClient, ref: str, expected: int
) -> None:
    await register(api, CHILD)
    await register(api, CHILD.replace("result = n * 2", "result = n * 3"))
    await register(api, parent(ref))
    started = (await api.post("/api/execute", json={"path": "t/parent"})).json()
    status = await wait_done(api, started["execution_id"])
    detail = (await api.get(f"/api/executions/{started['execution_id']}")).json()
    assert status["status"] == "COMPLETED", detail
    assert detail["result"] == {"doubled": expected}
    children = [e for e in (await api.get("/api/executions")).json() if e["parent_execution_id"]]
    assert [c["parent_execution_id"] for c in children] == [started["execution_id"]]
    # the API's ids are NoETL's snowflake integers, as decimal strings, a child's too
    assert all(is_execution_id(c["execution_id"]) for c in children)
    assert is_execution_id(started["execution_id"])


def test_noetl_vm_run_finds_children_in_the_stores_catalog(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'noetl.db'}"
    (tmp_path / "child.yaml").write_text(CHILD)
    (tmp_path / "parent.yaml").write_text(parent("tests/child/double"))
    vm = [sys.executable, "-m", "noetlc.cli.vm_main"]
    reg = subprocess.run(
        [*vm, "catalog", "register", "child.yaml", "--db", db],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert reg.returncode == 0, reg.stderr
    assert "tests/child/double v1" in reg.stdout
    run = subprocess.run(
        [*vm, "run", "parent.yaml", "--db", db, "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["result"] == {"doubled": 42}
