"""`check`/`lint` on a NoETL repository: other resource kinds are skipped with a note,
`--exclude GLOB` leaves files out, and a summary line per kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from noetlc.cli import noetlc_main as cli
from noetlc.cli.noetlc_commands.resources import declared_kind, is_playbook_kind

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: p, path: tests/p}
workflow:
  - step: start
    tool: {kind: noop}
"""
BROKEN = PLAYBOOK.replace("kind: noop", "kind: nop")
CREDENTIAL = """\
# kind: Playbook  (a comment is not the file's kind)
apiVersion: noetl.io/v2
kind: Credential
name: pg_local
type: postgres
data: {host: localhost}
"""
SUBSCRIPTION = "apiVersion: noetl.io/v1\nkind: 'Subscription'\nmetadata: {name: s}\nspec: {}\n"


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "playbooks" / "broken_playbooks").mkdir(parents=True)
    (tmp_path / "credentials").mkdir()
    (tmp_path / "playbooks" / "a.yaml").write_text(PLAYBOOK, encoding="utf-8")
    (tmp_path / "playbooks" / "b.yaml").write_text(PLAYBOOK, encoding="utf-8")
    (tmp_path / "playbooks" / "broken_playbooks" / "c.yaml").write_text(BROKEN, encoding="utf-8")
    (tmp_path / "credentials" / "pg.yaml").write_text(CREDENTIAL, encoding="utf-8")
    (tmp_path / "sub.yaml").write_text(SUBSCRIPTION, encoding="utf-8")
    return tmp_path


def test_other_resource_kinds_are_skipped_with_a_note_and_counted_per_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    assert cli.main(["check", "--no-cache", str(root)]) == 1  # c.yaml: misspelt tool kind
    err = capsys.readouterr().err
    assert "pg.yaml: note: `kind: Credential` is a NoETL credential resource" in err
    assert "sub.yaml: note: `kind: Subscription` is a NoETL event subscription" in err
    assert "  Playbook: 3 file(s), 2 clean, 1 with errors" in err
    assert "  Credential: 1 file(s) skipped (not a playbook)" in err
    assert "  Subscription: 1 file(s) skipped (not a playbook)" in err
    assert "3 file(s) checked: 1 error(s)" in err


def test_exclude_leaves_out_folders_names_and_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    assert cli.main(["check", "--no-cache", "--exclude", "broken_playbooks", str(root)]) == 0
    assert "2 file(s) checked: 0 error(s)" in capsys.readouterr().err
    argv = ["check", "--format", "json", "--exclude", "playbooks/b.*", "--exclude", "c.yaml"]
    assert cli.main([*argv, str(root)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["files"] == 1
    assert sorted(Path(s["file"]).name for s in payload["skipped"]) == ["pg.yaml", "sub.yaml"]
    assert cli.main(["lint", "--exclude", "broken_*", str(root)]) == 0
    assert "  Credential: 1 file(s) skipped" in capsys.readouterr().err


def test_a_misspelt_playbook_kind_is_checked_not_skipped(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(PLAYBOOK.replace("kind: Playbook", "kind: Playbok"), encoding="utf-8")
    assert declared_kind(str(path)) == "Playbok"
    assert is_playbook_kind("Playbok") and is_playbook_kind(None) and is_playbook_kind("playbook")
    assert not is_playbook_kind("Credential") and not is_playbook_kind("Cluster")
    assert cli.main(["check", "--no-cache", str(path)]) == 1  # NOE104 on the kind


def test_a_folder_of_resources_only_checks_nothing_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pg.yaml").write_text(CREDENTIAL, encoding="utf-8")
    assert cli.main(["check", str(tmp_path)]) == 0
    assert "0 file(s) checked" in capsys.readouterr().err


def test_yaml_files_that_are_no_noetl_resource_are_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.yaml").write_text(PLAYBOOK, encoding="utf-8")
    (tmp_path / "config.yaml").write_text("version: 1\nplaybooks:\n  - path: p\n", encoding="utf-8")
    no_kind = PLAYBOOK.replace("kind: Playbook\n", "")
    (tmp_path / "no_kind.yaml").write_text(no_kind, encoding="utf-8")  # still a playbook
    assert cli.main(["check", "--no-cache", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "config.yaml: note: no `apiVersion`, `kind`, `metadata` or `workflow`" in err
    assert "  other YAML: 1 file(s) skipped" in err
    assert "2 file(s) checked" in err


def test_other_systems_resources_are_skipped_by_their_api_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.yaml").write_text(PLAYBOOK, encoding="utf-8")
    (tmp_path / "secret.yaml").write_text(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n", encoding="utf-8"
    )
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: gui\nversion: 1.0.0\n")
    assert cli.main(["check", "--no-cache", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "secret.yaml: note: `kind: Secret` of `apiVersion: v1` is not a NoETL resource" in err
    assert "Chart.yaml: note: `apiVersion: v2` is not a NoETL resource" in err
    assert "  Secret (v1): 1 file(s) skipped" in err and "  other YAML (v2): 1 file(s)" in err
    assert "1 file(s) checked" in err


def test_a_file_named_on_the_command_line_is_checked_unless_it_is_another_noetl_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "notes.yaml"
    text.write_text("just some words\n", encoding="utf-8")
    chart = tmp_path / "Chart.yaml"
    chart.write_text("apiVersion: v2\nname: gui\n", encoding="utf-8")
    cred = tmp_path / "pg.yaml"
    cred.write_text(CREDENTIAL, encoding="utf-8")
    assert cli.main(["check", "--no-cache", str(text), str(chart), str(cred)]) == 1
    err = capsys.readouterr().err
    assert "2 file(s) checked" in err and "pg.yaml: note: `kind: Credential`" in err
    # through the folder, the first two are skipped as no NoETL resource
    assert cli.main(["check", "--no-cache", str(tmp_path)]) == 0
