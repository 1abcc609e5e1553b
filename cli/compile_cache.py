"""The compile cache: results of `check` and of compiling a playbook, kept between processes.

An entry is keyed by sha256 of the compiler's fingerprint, what the result is for (`check`'s
front end, a compiled program), the file name as given (it is in every location the
diagnostics and the debug map print), every option that changes the output, and the source
bytes. It holds the diagnostics to print again and, for a program, the `.nbc` bytes that
`noetlc compile` writes. A file that compiled with errors is not kept (the compiler reports
them again), nor one whose compile consulted installed tool plugins (they can change without
the compiler changing).

The fingerprint hashes the size and modification time of every source file of the compiler's
packages with the package version: editing or upgrading noetlc starts a new set of entries.

A hit imports neither the compiler nor pydantic, PyYAML or the analyzer: the module imports
only the standard library and the diagnostics record, and a program entry is decoded and
verified like any `.nbc` file (the cache is data from outside: a corrupt, truncated or
tampered entry is ignored and rewritten, never an error).

Location: `$NOETLC_CACHE_DIR`, else `$XDG_CACHE_HOME/noetlc`, else `~/.cache/noetlc`.
`NOETLC_NO_CACHE=1` (or a command's `--no-cache`) turns it off. Writes are atomic (a
temporary file renamed into place); past `MAX_ENTRIES` entries or `MAX_BYTES` bytes the
least recently used entries are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from noetlc.diagnostics.span import Span

if TYPE_CHECKING:
    from noetlc.diagnostics.report import Diagnostic

MAGIC = b"NOETLCC1\n"
MAX_ENTRIES = 5_000
MAX_BYTES = 200 * 1024 * 1024
# the packages whose code decides what `check` reports and what `compile` produces
COMPILER_PACKAGES = ("", "diagnostics", "expr", "ir", "stdlib_tools", "compiler", "analysis")

_fingerprint: str | None = None


def enabled(no_cache_flag: bool = False) -> bool:
    return not no_cache_flag and os.environ.get("NOETLC_NO_CACHE", "") in ("", "0")


def cache_dir() -> Path:
    explicit = os.environ.get("NOETLC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "noetlc"
    return Path.home() / ".cache" / "noetlc"


def fingerprint() -> str:
    """The compiler's identity: its version and the size and mtime of each of its files."""
    global _fingerprint
    if _fingerprint is not None:
        return _fingerprint
    import importlib.util

    from noetlc import FORMAT_VERSION, __version__

    h = hashlib.sha256(f"{__version__}\0{FORMAT_VERSION}\0{sys.version}".encode())
    for name in COMPILER_PACKAGES:
        module = "noetlc" + (f".{name}" if name else "")
        spec = importlib.util.find_spec(module)
        roots = list(spec.submodule_search_locations or []) if spec else []
        for root in roots:
            _hash_tree(h, root, recurse=bool(name))
    _fingerprint = h.hexdigest()
    return _fingerprint


