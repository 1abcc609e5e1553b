"""Event names are spelled once: `ir/events.py` (`EventName`, and `LegacyEventName` for the
older forms' names). No other module of any package writes an event name as a string literal
(docstrings and comments aside), so a name cannot drift between the code that records an
event, the compiler that routes on it and the tools that read it. The web console's list is
generated from `EventName` and checked here, and every event name its scripts test is one."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import tomllib
from pathlib import Path

from noetlc.ir.events import EventName, LegacyEventName, spellings
from noetlc.vm import protocol

REPO = Path(__file__).resolve().parents[2]
NAMES = {name.value for name in EventName} | {name.value for name in LegacyEventName}
VOCABULARY = REPO / "ir" / "events.py"
CONSOLE = REPO / "service" / "static" / "js"


def packages() -> list[Path]:
    """Every top-level folder installed under `noetlc` (pyproject's `package-dir`)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return sorted(REPO / folder for folder in config["tool"]["setuptools"]["package-dir"].values())


def bare_names(folder: Path, root: Path = REPO) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        if path == VOCABULARY:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and node.value in NAMES
                and id(node) not in docstrings
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    return found


def test_every_package_is_checked() -> None:
    folders = {p.name for p in packages()}
    assert {"compiler", "ir", "vm", "runtime", "service", "analysis", "cli"} <= folders


def test_no_bare_event_names_in_any_package() -> None:
    found = [hit for folder in packages() for hit in bare_names(folder)]
    assert not found, "use ir/events.py EventName:\n" + "\n".join(found)


def test_the_check_finds_a_bare_name(tmp_path: Path) -> None:
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "m.py").write_text(
        '"""step.done in a docstring is fine."""\nX = "step.done"\nY = "call.done"\n'
    )
    assert bare_names(folder, tmp_path) == ["pkg/m.py:2: 'step.done'", "pkg/m.py:3: 'call.done'"]


def test_the_vm_reexports_the_vocabulary() -> None:
    assert protocol.EventName is EventName
    assert "EventName" in protocol.__all__


def test_the_legacy_names_read_as_their_boundary_events() -> None:
    assert spellings("step.done") == {"step.done", "call.done", "step.exit"}
    assert spellings("loop.done") == {"loop.done", "call.done", "step.exit"}
    assert spellings("step.failed") == {"step.failed", "call.error"}
    assert spellings("signal.received") == {"signal.received"}


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "gen_console_events", REPO / "scripts" / "gen_console_events.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_console_events", module)
    spec.loader.exec_module(module)
    return module


def test_the_consoles_list_is_generated_from_the_vocabulary() -> None:
    generator = _generator()
    committed = (CONSOLE / "events.js").read_text(encoding="utf-8")
    assert committed == generator.render(), "run python scripts/gen_console_events.py"
    listed = re.findall(r'"([a-z.]+)"', committed.split("[", 1)[1])
    assert listed == [name.value for name in EventName]


# a quoted dotted name in the console's scripts that starts like an event name
_JS_NAME = re.compile(
    r"""["']((?:playbook|execution|workflow|step|loop|task|next|join|signal|timer)\.[a-z.]+)["']"""
)


def test_the_consoles_scripts_test_only_known_event_names() -> None:
    unknown = []
    for path in sorted(CONSOLE.glob("*.js")):
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in _JS_NAME.findall(line):
                if name not in NAMES:
                    unknown.append(f"{path.name}:{line_no}: {name}")
    assert not unknown, "not an event name of ir/events.py:\n" + "\n".join(unknown)
