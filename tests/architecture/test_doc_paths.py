"""Every path or module the documentation names exists: README.md, ARCHITECTURE.md, docs/ and
each folder's README.

Checked: paths under a folder of the repository with a file suffix or a trailing slash
(`runtime/event_store.py`, `tests/vm/`, `examples/loop.yaml`; `examples/hello` is a catalog path,
not a file), a test named with `::` (the function must be in the file), a module `noetlc.x.y`
(or a name defined in one), links, and in a folder's README a bare file name (`program.py`:
some file of the repository has that name); in docs/ a bare `name.md`. Placeholders
(`test_tools_<kind>.py`, `NOE5##`) and the files of a user (`playbook.yaml`) are not checked.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOP = (
    "diagnostics|expr|ir|stdlib_tools|compiler|vm|analysis|runtime|service|cli|bench|tests"
    "|scripts|examples|docs|noetlc|\\.ci"
)
ROOT_FILES = {"README.md", "ARCHITECTURE.md", "LICENSE", "Makefile", "pyproject.toml"}
PATH = re.compile(rf"(?<![\w./-])((?:{TOP})/[\w./*-]*)(?:::(\w+))?")
MODULE = re.compile(r"(?<![\w.])noetlc(?:\.\w+)+")
# not modules: the plugin entry-point group; file names (noetlc.sarif, noetlc.fish)
NOT_MODULES = {"noetlc.tools"}
FILE_SUFFIXES = {"sarif", "fish", "json", "yaml", "nbc", "bash"}
BARE = re.compile(r"(?<![\w./-])([\w-]+\.(?:py|md|sql|lark|yaml))(?![\w/])")
LINK = re.compile(r"\]\(([^)#\s]+)")


def documents() -> list[Path]:
    docs = [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]
    docs += sorted(p for p in REPO.glob("*/README.md") if p.parent.name not in {".venv", "build"})
    docs += sorted(REPO.glob("*/*/README.md"))
    return [d for d in docs if ".venv" not in d.parts]


def _module_file(parts: list[str]) -> Path | None:
    """The source of module `noetlc.<parts>` (the top folders are the package's folders)."""
    for base in (REPO.joinpath(*parts), (REPO / "noetlc").joinpath(*parts)):
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
    return REPO / "noetlc" / "__init__.py" if not parts else None


def _module_exists(name: str) -> bool:
    """`noetlc.a.b` is a module, or `b` is a name module `noetlc.a` defines."""
    parts = name.split(".")[1:]
    if name in NOT_MODULES or parts[-1] in FILE_SUFFIXES or _module_file(parts) is not None:
        return True
    owner = _module_file(parts[:-1])
    return owner is not None and re.search(rf"\b{parts[-1]}\b", owner.read_text()) is not None


@functools.cache
def _repo_file_names() -> set[str]:
    import subprocess

    listed = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return {Path(p).name for p in listed} | {
        p.name for p in REPO.rglob("*.py") if ".venv" not in p.parts
    }


def problems_in(doc: Path) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    found: list[str] = []
    for match in PATH.finditer(text):
        raw, test = match.group(1).rstrip(".,;:"), match.group(2)
        if text[match.end() : match.end() + 1] in ("<", "#") or "NNNN" in raw:
            continue  # a placeholder: test_tools_<kind>.py
        if not Path(raw).suffix and not raw.endswith("/") and not test:
            continue  # a catalog path (examples/hello), not a file
        if "*" in raw:
            if not list(REPO.glob(raw)):
                found.append(f"{raw} (matches nothing)")
            continue
        path = REPO / raw
        if not path.exists():
            found.append(raw)
        elif test and path.is_file() and f"def {test}(" not in path.read_text(encoding="utf-8"):
            found.append(f"{raw}::{test}")
    for name in MODULE.findall(text):
        if not _module_exists(name.rstrip(".")):
            found.append(name)
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        if not (doc.parent / target).exists():
            found.append(f"link {target}")
    if doc.parent != REPO:
        for name in BARE.findall(text):
            if name in ROOT_FILES or _bare_exists(doc, name):
                continue
            if doc.parent.name == "docs" and not name.endswith(".md"):
                continue  # docs/ names a user's files (playbook.yaml) as examples
            if doc.parent.name != "docs" and name.endswith((".yaml", ".md")):
                continue
            found.append(name)
    return found


def _bare_exists(doc: Path, name: str) -> bool:
    if doc.parent.name == "docs":
        return (doc.parent / name).exists()
    return name in _repo_file_names()


def test_the_scan_sees_the_paths_it_must() -> None:
    # a path that does not exist is reported (the scan cannot pass by finding nothing)
    fake = REPO / "build" / "doc-paths-probe.md"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(
        "see runtime/no_such.py, tests/vm/test_vm_store.py::no_such_test, noetlc.runtime.nope,"
        " [x](missing.md)\n",
        encoding="utf-8",
    )
    try:
        assert sorted(problems_in(fake)) == sorted(
            [
                "runtime/no_such.py",
                "tests/vm/test_vm_store.py::no_such_test",
                "noetlc.runtime.nope",
                "link missing.md",
            ]
        )
    finally:
        fake.unlink()


def test_every_path_the_documentation_names_exists() -> None:
    missing = {
        str(doc.relative_to(REPO)): problems
        for doc in documents()
        if (problems := problems_in(doc))
    }
    assert missing == {}
