"""`check`/`lint` on a repository: which files are playbooks, which are NoETL's other resources.

A NoETL repository holds more than playbooks: its catalog registers every YAML file under the
`kind:` it declares, and validates only playbooks as such (noetl/server/api/catalog/service.py,
`_normalize_resource_type` and `_validate_payload`: `Credential`/`Secret`, `Mcp`, `Agent`,
`Memory` and any other kind are stored as they are). So `check` and `lint` check the files whose
`kind` is `Playbook` (any case) or absent (NoETL's default), and skip every other declared kind
with a note, and so YAML files that are no NoETL resource at all: another system's (an
`apiVersion` that is not `noetl.io/...`: Kubernetes manifests, Helm charts; NoETL refuses any
other apiVersion, noetl/core/dsl/engine/parser/validation.py) or none (none of the root keys
`apiVersion`, `kind`, `metadata`, `workflow`, `workbook`, `workload`: a test configuration, a
data fixture). A `kind` one letter or two away from `Playbook` is a misspelt playbook: it is
checked, and the schema reports the kind (NOE104, "did you mean").

`--exclude GLOB` leaves out files by their path (relative to the folder named on the command
line), their name, or any folder on their path (`--exclude broken_playbooks`).
"""

from __future__ import annotations

import re
from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

# NoETL's names for its resource kinds (the catalog's alias table), and what each one is
RESOURCE_KINDS = {
    "credential": "a NoETL credential resource",
    "credentials": "a NoETL credential resource",
    "secret": "a NoETL credential resource",
    "secrets": "a NoETL credential resource",
    "mcp": "a NoETL MCP server resource",
    "modelcontextprotocol": "a NoETL MCP server resource",
    "agent": "a NoETL agent resource",
    "memory": "a NoETL memory resource",
    "subscription": "a NoETL event subscription",
}

# `kind:` at the start of a line (the root mapping), a plain or quoted word
_KIND = re.compile(r"""^kind:[ \t]*["']?([A-Za-z0-9_.-]+)["']?[ \t]*(?:#.*)?$""", re.MULTILINE)
_API = re.compile(r"""^apiVersion:[ \t]*["']?([^\s"'#]+)""", re.MULTILINE)
# a root key that only NoETL resources have: without any, a YAML file is something else
_RESOURCE_KEY = re.compile(r"^(apiVersion|kind|metadata|workflow|workbook|workload)[ \t]*:", re.M)
NOT_A_RESOURCE = "-"  # the "kind" of a YAML file that is no NoETL resource at all


def declared_kind(path: str) -> str | None:
    """The root `kind:` a YAML file declares (None: none, or the file cannot be read; then it
    is checked, and check reports what is wrong with it)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(1 << 20).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # checked: `check` says what is wrong with it (NOE004)
    if "\x00" in text:
        return None
    found = _KIND.search(text)
    api = _API.search(text)
    if api and not api.group(1).startswith("noetl.io/"):
        # another system's resource (Kubernetes, Helm): NoETL's playbooks are `noetl.io/*`
        # (noetl/core/dsl/engine/parser/validation.py refuses any other apiVersion)
        return f"{found.group(1) if found else NOT_A_RESOURCE}@{api.group(1)}"
    if found:
        return found.group(1)
    if text.strip() and "\n---" not in text and _RESOURCE_KEY.search(text) is None:
        return NOT_A_RESOURCE  # a configuration file, a fixture of data: not a playbook
    return None


def is_playbook_kind(kind: str | None) -> bool:
    if kind is None or kind.lower() == "playbook":
        return True
    if "@" in kind:
        return False  # another system's apiVersion
    if kind.lower() in RESOURCE_KINDS:
        return False
    import difflib  # only for a kind that is not `Playbook`: not on a cache hit's path

    return bool(difflib.get_close_matches(kind.lower(), ["playbook"], n=1, cutoff=0.75))


class Selection:
    """The files to check, and those skipped because they are other NoETL resources.

    A plain class, not a dataclass: `noetlc check` with a compile cache hit imports this
    module, and `dataclasses` (with `inspect`, `ast`, `dis`, `tokenize`) was the largest import
    of that command (callgrind, docs/performance.md)."""

    __slots__ = ("playbooks", "skipped")

    def __init__(self) -> None:
        self.playbooks: list[str] = []
        self.skipped: list[tuple[str, str]] = []  # (file, kind)

    def notes(self) -> list[str]:
        out = []
        for file, kind in self.skipped:
            if "@" in kind:
                name, api = kind.split("@", 1)
                what = "" if name == NOT_A_RESOURCE else f"`kind: {name}` of "
                out.append(
                    f"{file}: note: {what}`apiVersion: {api}` is not a NoETL resource "
                    "(NoETL's are `noetl.io/...`): skipped"
                )
                continue
            if kind == NOT_A_RESOURCE:
                out.append(
                    f"{file}: note: no `apiVersion`, `kind`, `metadata` or `workflow`: not a "
                    "NoETL resource: skipped"
                )
                continue
            what = RESOURCE_KINDS.get(kind.lower(), f"a NoETL `{kind}` resource")
            out.append(f"{file}: note: `kind: {kind}` is {what}, not a playbook: skipped")
        return out

    def summary(self, errors_by_file: Counter[str]) -> list[str]:
        """One line per kind: how many files, how many clean (playbooks) or skipped."""
        kinds: dict[str, list[str]] = {}
        for file in self.playbooks:
            kinds.setdefault("Playbook", []).append(file)
        lines = []
        for kind, files in kinds.items():
            bad = sum(1 for f in files if errors_by_file[f])
            lines.append(
                f"  {kind}: {len(files)} file(s), {len(files) - bad} clean, {bad} with errors"
            )
        skipped = Counter(kind for _, kind in self.skipped)
        for kind, n in sorted(skipped.items()):
            name, _, api = kind.partition("@")
            label = "other YAML" if name == NOT_A_RESOURCE else name
            label += f" ({api})" if api else ""
            lines.append(f"  {label}: {n} file(s) skipped (not a playbook)")
        return lines

    def to_json(self) -> list[dict[str, str]]:
        return [{"file": f, "kind": k} for f, k in self.skipped]


def select(files: list[str], named: frozenset[str] = frozenset()) -> Selection:
    """Playbooks and skipped resources; a file `named` on the command line (not found in a
    folder) is checked unless it declares another NoETL kind."""
    chosen = Selection()
    for file in files:
        kind = declared_kind(file)
        if file in named and kind is not None and (kind == NOT_A_RESOURCE or "@" in kind):
            kind = None
        if is_playbook_kind(kind):
            chosen.playbooks.append(file)
        else:
            chosen.skipped.append((file, str(kind)))
    return chosen


def named_files(paths: list[str]) -> frozenset[str]:
    """The paths given on the command line that are files (not folders)."""
    return frozenset(p for p in paths if not Path(p).is_dir())


def excluded(path: Path, root: Path, patterns: list[str]) -> bool:
    """Does a `--exclude` glob match the file: its path below `root`, its name, or a folder?"""
    if not patterns:
        return False
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        relative = path.as_posix()
    parts = Path(relative).parts
    return any(
        fnmatch(relative, glob)
        or fnmatch(path.as_posix(), glob)
        or any(fnmatch(p, glob) for p in parts)
        for glob in patterns
    )
