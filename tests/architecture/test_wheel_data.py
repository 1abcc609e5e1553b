"""The wheel is the product: every non-Python file the code opens is in the built wheel.

The files the code reads are found in its source, not listed by hand: every
`resources.files("PKG").joinpath("a", "b")` and every `Path(__file__).with_name("X")` names a
file or a folder of its package; each such file, and every file under each such folder, must
be in the wheel at its installed path. Every other non-Python file of the package folders is
documentation (README.md) and stays out. The wheel is built the way a release is (`python -m
build`: an sdist, then the wheel from it), so a file the sdist loses is caught too.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from noetlc.runtime.postgres.testing import must_not_skip

REPO = Path(__file__).resolve().parents[2]


def package_dirs() -> dict[str, Path]:
    """`noetlc.x.y` -> its source folder, from `[tool.setuptools] package-dir` of pyproject."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    setup = config["tool"]["setuptools"]
    roots = {name: REPO / folder for name, folder in setup["package-dir"].items()}
    found: dict[str, Path] = {}
    for package in setup["packages"]:
        root = max((r for r in roots if package == r or package.startswith(r + ".")), key=len)
        rest = package[len(root) :].lstrip(".")
        found[package] = roots[root].joinpath(*rest.split(".")) if rest else roots[root]
    return found


def _strings(args: list[ast.expr]) -> list[str] | None:
    if all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
        return [a.value for a in args]  # type: ignore[attr-defined]
    return None


def files_the_code_reads() -> set[str]:
    """Installed paths (`noetlc/runtime/sql/x.sql`) of the data files the modules name."""
    dirs = package_dirs()
    by_folder = {folder.resolve(): name for name, folder in dirs.items()}
    wanted: set[str] = set()
    for package, folder in dirs.items():
        for source in sorted(folder.glob("*.py")):
            tree = ast.parse(source.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                target = _data_reference(node, package, source, by_folder)
                if target is None:
                    continue
                pkg, parts = target
                base = dirs[pkg].joinpath(*parts)
                assert base.exists(), f"{source.relative_to(REPO)} names {base} that is missing"
                installed = Path(*pkg.split("."), *parts)
                if base.is_dir():
                    for path in sorted(base.rglob("*")):
                        if path.is_file() and path.suffix != ".py":
                            wanted.add((installed / path.relative_to(base)).as_posix())
                else:
                    wanted.add(installed.as_posix())
    return wanted


def _data_reference(
    node: ast.AST, package: str, source: Path, by_folder: dict[Path, str]
) -> tuple[str, list[str]] | None:
    """(package, path parts) for `resources.files(PKG)[.joinpath(...)]` or
    `Path(__file__).with_name(X)`; None for any other node."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    func = node.func
    if func.attr == "with_name" and "__file__" in ast.dump(func.value):
        names = _strings(node.args)
        return (by_folder[source.parent.resolve()], names) if names else None
    if func.attr == "joinpath" and isinstance(func.value, ast.Call):
        inner = func.value
        if isinstance(inner.func, ast.Attribute) and inner.func.attr == "files":
            pkg, parts = _strings(inner.args), _strings(node.args)
            if pkg and parts:
                return pkg[0], parts
    return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    if result.returncode != 0:
        reason = f"the wheel cannot be built here: {(result.stderr or result.stdout)[-800:]}"
        if must_not_skip():
            pytest.fail(reason)
        pytest.skip(reason)
    log = result.stdout + result.stderr
    warnings = [line for line in log.splitlines() if _is_warning(line)]
    assert warnings == [], "the build warns:\n" + "\n".join(warnings)
    (path,) = out.glob("*.whl")
    return zipfile.ZipFile(path)


def _is_warning(line: str) -> bool:
    lowered = line.lower()
    return "warning" in lowered or "would be ignored" in lowered or "deprecat" in lowered


def test_the_scan_finds_the_files_we_know_the_code_reads() -> None:
    # the scan is what the wheel test trusts: it must see the loaders we know of
    found = files_the_code_reads()
    for path in (
        "noetlc/runtime/postgres/sql/queue.sql",
        "noetlc/runtime/postgres/sql/migrations/0001_init.sql",
        "noetlc/runtime/sql/store.sql",
        "noetlc/service/static/index.html",
        "noetlc/ir/net_text.lark",
    ):
        assert path in found, path


def test_every_file_the_code_reads_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    missing = sorted(files_the_code_reads() - names)
    assert missing == []


def test_the_wheel_ships_no_stray_data_and_carries_the_license(wheel: zipfile.ZipFile) -> None:
    data = {
        n
        for n in wheel.namelist()
        if n.startswith("noetlc/") and not n.endswith(".py") and n != "noetlc/py.typed"
    }
    assert data == files_the_code_reads()
    license_files = [n for n in wheel.namelist() if n.endswith("/licenses/LICENSE")]
    assert len(license_files) == 1
    metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    text = wheel.read(metadata).decode()
    assert "License-Expression: MIT" in text
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
