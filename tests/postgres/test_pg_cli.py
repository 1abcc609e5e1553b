"""`noetl-vm db upgrade|status` in a subprocess: clean messages, stable codes, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from noetlc.runtime.postgres.migrate import migrations

pytestmark = pytest.mark.postgres


def noetl_vm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "noetlc.cli.vm_main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("postgresql://postgres@127.0.0.1:1/postgres", "NOE805"),
        ("postgresql://postgres@host.invalid/postgres?connect_timeout=5", "NOE805"),
        ("postgresql://postgres@127.0.0.1:notaport/postgres", "NOE806"),
        ("mysql://root@127.0.0.1/noetl", "NOE806"),
        ("postgresql://postgres@127.0.0.1/postgres?schema=bad-name", "NOE806"),
        ("postgresql://postgres@127.0.0.1/postgres?flavour=x", "NOE806"),
    ],
)
def test_bad_urls_give_a_code_a_hint_and_exit_5(url, code):
    for action in ("upgrade", "status"):
        result = noetl_vm("db", action, "--db", url)
        assert result.returncode == 5, result.stderr  # the database cannot be used
        assert f"error[{code}]" in result.stderr and "hint:" in result.stderr
        assert "Traceback" not in result.stderr


def test_a_database_that_rejects_us_gives_noe807(pg_url):
    dsn = pg_url.split("?")[0].rsplit("/", 1)[0] + "/noetl_no_such_database"
    result = noetl_vm("db", "upgrade", "--db", dsn)
    assert result.returncode == 5
    assert "error[NOE807]" in result.stderr and "noetl_no_such_database" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_database_is_a_usage_error():
    env = {"NOETL_DB": ""}
    result = noetl_vm("db", "upgrade", env=env)
    assert result.returncode == 2 and "error[NOE800]" in result.stderr
    result = noetl_vm("db")
    assert result.returncode == 2 and "error[NOE800]" in result.stderr


def test_upgrade_then_status(fresh_url):
    status = noetl_vm("db", "status", "--db", fresh_url, "--json")
    assert status.returncode == 1, status.stderr
    shipped = [f"{m.version:04d}_{m.name}" for m in migrations()]
    assert shipped[:4] == ["0001_init", "0002_batched_rounds", "0003_fenced_finish", "0004_catalog"]
    assert json.loads(status.stdout)["pending"] == shipped
    first = noetl_vm("db", "upgrade", "--db", fresh_url)
    assert first.returncode == 0, first.stderr
    assert "applied 0001_init" in first.stdout
    assert all(f"applied {name}" in first.stdout for name in shipped)
    second = noetl_vm("db", "upgrade", "--json", env={"NOETL_DB": fresh_url})
    assert second.returncode == 0
    assert json.loads(second.stdout)["applied_now"] == []
    status = noetl_vm("db", "status", "--db", fresh_url)
    assert status.returncode == 0 and "current" in status.stdout
    assert "Traceback" not in status.stderr + first.stderr
