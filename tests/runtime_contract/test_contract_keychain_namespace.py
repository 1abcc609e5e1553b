"""Embedded mode's `keychain` template namespace is `Keychain.namespace()`, as in workers:
entries a provider has are resolved (and redacted), a declared entry nobody set stays
undefined until a task needs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetlc.compiler.pipeline import compile_file
from noetlc.runtime.embedded import run_embedded

# declares api_token (set here) and unused_token (set nowhere, used by no task)
PLAYBOOK = Path(__file__).resolve().parents[1] / "vm" / "playbooks" / "keychain_worker.yaml"


def test_set_entries_resolve_and_unset_unused_ones_do_not_fail_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no .noetl/keychain.yaml
    monkeypatch.delenv("NOETL_KEYCHAIN_UNUSED_TOKEN", raising=False)
    monkeypatch.setenv("NOETL_KEYCHAIN_API_TOKEN", "n4mespace-secret")
    summary = run_embedded(compile_file(str(PLAYBOOK)).payload, {})
    assert summary["status"] == "completed", summary["error"]
    result = summary["steps"]["start"]["result"]
    assert result == {"token_length": len("n4mespace-secret"), "echo": "token=***"}
