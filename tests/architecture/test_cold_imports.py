"""A command imports what it runs, and nothing more (cold start).

Each case runs one command's `main` in a fresh interpreter and lists `sys.modules` afterwards;
a module a command must not need (another layer, a heavy library) fails the case. This is how
start-up time is kept without timing anything: `noetlc --version` loads no compiler, `check`
no runtime and no Lark (the expression parser is hand-written, `expr/grammar_parser.py`),
running a `.nbc` file no compiler.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "examples" / "hello.yaml"

# The runner: run one command line's main with `argv`, print the loaded module names.
RUN = """
import json, sys
prog, argv = sys.argv[1], sys.argv[2:]
if prog == "noetlc":
    from noetlc.cli.noetlc_main import main
else:
    from noetlc.cli.vm_main import main
try:
    main(argv)
except SystemExit:
    pass
sys.stdout.write("\\n" + json.dumps(sorted(sys.modules)))
"""

NOETLC_LAYERS = ["noetlc.compiler", "noetlc.analysis", "noetlc.runtime", "noetlc.vm", "noetlc.ir"]
HEAVY = ["pydantic", "jinja2", "lark", "yaml", "ruamel", "asyncio", "asyncpg", "httpx", "msgpack"]
ALWAYS_HEAVY = ["lark", "networkx", "asyncpg", "httpx", "ruamel", "duckdb"]


def loaded(prog: str, *argv: str, cache: Path | None = None) -> set[str]:
    """The modules loaded by one command; the compile cache is off unless `cache` names its
    folder (a hit would skip the compiler a case expects)."""
    env = dict(os.environ)
    if cache is None:
        env["NOETLC_NO_CACHE"] = "1"
    else:
        env.pop("NOETLC_NO_CACHE", None)
        env["NOETLC_CACHE_DIR"] = str(cache)
    done = subprocess.run(
        [sys.executable, "-c", RUN, prog, *argv],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=120,
    )
    assert done.stdout.strip(), done.stderr
    modules: list[str] = json.loads(done.stdout.rsplit("\n", 1)[-1])
    return set(modules)


def offending(modules: set[str], forbidden: list[str]) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))


@pytest.fixture(scope="module")
def hello_nbc(tmp_path_factory: pytest.TempPathFactory) -> str:
    from noetlc.compiler.pipeline import compile_file

    unit = compile_file(HELLO)
    assert unit.nbc is not None
    out = tmp_path_factory.mktemp("cold") / "hello.nbc"
    out.write_bytes(unit.nbc)
    return str(out)


@pytest.mark.parametrize(
    "prog, argv",
    [
        ("noetlc", ["--version"]),
        ("noetlc", ["--help"]),
        ("noetl-vm", ["--version"]),
        ("noetlc", ["explain", "NOE101"]),
    ],
)
def test_version_help_and_explain_load_no_layer_and_no_library(prog: str, argv: list[str]) -> None:
    modules = loaded(prog, *argv)
    assert offending(modules, [*NOETLC_LAYERS, "noetlc.expr", *HEAVY, *ALWAYS_HEAVY]) == []
    # and no other command's module
    assert offending(modules, ["noetlc.cli.noetlc_commands.check", "noetlc.cli.vm_commands"]) == []


def test_check_loads_the_front_end_only() -> None:
    modules = loaded("noetlc", "check", str(HELLO))
    assert "noetlc.compiler.passes.schema" in modules  # it did check
    forbidden = ["noetlc.analysis", "noetlc.runtime", "noetlc.vm", "noetlc.ir.net"]
    assert offending(modules, [*forbidden, "asyncio", "sqlite3", "msgpack", *ALWAYS_HEAVY]) == []


def test_checking_a_valid_playbook_loads_no_pydantic() -> None:
    # the generated shape tables accept it (the document and the python tasks' arguments):
    # pydantic and its models are for diagnostics
    modules = loaded("noetlc", "check", str(HELLO))
    assert "noetlc.compiler.surface.shape_table" in modules
    assert "noetlc.compiler.passes.tools" in modules
    forbidden = ["noetlc.compiler.surface.models", "noetlc.stdlib_tools.schemas", "pydantic"]
    assert offending(modules, forbidden) == []


def test_checking_noop_tasks_loads_no_pydantic(tmp_path: Path) -> None:
    playbook = tmp_path / "noop.yaml"
    playbook.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: noop}\n"
        "workload: {items: [1, 2]}\nworkflow:\n"
        "  - step: start\n    loop: {in: '{{ workload.items }}', iterator: item}\n"
        "    tool: {kind: noop, result: '{{ item }}'}\n    next: end\n"
        "  - step: end\n    tool: {kind: noop}\n",
        encoding="utf-8",
    )
    modules = loaded("noetlc", "check", str(playbook))
    assert "noetlc.compiler.passes.tools" in modules  # it did check the tool arguments
    assert offending(modules, ["pydantic", "pydantic_core", "noetlc.stdlib_tools.schemas"]) == []


def test_an_invalid_playbook_still_gets_pydantic_diagnostics(tmp_path: Path) -> None:
    playbook = tmp_path / "bad.yaml"
    playbook.write_text("workflow:\n  - step: start\n    nxt: end\n", encoding="utf-8")
    modules = loaded("noetlc", "check", str(playbook))
    assert "noetlc.compiler.surface.models" in modules


def test_running_bytecode_loads_no_compiler(hello_nbc: str) -> None:
    modules = loaded("noetl-vm", "run", hello_nbc, "--db", "memory:", "--quiet")
    assert "noetlc.vm.control" in modules  # it did run
    assert offending(modules, ["noetlc.compiler", "noetlc.analysis", "yaml", *ALWAYS_HEAVY]) == []


def test_running_a_playbook_loads_no_analyzer() -> None:
    modules = loaded("noetl-vm", "run", str(HELLO), "--db", "memory:", "--quiet")
    assert "noetlc.vm.control" in modules
    assert offending(modules, ["noetlc.analysis", *ALWAYS_HEAVY]) == []


COMPILER_AND_LIBRARIES = ["noetlc.compiler", "noetlc.analysis", "pydantic", "yaml"]


def test_a_compile_cache_hit_of_check_loads_no_compiler(tmp_path: Path) -> None:
    first = loaded("noetlc", "check", str(HELLO), cache=tmp_path)
    assert "noetlc.compiler.passes.schema" in first  # the miss compiled (and kept the result)
    modules = loaded("noetlc", "check", str(HELLO), cache=tmp_path)
    assert "noetlc.cli.compile_cache" in modules
    assert offending(modules, [*COMPILER_AND_LIBRARIES, "jinja2", *ALWAYS_HEAVY]) == []
    # a clean playbook's text report renders no diagnostic: their module is not imported
    assert "noetlc.diagnostics.report" not in modules


def test_a_compile_cache_hit_of_run_loads_no_compiler(tmp_path: Path) -> None:
    argv = ["run", str(HELLO), "--db", "memory:", "--quiet"]
    assert "noetlc.compiler.pipeline" in loaded("noetl-vm", *argv, cache=tmp_path)
    modules = loaded("noetl-vm", *argv, cache=tmp_path)
    assert "noetlc.vm.control" in modules  # it did run
    # the python tasks' arguments fit the generated table: built without pydantic
    forbidden = [*COMPILER_AND_LIBRARIES, "noetlc.stdlib_tools.schemas", "pydantic_core"]
    assert offending(modules, [*forbidden, *ALWAYS_HEAVY]) == []
    # a playbook whose templates our expression language compiles, run on SQLite: no Jinja,
    # no TLS, no event loop and no thread pool are needed, so none is imported
    sqlite = ["run", str(HELLO), "--db", f"sqlite:///{tmp_path / 'n.db'}", "--quiet"]
    loaded("noetl-vm", *sqlite, cache=tmp_path)
    modules = loaded("noetl-vm", *sqlite, cache=tmp_path)
    assert "noetlc.runtime.embedded" in modules
    unused = ["jinja2", "markupsafe", "ssl", "_ssl", "asyncio", "concurrent.futures"]
    assert offending(modules, unused) == []
    # nor what a run costs without using: the SQL files are read from disk (no
    # importlib.resources), the host name from uname (no socket), task isolation only when it
    # is configured (no subprocess), no Decimal,
    # and a cache entry without diagnostics loads no diagnostics
    assert "noetlc.runtime.sql_files" in modules and "noetlc.runtime.ownership" in modules
    assert "noetlc.stdlib_tools.python_tool" in modules  # it did run a python task
    not_needed = ["importlib.resources", "zipfile", "tempfile", "socket", "subprocess"]
    not_needed += ["noetlc.stdlib_tools.isolation", "decimal"]
    # a run that reports nothing needs no diagnostics (spans are diagnostics/span.py's)
    not_needed += ["noetlc.diagnostics.report", "noetlc.diagnostics.severity"]
    assert offending(modules, not_needed) == []


def test_status_loads_no_compiler_and_no_expression_language(tmp_path: Path) -> None:
    modules = loaded("noetl-vm", "status", "--db", f"sqlite:///{tmp_path / 'n.db'}")
    assert "noetlc.runtime.event_store" in modules
    forbidden = ["noetlc.compiler", "noetlc.expr", "pydantic", "jinja2", "asyncio"]
    assert offending(modules, [*forbidden, *ALWAYS_HEAVY]) == []


def test_the_offending_check_finds_a_forbidden_module() -> None:
    # the check itself can fail: a command that imports the compiler is caught
    assert offending({"noetlc.compiler.pipeline", "json"}, ["noetlc.compiler"]) == [
        "noetlc.compiler.pipeline"
    ]


def test_running_bytecode_without_expressions_loads_no_expression_compiler(
    tmp_path: Path,
) -> None:
    from noetlc.compiler.pipeline import compile_source

    steps = "\n".join(
        f"  - step: {name}\n    tool: {{kind: noop}}\n    next: {after}"
        for name, after in (("start", "middle"), ("middle", "last"))
    )
    source = f"apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {{name: plain}}\nworkflow:\n{steps}\n  - step: last\n    tool: {{kind: noop}}\n"
    unit = compile_source(source)
    assert unit.nbc is not None, unit.reporter.sorted()
    assert unit.program is not None and not unit.program.expressions
    nbc = tmp_path / "plain.nbc"
    nbc.write_bytes(unit.nbc)
    modules = loaded("noetl-vm", "run", str(nbc), "--db", "memory:", "--quiet")
    assert "noetlc.vm.control" in modules
    forbidden = ["noetlc.expr.compile", "noetlc.expr.parser", "noetlc.expr.grammar_parser"]
    assert offending(modules, forbidden) == []
    # noop tasks validate no arguments: the kinds table names the schemas, never imports them
    assert offending(modules, ["pydantic", "pydantic_core", "noetlc.stdlib_tools.schemas"]) == []


def test_the_kinds_table_imports_no_schema() -> None:
    # every fact but the argument schema (inline, executor, credentials, sql) costs no pydantic
    code = (
        "import sys\n"
        "from noetlc.stdlib_tools import kinds, registry\n"
        "assert kinds.inline_kinds() and kinds.lookup('postgres').sql\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'noetlc.stdlib_tools.s'))))\n"
        "kinds.lookup('python').schema\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    before, after = done.stdout.splitlines()
    assert before == "['noetlc.stdlib_tools.sql_spellings']"
    assert after == "True"  # reading a schema imports it


@pytest.mark.parametrize("prog", ["noetlc", "noetl-vm"])
def test_every_subcommand_still_loads_its_arguments_and_help(
    prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # the modules are imported lazily: each one's help is its module doc and its arguments
    from importlib import import_module

    from noetlc.cli import noetlc_main, vm_main

    main_module = noetlc_main if prog == "noetlc" else vm_main
    package = "noetlc.cli.noetlc_commands" if prog == "noetlc" else "noetlc.cli.vm_commands"
    for name, module, _help in main_module.COMMANDS:
        assert main_module.main([name, "--help"]) == 0
        shown = " ".join(capsys.readouterr().out.split())
        doc = import_module(f"{package}.{module}").__doc__ or ""
        first_words = " ".join(doc.split()[:4])
        assert f"usage: {prog} {name}" in shown
        assert first_words in shown, (name, first_words)


def test_compiling_a_valid_playbook_loads_no_hint_or_migrate_only_code() -> None:
    # difflib is for "did you mean" hints; the legacy rewrites only `migrate` runs load then
    modules = loaded("noetl-vm", "run", str(HELLO), "--db", "memory:", "--quiet")
    assert "noetlc.compiler.passes.desugar" in modules  # it did compile
    migrate_only = [
        f"noetlc.compiler.desugar.{m}" for m in ("eval_rules", "root_vars", "pipes", "next_then")
    ]
    assert offending(modules, ["difflib", *migrate_only]) == []


def test_a_misspelt_key_still_gets_its_hint(tmp_path: Path) -> None:
    from noetlc.compiler.passes.desugar import migrate_passes

    assert [name for name, _ in migrate_passes()][:2] == ["eval_rules", "root_vars"]
    playbook = tmp_path / "typo.yaml"
    playbook.write_text(HELLO.read_text(encoding="utf-8").replace("workload:", "workloda:", 1))
    done = subprocess.run(
        [sys.executable, "-m", "noetlc", "check", str(playbook), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=120,
    )
    assert "workload" in done.stdout + done.stderr and "did you mean" in done.stdout + done.stderr


def test_the_compilers_dataclasses_have_docstrings() -> None:
    # `@dataclass` builds a missing docstring from `inspect.signature` at import time
    import ast

    missing = []
    for package in ("compiler", "expr", "ir", "diagnostics", "stdlib_tools", "cli"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef) or ast.get_docstring(node) is not None:
                    continue
                for d in node.decorator_list:
                    target = d.func if isinstance(d, ast.Call) else d
                    if isinstance(target, ast.Name) and target.id == "dataclass":
                        missing.append(f"{path.relative_to(REPO)}: {node.name}")
    assert missing == []