def _hash_tree(h: Any, root: str, recurse: bool) -> None:
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.endswith(".py"):
            st = entry.stat()
            h.update(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        elif recurse and entry.is_dir() and not entry.name.startswith(("_", ".")):
            _hash_tree(h, entry.path, recurse)


def key(kind: str, file: str, source: bytes, options: dict[str, Any] | None = None) -> str:
    h = hashlib.sha256()
    head = json.dumps([fingerprint(), kind, file, options or {}], sort_keys=True)
    h.update(head.encode())
    h.update(b"\0")
    h.update(source)
    return h.hexdigest()


def read_source(file: str) -> tuple[bytes, str] | None:
    """The bytes of `file` and its text as the compiler reads it (UTF-8, universal
    newlines); None when it cannot be read (the compiler then reports why)."""
    try:
        data = Path(file).read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data, text.replace("\r\n", "\n").replace("\r", "\n")


class Entry:
    __slots__ = ("body", "diagnostics")

    def __init__(self, diagnostics: list[Diagnostic], body: bytes) -> None:
        self.diagnostics = diagnostics
        self.body = body


def load(entry_key: str) -> Entry | None:
    """The entry of `entry_key`, or None (absent, unreadable, corrupt or truncated)."""
    path = _path(entry_key)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        entry = _decode(data, entry_key)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # least recently used goes first
    return entry


def store(entry_key: str, diagnostics: list[Diagnostic], body: bytes = b"") -> None:
    """Keep an entry (atomically); a cache that cannot be written is silently skipped."""
    path = _path(entry_key)
    header = json.dumps(
        {
            "key": entry_key,
            "diagnostics": [_diag_data(d) for d in diagnostics],
            "body_sha256": hashlib.sha256(body).hexdigest(),
            "body_size": len(body),
        },
        separators=(",", ":"),
    ).encode()
    data = MAGIC + len(header).to_bytes(4, "big") + header + body
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return
    evict(path.parent.parent)


def evict(root: Path, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> int:
    """Remove the least recently used entries past the bounds; returns how many went."""
    found: list[tuple[int, int, str]] = []
    try:
        for sub in os.scandir(root):
            if not sub.is_dir():
                continue
            for e in os.scandir(sub.path):
                if e.name.endswith(".nce"):
                    st = e.stat()
                    found.append((st.st_mtime_ns, st.st_size, e.path))
    except OSError:
        return 0
    total = sum(size for _, size, _ in found)
    if len(found) <= max_entries and total <= max_bytes:
        return 0
    found.sort()
    removed = 0
    for _, size, p in found:
        if len(found) - removed <= max_entries and total <= max_bytes:
            break
        with contextlib.suppress(OSError):
            os.unlink(p)
        removed += 1
        total -= size
    return removed


def _path(entry_key: str) -> Path:
    return cache_dir() / "v1" / entry_key[:2] / f"{entry_key[2:]}.nce"


def _decode(data: bytes, entry_key: str) -> Entry:
    if not data.startswith(MAGIC):
        raise ValueError("not a cache entry")
    start = len(MAGIC) + 4
    size = int.from_bytes(data[len(MAGIC) : start], "big")
    header = json.loads(data[start : start + size])
    body = data[start + size :]
    if header["key"] != entry_key or header["body_size"] != len(body):
        raise ValueError("truncated or misplaced entry")
    if hashlib.sha256(body).hexdigest() != header["body_sha256"]:
        raise ValueError("corrupt entry")
    return Entry([_diag_from(d) for d in header["diagnostics"]], body)


def _span_data(span: Span | None) -> list[Any] | None:
    return None if span is None else list(span)


def _span_from(data: Any) -> Span | None:
    if data is None:
        return None
    file, line, column, end_line, end_column = data
    if not isinstance(file, str) or not all(
        type(v) is int for v in (line, column, end_line, end_column)
    ):
        raise ValueError("bad span")
    return Span(file, line, column, end_line, end_column)


def _diag_data(d: Diagnostic) -> dict[str, Any]:
    return {
        "code": d.code,
        "severity": d.severity.value,
        "message": d.message,
        "span": _span_data(d.span),
        "hint": d.hint,
        "trace": [[t.message, _span_data(t.span), t.step, t.transition] for t in d.trace],
        "related": [[label, _span_data(span)] for label, span in d.related],
    }


def _opt_str(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError("not a string")
    return value


def _diag_from(data: dict[str, Any]) -> Diagnostic:
    # imported here: an entry without diagnostics (a cached run's) needs none of them
    from noetlc.diagnostics.report import Diagnostic, TraceStep
    from noetlc.diagnostics.severity import Severity

    for name in ("code", "message"):
        if not isinstance(data[name], str):
            raise ValueError(f"bad {name}")
    trace = tuple(
        TraceStep(str(m), _span_from(s), _opt_str(step), _opt_str(tr))
        for m, s, step, tr in data["trace"]
    )
    related: list[tuple[str, Span]] = []
    for label, s in data["related"]:
        span = _span_from(s)
        if span is None:
            raise ValueError("bad related span")
        related.append((str(label), span))
    return Diagnostic(
        code=data["code"],
        severity=Severity(data["severity"]),
        message=data["message"],
        span=_span_from(data["span"]),
        hint=_opt_str(data["hint"]),
        trace=trace,
        related=tuple(related),
    )
