"""Embedded mode's `keychain` template namespace is `Keychain.namespace()`, as in workers:
entries a provider has are resolved (and redacted), a declared entry nobody set stays
undefined until a task needs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetlc.compiler.pipeline import compile_file
from noetlc.runtime.embedded import run_embedded

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: namespace, path: tests/namespace}
keychain:
  - {name: present_token, kind: bearer}
  - {name: absent_token, kind: bearer}
workflow:
  - step: start
    tool:
      kind: python
      input: {token: "{{ keychain.present_token }}"}
      code: |
        result = {"length": len(token), "echo": token}
"""


def test_set_entries_resolve_and_unset_unused_ones_do_not_fail_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no .noetl/keychain.yaml
    monkeypatch.delenv("NOETL_KEYCHAIN_ABSENT_TOKEN", raising=False)
    monkeypatch.setenv("NOETL_KEYCHAIN_PRESENT_TOKEN", "n4mespace-secret")
    playbook = tmp_path / "namespace.yaml"
    playbook.write_text(PLAYBOOK)
    summary = run_embedded(compile_file(str(playbook)).artifacts["payload"], {})
    assert summary["status"] == "completed", summary["error"]
    assert summary["steps"]["start"]["result"] == {"length": 16, "echo": "***"}
