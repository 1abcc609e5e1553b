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


DECLARED = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: kc2, path: t/kc2}
keychain:
  - {name: db_password_for_hint, kind: secret}
workflow:
  - step: start
    tool:
      kind: python
      input: {pw: "{{ keychain.db_password_for_hint }}"}
      code: 'result = {"n": len(pw)}'
"""


def test_a_failed_run_names_the_declared_entries_that_are_not_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOETL_KEYCHAIN_DB_PASSWORD_FOR_HINT", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kc2.yaml").write_text(DECLARED, encoding="utf-8")
    assert vm_main.main(["run", "kc2.yaml", "--db", "memory:"]) == 1
    err = capsys.readouterr().err
    assert "keychain entry `db_password_for_hint` is declared but not set" in err
    assert "NOETL_KEYCHAIN_DB_PASSWORD_FOR_HINT" in err
    # set, the same run completes and says nothing of it
    monkeypatch.setenv("NOETL_KEYCHAIN_DB_PASSWORD_FOR_HINT", "s3cret")
    assert vm_main.main(["run", "kc2.yaml", "--db", "memory:"]) == 0
    assert "declared but not set" not in capsys.readouterr().err
