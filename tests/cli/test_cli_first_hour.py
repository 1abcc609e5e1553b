"""What a new user meets in the first hour: each behaviour of the command lines that once
surprised one, with its reproduction."""

from __future__ import annotations

import importlib.util
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import noetlc_main, vm_main
from noetlc.runtime.event_store import SQLiteStore

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
GOOD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: good}
workload: {items: 3}
workflow:
  - step: start
    tool: {kind: noop}
"""


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOETL_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.yaml").write_text(GOOD)


# ------------------------------------------------------------------ compile and schema


def test_compile_never_overwrites_its_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "h2.nbc"  # YAML under a bytecode name: the default output is itself
    source.write_text(GOOD)
    assert noetlc_main.main(["compile", str(source)]) == 2
    assert "error[NOE802]" in capsys.readouterr().err
    assert source.read_text() == GOOD
    assert noetlc_main.main(["compile", "good.yaml", "-o", "good.yaml"]) == 2
    assert (tmp_path / "good.yaml").read_text() == GOOD
    assert noetlc_main.main(["compile", str(source), "-o", "h2.out.nbc"]) == 0
    assert (tmp_path / "h2.out.nbc").read_bytes().startswith(b"\x89NBC")


def test_emit_writes_to_the_output_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert noetlc_main.main(["compile", "good.yaml", "--emit", "ir", "-o", "net.txt"]) == 0
    assert (tmp_path / "net.txt").read_text().startswith("net good")
    assert capsys.readouterr().out == ""
    assert not (tmp_path / "good.nbc").exists()


# ------------------------------------------------------------------ check and lint


def test_a_file_named_twice_is_checked_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert noetlc_main.main(["check", "good.yaml", ".", str(tmp_path / "good.yaml")]) == 0
    assert "1 file(s) checked" in capsys.readouterr().err
    assert noetlc_main.main(["lint", "good.yaml", "."]) == 0
    assert "1 file(s) linted" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("hello\n", "this file holds only the text 'hello'"),
        ("42\n", "this file holds only the number 42"),
        ("- a\n- b\n", "this file holds a list"),
        ("~\n", "this file holds nothing"),
    ],
)
def test_a_playbook_that_is_not_a_mapping_says_what_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    (tmp_path / "odd.yaml").write_text(text)
    assert noetlc_main.main(["check", "odd.yaml"]) == 1
    out = capsys.readouterr().out
    assert "error[NOE005]: a playbook is a mapping of keys" in out and said in out, out


def test_python_syntax_errors_are_found_by_check(capsys: pytest.CaptureFixture[str]) -> None:
    Path("bad.yaml").write_text(
        GOOD.replace(
            "tool: {kind: noop}",
            'tool:\n      kind: python\n      code: |\n        x = 1\n        result = {"n": x\n',
        )
    )
    assert noetlc_main.main(["check", "bad.yaml"]) == 1
    out = capsys.readouterr().out
    assert "bad.yaml:11:18: error[NOE620]" in out and "'{' was never closed" in out
    Path("ok.yaml").write_text(
        GOOD.replace(
            "tool: {kind: noop}",
            "tool:\n      kind: python\n      code: |\n        return {'n': 1}\n",
        )
    )
    assert noetlc_main.main(["check", "ok.yaml"]) == 0  # a top-level return: a function body


# ------------------------------------------------------------------ help


def _subparsers(parser: Any) -> dict[str, Any]:
    import argparse

    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_help_keeps_examples_on_their_lines_and_cites_no_missing_document() -> None:
    for main in (noetlc_main, vm_main):
        for name, sub in _subparsers(main.build_parser()).items():
            text = sub.format_help()
            assert "docs/" not in text and ".md" not in text, name
    compile_help = _subparsers(noetlc_main.build_parser())["compile"].format_help()
    assert "\n    noetlc compile playbook.yaml --emit ir" in compile_help


# ------------------------------------------------------------------ run


def test_undeclared_and_infinite_overrides_are_warned(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "good.yaml", "--db", "memory:", "--set", "itmes=1", "--set", "items=1e999"]
    assert vm_main.main(argv) == 0
    err = capsys.readouterr().err
    assert "warning[NOE830]: the playbook's workload does not declare `itmes`" in err
    assert "(did you mean `items`?)" in err
    assert "warning[NOE830]: --set items=1e999 is inf (not a finite number)" in err


def test_the_text_summary_shows_each_step_result(capsys: pytest.CaptureFixture[str]) -> None:
    assert vm_main.main(["run", str(EXAMPLES / "hello.yaml"), "--db", "memory:"]) == 0
    assert '{"shout": "HELLO WORLD"}' in capsys.readouterr().out


class _Terminal:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_the_execution_id_is_printed_at_start_and_in_the_interrupt_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import noetlc.runtime.embedded as embedded

    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    seen: dict[str, str] = {}

    def interrupted(*_args: Any, execution_id: str, **_kw: Any) -> dict[str, Any]:
        seen["id"] = execution_id
        seen["printed"] = terminal.text
        raise KeyboardInterrupt

    monkeypatch.setattr(embedded, "run_embedded", interrupted)
    assert vm_main.main(["run", "good.yaml", "--db", "memory:", "--quiet"]) == 130
    assert f"execution {seen['id']}" in seen["printed"]  # before the run began
    assert f"`noetl-vm resume {seen['id']}` finishes the execution" in terminal.text


def test_a_failure_names_the_type_the_task_and_the_code_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    Path("fail.yaml").write_text(
        GOOD.replace(
            "tool: {kind: noop}",
            "tool:\n      - name: compute\n        kind: python\n        code: |\n"
            '          x = 1\n          result = {"n": x / 0}\n',
        )
    )
    assert vm_main.main(["run", "fail.yaml", "--db", "memory:"]) == 1
    err = capsys.readouterr().err
    assert "error[NOE853]: ZeroDivisionError: division by zero" in err
    assert 'in task `compute` of step `start`, line 2 of its code: result = {"n": x / 0}' in err


def test_a_timeout_names_the_task(capsys: pytest.CaptureFixture[str]) -> None:
    Path("slow.yaml").write_text(
        GOOD.replace(
            "tool: {kind: noop}",
            "tool:\n      - name: nap\n        kind: python\n"
            "        spec: {isolation: subprocess, timeout: 0.2}\n"
            "        code: |\n          import time\n          time.sleep(30)\n",
        )
    )
    assert vm_main.main(["run", "slow.yaml", "--db", "memory:"]) == 1
    err = capsys.readouterr().err
    assert "Timeout:" in err and "in task `nap` of step `start`" in err


# ------------------------------------------------------------------ status and events


def _store_with(ids: list[str], tmp_path: Path) -> str:
    store = SQLiteStore(str(tmp_path / "h.db"))
    for n, execution_id in enumerate(ids):
        store.create_execution(execution_id, "alpha" if n % 2 == 0 else "beta")
        if n < len(ids) - 1:
            summary = {"status": "completed", "events": 3, "error": None,
                       "steps": {"start": {"status": "done", "runs": 1, "result": None}}}  # fmt: skip
            store.finish_execution(execution_id, "completed", summary)
    store.close()
    return f"sqlite:///{tmp_path / 'h.db'}"


def test_unique_prefixes_are_accepted_and_ambiguous_ones_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _store_with(["abc-1", "abc-2", "xyz-9"], tmp_path)
    assert vm_main.main(["status", "abc-1", "--json", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out)["execution_id"] == "abc-1"
    assert vm_main.main(["status", "xy", "--json", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out)["execution_id"] == "xyz-9"
    assert vm_main.main(["events", "ab", "--db", db]) == 4
    assert "'ab' is the prefix of 2 executions" in capsys.readouterr().err
    assert vm_main.main(["cancel", "xyz", "--db", db]) == 0  # the running one
    assert "cancel requested for xyz-9" in capsys.readouterr().out


def test_status_of_one_execution_is_an_object_and_a_detailed_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _store_with(["abc-1", "abc-2"], tmp_path)
    assert vm_main.main(["status", "abc-1", "--json", "--db", db]) == 0
    record = json.loads(capsys.readouterr().out)
    assert isinstance(record, dict) and record["status"] == "completed"
    assert vm_main.main(["status", "abc-1", "--db", db]) == 0
    text = capsys.readouterr().out
    for line in ("execution abc-1", "status    completed", "started   ", "finished  ",
                 "done      start (runs 1)"):  # fmt: skip
        assert line in text, text


def test_the_list_filters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _store_with(["e1", "e2", "e3", "e4"], tmp_path)

    def listed(*options: str) -> list[str]:
        assert vm_main.main(["status", "--json", "--db", db, *options]) == 0
        return [r["execution_id"] for r in json.loads(capsys.readouterr().out)]

    assert listed() == ["e1", "e2", "e3", "e4"]
    assert listed("--status", "running") == ["e4"]
    assert listed("--playbook", "beta") == ["e2", "e4"]
    assert listed("--limit", "2") == ["e3", "e4"]
    assert listed("--since", "1h") == ["e1", "e2", "e3", "e4"]
    assert listed("--since", "2000-01-01") == ["e1", "e2", "e3", "e4"]
    tomorrow = time.strftime("%Y-%m-%d", time.localtime(time.time() + 86400))
    assert listed("--since", tomorrow) == []
    assert vm_main.main(["status", "e1", "--limit", "1", "--db", db]) == 2


def test_events_text_has_the_time_and_the_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    assert vm_main.main(["run", str(EXAMPLES / "retry.yaml"), "--json", "--db", db]) == 0
    execution = json.loads(capsys.readouterr().out.splitlines()[-1])["execution_id"]
    assert vm_main.main(["events", execution[:8], "--db", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(re.match(r"\s*\d+  \d\d:\d\d:\d\d\.\d{3}  ", line) for line in lines), lines
    retried = [line for line in lines if " task.retry " in line]
    assert retried and "attempt 1 failed, retry in" in retried[0]
    failed = [line for line in lines if " task.done " in line and "status error" in line]
    assert failed and "ConnectionError: service busy" in failed[0]


# ------------------------------------------------------------------ graph and messages


def test_the_net_graph_shows_guards_and_visible_dead_paths() -> None:
    from noetlc.compiler.pipeline import compile_file
    from noetlc.ir.graph import to_dot, to_mermaid

    payload = compile_file(EXAMPLES / "fanout_join.yaml").payload
    dot = to_dot(payload, "net")
    assert "when {{" in dot
    dead = [line for line in dot.splitlines() if "\\ndead" in line]
    assert dead and all('style="filled,dashed"' in line for line in dead)
    mermaid = to_mermaid(payload, "net")
    assert "when {{" in mermaid and "classDef dead fill:" in mermaid


def test_a_database_url_error_says_what_is_wrong() -> None:
    from noetlc.runtime.postgres.connect import parse_url
    from noetlc.runtime.postgres.errors import DatabaseError

    with pytest.raises(DatabaseError) as info:
        parse_url("localhost/noetl")
    assert "a PostgreSQL URL starts with postgresql://, and it has no scheme" in str(info.value)
    with pytest.raises(DatabaseError) as info:
        parse_url("mysql://h/x")
    assert "and it starts with mysql://" in str(info.value)


def test_make_demo_says_how_to_go_on() -> None:
    demo = (REPO / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "source $(abspath $(VENV))/bin/activate" in demo
    assert "noetl-vm run examples/hello.yaml" in demo


# ------------------------------------------------------------------ the README


def test_the_readme_tables_are_the_parsers() -> None:
    spec = importlib.util.spec_from_file_location(
        "command_table", REPO / "scripts" / "command_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for path, text in module.generated().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.name} differs from the parsers: run `python scripts/command_table.py`"
        )
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for name, _m, _h in [*noetlc_main.COMMANDS, *vm_main.COMMANDS]:
        assert re.search(rf"`noetl(c|-vm) {name}\b", readme), name
