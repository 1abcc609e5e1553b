"""A keychain entry that is not set fails its task at run time with NOE812's hint: the
environment variable to export or the file to add it to, printed under the failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetlc.cli import vm_main

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: kc, path: t/kc}
workflow:
  - step: start
    tool: {kind: postgres, auth: pg_main_for_hint, query: "SELECT 1"}
"""


def test_a_missing_keychain_entry_fails_with_the_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOETL_KEYCHAIN_PG_MAIN_FOR_HINT", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kc.yaml").write_text(PLAYBOOK, encoding="utf-8")
    assert vm_main.main(["run", "kc.yaml", "--db", "memory:"]) == 1
    err = capsys.readouterr().err
    assert "keychain entry `pg_main_for_hint` is not set" in err
    assert "  hint: set the environment variable NOETL_KEYCHAIN_PG_MAIN_FOR_HINT" in err
