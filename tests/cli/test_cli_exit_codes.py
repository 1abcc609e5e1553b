"""Both command lines against one table of exit codes: every command, the same problem gives
the same code and a stable NOE code on standard error, and never a traceback.

The table of codes itself is `EXIT_CODES` in cli/common.py; docs/cli.md shows it (tested here).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from noetlc.cli import noetlc_main, vm_main
from noetlc.cli.common import EXIT_CODES
from noetlc.runtime.event_store import DEFAULT_URL, SQLiteStore

REPO = Path(__file__).resolve().parents[2]
GOOD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: good}
workload: {n: 1}
workflow:
  - step: start
    tool: {kind: noop}
"""
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=2"
MAINS: dict[str, Callable[[list[str]], int]] = {
    "noetlc": noetlc_main.main,
    "noetl-vm": vm_main.main,
}


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a playbook, a store holding one finished execution `done-1`, an empty
    folder and a file that blocks a path; NOETL_DB unset."""
    monkeypatch.delenv("NOETL_DB", raising=False)
    monkeypatch.delenv("NOETL_CREDENTIAL_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.yaml").write_text(GOOD)
    (tmp_path / "empty").mkdir()
    (tmp_path / "blocker").write_text("a file, not a folder")
    store = SQLiteStore(str(tmp_path / "s.db"))
    store.create_execution("done-1", "good")
    store.finish_execution("done-1", "completed", {"status": "completed"})
    store.close()
    return tmp_path


STORE = "sqlite:///s.db"
TYPO = "sqlite:///typo/noetl.db"

# (command line, exit code, what the command must say; `check` and `lint` print their
# diagnostics on standard output, every other message goes to standard error)
CASES: list[tuple[str, int, str]] = [
    # noetlc
    ("noetlc check missing.yaml", 1, "error[NOE004]"),
    ("noetlc check empty", 2, "error[NOE800]: no playbook"),
    ("noetlc lint empty", 2, "error[NOE800]: no playbook"),
    ("noetlc lint missing.yaml", 1, "error[NOE004]"),
    ("noetlc check --until nope good.yaml", 2, "error[NOE800]"),
    ("noetlc explain NOE999", 2, "error[NOE801]"),
    ("noetlc expr '{{ x }}' --vars nojson", 2, "error[NOE800]"),
    ("noetlc schema -o blocker/x.json", 2, "error[NOE802]"),
    ("noetlc migrate missing.yaml", 1, "error[NOE004]"),
    ("noetlc compile missing.yaml -o out.nbc", 1, "error[NOE004]"),
    ("noetlc compile good.yaml -o blocker/x.nbc", 2, "error[NOE802]"),
    ("noetlc compile good.yaml --emit ir -o blocker/x.txt", 2, "error[NOE802]"),
    ("noetlc dis missing.nbc", 1, "error[NOE004]"),
    ("noetlc graph missing.yaml", 1, "error[NOE004]"),
    ("noetlc nocommand", 2, "error[NOE800]"),
    # noetl-vm: options and files
    ("noetl-vm run good.yaml --workload missing.yaml --db memory:", 2, "error[NOE004]"),
    ("noetl-vm run good.yaml --keychain missing.yaml --db memory:", 2, "error[NOE800]"),
    ("noetl-vm run good.yaml --set novalue --db memory:", 2, "error[NOE800]"),
    ("noetl-vm run missing.yaml --db memory:", 1, "error[NOE004]"),
    ("noetl-vm resume done-1 --keychain missing.yaml --db " + STORE, 2, "error[NOE800]"),
    ("noetl-vm signal done-1 go --data nojson --db " + STORE, 2, "error[NOE800]"),
    ("noetl-vm status --limit 0 --db " + STORE, 2, "error[NOE800]"),
    ("noetl-vm status --since yesterday-ish --db " + STORE, 2, "error[NOE800]"),
    ("noetl-vm submit good.yaml", 2, "error[NOE800]: distributed mode needs a database"),
    ("noetl-vm server", 2, "error[NOE800]"),
    ("noetl-vm worker", 2, "error[NOE800]"),
    ("noetl-vm db status", 2, "error[NOE800]"),
    (f"noetl-vm submit good.yaml --db {UNREACHABLE} --wait --timeout -1", 2, "error[NOE800]"),
    (f"noetl-vm submit good.yaml --db {UNREACHABLE} --timeout 5", 2, "error[NOE800]"),
    (f"noetl-vm worker --db {UNREACHABLE} --keychain missing.yaml", 2, "error[NOE800]"),
    # the store or database cannot be used
    ("noetl-vm run good.yaml --db mysql://x", 5, "error[NOE803]"),
    ("noetl-vm run good.yaml --db sqlite:///blocker/e.db", 5, "error[NOE803]"),
    (f"noetl-vm status --db {TYPO}", 5, "error[NOE803]: no event store at typo/noetl.db"),
    (f"noetl-vm events done-1 --db {TYPO}", 5, "error[NOE803]"),
    (f"noetl-vm replay done-1 --db {TYPO}", 5, "error[NOE803]"),
    (f"noetl-vm resume done-1 --db {TYPO}", 5, "error[NOE803]"),
    (f"noetl-vm cancel done-1 --db {TYPO}", 5, "error[NOE803]"),
    (f"noetl-vm signal done-1 go --db {TYPO}", 5, "error[NOE803]"),
    (f"noetl-vm status --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm events x --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm replay x --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm resume x --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm cancel x --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm signal x go --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm submit good.yaml --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm server --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm worker --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm db status --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm db upgrade --db {UNREACHABLE}", 5, "error[NOE805]"),
    ("noetl-vm db status --db mysql://root@h/x", 5, "error[NOE806]"),
    ("noetl-vm serve --host 0.0.0.0", 2, "error[NOE875]"),
    ("noetl-vm completion tcsh", 2, "error[NOE800]"),
    ("noetl-vm run catalog://no/such --db " + STORE, 2, "error[NOE871]"),
    ("noetl-vm serve --port 99999", 2, "error[NOE800]"),
    ("noetl-vm serve --token short --db memory:", 2, "error[NOE882]"),
    ("noetl-vm serve --credential-key-file typo/key --db memory:", 2, "error[NOE874]"),
    (f"noetl-vm catalog list --db {UNREACHABLE}", 5, "error[NOE805]"),
    (f"noetl-vm catalog list --db {TYPO}", 5, "error[NOE803]"),
    (f"noetl-vm catalog show nothing/here --db {STORE}", 1, "error[NOE871]"),
    ("noetl-vm catalog register missing.yaml --db memory:", 1, "error[NOE004]"),
    ("noetl-vm server --db sqlite:///x.db", 5, "error[NOE806]"),
    # the execution named cannot take the request
    ("noetl-vm status nope --db " + STORE, 4, "error[NOE804]"),
    ("noetl-vm events nope --db " + STORE, 4, "error[NOE804]"),
    ("noetl-vm replay nope --db " + STORE, 4, "error[NOE804]"),
    ("noetl-vm resume nope --db " + STORE, 4, "error[NOE804]"),
    ("noetl-vm cancel nope --db " + STORE, 4, "error[NOE804]"),
    ("noetl-vm signal nope go --db " + STORE, 4, "error[NOE804]"),
    ("noetl-vm resume done-1 --db " + STORE, 4, "error[NOE856]: execution done-1 already ended"),
    ("noetl-vm cancel done-1 --db " + STORE, 4, "error[NOE856]"),
    ("noetl-vm signal done-1 go --db " + STORE, 4, "error[NOE856]"),
    ("noetl-vm replay done-1 --db " + STORE, 4, "error[NOE857]"),
]


def _argv(line: str) -> tuple[Callable[[list[str]], int], list[str]]:
    import shlex

    prog, *argv = shlex.split(line)
    return MAINS[prog], argv


@pytest.mark.parametrize(("line", "code", "message"), CASES, ids=[c[0] for c in CASES])
def test_exit_code_and_message(
    ws: Path, capsys: pytest.CaptureFixture[str], line: str, code: int, message: str
) -> None:
    main, argv = _argv(line)
    assert main(argv) == code, capsys.readouterr()
    captured = capsys.readouterr()
    said = captured.err if line.split()[1] not in ("check", "lint") else captured.out + captured.err
    assert message in said and "Traceback" not in captured.err, captured
    assert not (ws / "typo").exists()  # a read-only command created no store


def test_every_command_is_in_the_table() -> None:
    tried = {tuple(line.split()[:2]) for line, _, _ in CASES}
    for prog, table in (("noetlc", noetlc_main.COMMANDS), ("noetl-vm", vm_main.COMMANDS)):
        for name, _module, _help in table:
            assert (prog, name) in tried or name in ("explain", "expr") or prog == "noetlc", name
    every = {name for name, _m, _h in vm_main.COMMANDS}
    assert every <= {line.split()[1] for line, _, _ in CASES}


def test_every_exit_code_of_the_table_is_tried() -> None:
    tried = {code for _line, code, _m in CASES}
    assert {1, 2, 4, 5} <= tried
    assert {code for code, _ in EXIT_CODES} == {0, 1, 2, 3, 4, 5, 70, 130}


def test_docs_show_the_exit_code_table() -> None:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", text, flags=re.M)
    assert [(int(c), meaning) for c, meaning in rows] == EXIT_CODES


def test_noetl_db_is_honoured_by_every_store_command(
    ws: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NOETL_DB", TYPO)
    for argv in (
        ["status"],
        ["events", "x"],
        ["replay", "x"],
        ["resume", "x"],
        ["cancel", "x"],
        ["signal", "x", "go"],
    ):
        assert vm_main.main(argv) == 5, argv
        assert "no event store at typo/noetl.db" in capsys.readouterr().err
    monkeypatch.setenv("NOETL_DB", STORE)
    assert vm_main.main(["status", "done-1"]) == 0
    assert "done-1" in capsys.readouterr().out
    assert vm_main.main(["run", "good.yaml", "--quiet"]) == 0
    assert (ws / "s.db").exists() and not (ws / ".noetl").exists()


def test_the_default_store_url_is_the_runtime_default() -> None:
    from noetlc.cli.vm_commands.history import DEFAULT_URL as CLI_DEFAULT

    assert CLI_DEFAULT == DEFAULT_URL


# every user-error class with its own outcome: (class, exit code, HTTP status of the service)
KINDS_OF_CLASSES: list[tuple[str, int, int]] = [
    ("noetlc.diagnostics.errors:UserError", 1, 400),
    ("noetlc.cli.common:UsageError", 2, 400),
    ("noetlc.stdlib_tools.keychain:KeychainError", 2, 400),
    ("noetlc.runtime.credentials:CredentialKeyError", 2, 400),
    ("noetlc.cli.common:ExecutionStateError", 4, 400),
    ("noetlc.runtime.ownership:OwnedError", 4, 400),
    ("noetlc.cli.common:UnavailableError", 5, 503),
    ("noetlc.runtime.event_store:StoreError", 5, 503),
    ("noetlc.runtime.postgres.errors:DatabaseError", 5, 503),
]


@pytest.mark.parametrize(("where", "exit_code", "status"), KINDS_OF_CLASSES)
def test_one_kind_gives_the_exit_code_and_the_http_status(
    where: str, exit_code: int, status: int
) -> None:
    """Both front ends read the error's kind (diagnostics/errors.py's OUTCOMES)."""
    from importlib import import_module

    from noetlc.cli.common import exit_code_for
    from noetlc.service.app import http_status_for

    module, name = where.split(":")
    error = getattr(import_module(module), name)("NOE803", "problem", None)
    assert (exit_code_for(error), http_status_for(error)) == (exit_code, status)


def test_every_kind_has_a_row_in_the_exit_code_table() -> None:
    from noetlc.diagnostics.errors import OUTCOMES

    assert {o.exit_code for o in OUTCOMES.values()} <= {code for code, _ in EXIT_CODES}
