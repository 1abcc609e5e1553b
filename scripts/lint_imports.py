"""Run import-linter (`lint-imports`) over the `noetlc` package as it is installed.

Our folders (`compiler/`, `vm/`, ...) are installed under `noetlc.` with setuptools'
`package-dir`, and import-linter finds a package's modules by walking its folder. This script
builds a symlink view `.importlinter/noetlc/<subpackage>` of the source tree
(scripts/package_view.py, as for mypy) and runs `lint-imports` with the contracts of
pyproject.toml (`[tool.importlinter]`) on it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import package_view


def main() -> int:
    view = package_view.build(".importlinter")
    # The view comes first on the path, so `noetlc` is found there with every subpackage.
    env = dict(os.environ, PYTHONPATH=str(view))
    cmd = [
        sys.executable,
        "-c",
        "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())",
        str(package_view.ROOT / "pyproject.toml"),
        "--no-cache",
    ]
    return subprocess.call(cmd, cwd=view, env=env)


if __name__ == "__main__":
    sys.exit(main())
