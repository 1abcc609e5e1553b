"""`noetl-vm serve` refusals and `noetl-vm catalog`; `noetlc --version` does not load the
service's dependencies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VM = [sys.executable, "-m", "noetlc.cli.vm_main"]


def vm(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v for k, v in os.environ.items() if k not in ("NOETL_CREDENTIAL_KEY", "NOETL_API_TOKEN")
    }
    environ.update(env or {})
    return subprocess.run(
        [*VM, *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=60
    )


def test_serve_refuses_without_a_key_or_token(tmp_path: Path) -> None:
    exposed = vm("serve", "--host", "0.0.0.0", cwd=tmp_path)
    assert (
        exposed.returncode == 2 and "error[NOE875]" in exposed.stderr and "hint:" in exposed.stderr
    )
    bad_key = vm("serve", "--port", "1", cwd=tmp_path, env={"NOETL_CREDENTIAL_KEY": "abc"})
    assert bad_key.returncode == 2 and "error[NOE874]" in bad_key.stderr
    assert "Traceback" not in exposed.stderr + bad_key.stderr


def test_the_version_does_not_import_the_service() -> None:
    code = (
        "import sys; from noetlc.cli.vm_main import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('fastapi', 'uvicorn', 'cryptography', 'starlette') or m.startswith('noetlc.service')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout + result.stderr


def test_catalog_register_list_show(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'noetl.db'}"
    hello = REPO / "examples" / "hello.yaml"
    first = vm("catalog", "register", str(hello), "--db", db, cwd=tmp_path)
    assert first.returncode == 0 and first.stdout.strip().endswith("examples/hello v1")
    same = vm("catalog", "register", str(hello), "--db", db, "--json", cwd=tmp_path)
    assert json.loads(same.stdout)["version"] == 1 and json.loads(same.stdout)["created"] is False
    (tmp_path / "changed.yaml").write_text(hello.read_text().replace("world", "there"))
    assert "v2" in vm("catalog", "register", "changed.yaml", "--db", db, cwd=tmp_path).stdout
    listed = json.loads(vm("catalog", "list", "--db", db, "--json", cwd=tmp_path).stdout)
    assert [e["version"] for e in listed] == [2, 1]
    shown = vm(
        "catalog", "show", "examples/hello", "--version", "1", "--source", "--db", db, cwd=tmp_path
    )
    assert "name: world" in shown.stdout
    missing = vm("catalog", "show", "nope", "--db", db, cwd=tmp_path)
    assert missing.returncode == 1 and "error[NOE871]" in missing.stderr
    (tmp_path / "bad.yaml").write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: bad}\nworkflow:\n"
        "  - step: start\n    next: nowhere\n"
    )
    bad = vm("catalog", "register", "bad.yaml", "--db", db, cwd=tmp_path)
    assert bad.returncode == 1 and "bad.yaml:5:5: error[NOE206]" in bad.stderr
