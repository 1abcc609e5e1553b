"""The compile cache: a hit prints exactly what a miss prints, a damaged entry is ignored and
rewritten, `--no-cache` and `NOETLC_NO_CACHE=1` turn it off, and the folder stays bounded."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from noetlc.cli import compile_cache
from noetlc.diagnostics.report import Diagnostic, Span, TraceStep
from noetlc.diagnostics.severity import Severity

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "examples" / "hello.yaml"
WARNINGS = REPO / "tests" / "fixtures" / "conformance" / "c09_legacy_case.yaml"
EXECUTION_ID = re.compile(r"\bexecution \d{1,19}\b")  # a snowflake id, as `run` announces it


def command(
    cache: Path, prog: str, *argv: str, cwd: Path | None = None, **env: str
) -> tuple[int, str, str]:
    module = "noetlc" if prog == "noetlc" else "noetlc.cli.vm_main"
    environ = {**os.environ, "NOETLC_CACHE_DIR": str(cache), **env}
    if "NOETLC_NO_CACHE" not in env:
        environ.pop("NOETLC_NO_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-m", module, *argv],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=environ,
        check=False,
        timeout=120,
    )
    return done.returncode, done.stdout, done.stderr


def entries(cache: Path) -> list[Path]:
    return sorted(cache.rglob("*.nce"))


@pytest.mark.parametrize("fmt", ["text", "json", "sarif"])
def test_check_prints_the_same_from_the_cache(tmp_path: Path, fmt: str) -> None:
    argv = ["check", "--format", fmt, str(WARNINGS), str(HELLO)]
    miss = command(tmp_path, "noetlc", *argv)
    assert len(entries(tmp_path)) == 2  # both compiled without errors: both kept
    hit = command(tmp_path, "noetlc", *argv)
    assert hit == miss
    assert "NOE402" in miss[1] and miss[0] == 0


def test_run_prints_the_same_from_the_cache(tmp_path: Path) -> None:
    argv = ["run", str(HELLO), "--db", "memory:", "--quiet"]
    miss = command(tmp_path, "noetl-vm", *argv)
    assert len(entries(tmp_path)) == 1
    hit = command(tmp_path, "noetl-vm", *argv)
    assert miss[0] == hit[0] == 0
    # the execution ids differ, all else is the same
    assert EXECUTION_ID.sub("ID", hit[1]) == EXECUTION_ID.sub("ID", miss[1])
    assert hit[2] == miss[2]
    assert "HELLO WORLD" in hit[1]


def test_a_file_with_errors_is_not_kept(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: noetl.io/v2\nkind: Playbook\nworkflow: 3\n", encoding="utf-8")
    cache = tmp_path / "cache"
    first = command(cache, "noetlc", "check", str(bad))
    assert first[0] == 1
    assert entries(cache) == []
    assert command(cache, "noetlc", "check", str(bad)) == first


def test_an_edited_file_is_compiled_again(tmp_path: Path) -> None:
    playbook = tmp_path / "p.yaml"
    shutil.copy(HELLO, playbook)
    cache = tmp_path / "cache"
    assert command(cache, "noetlc", "check", str(playbook))[0] == 0
    playbook.write_text(WARNINGS.read_text(encoding="utf-8"), encoding="utf-8")
    code, out, _ = command(cache, "noetlc", "check", str(playbook))
    assert code == 0 and "NOE402" in out
    assert len(entries(cache)) == 2


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_a_damaged_entry_is_ignored_and_rewritten(tmp_path: Path, damage: str) -> None:
    argv = ["check", str(WARNINGS)]
    miss = command(tmp_path, "noetlc", *argv)
    (entry,) = entries(tmp_path)
    good = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(good[: len(good) // 2])
    elif damage == "flip":
        entry.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    elif damage == "garbage":
        entry.write_bytes(b"\x00\xff" * 40)
    else:
        entry.write_bytes(b"")
    assert command(tmp_path, "noetlc", *argv) == miss
    assert entry.read_bytes() == good  # the compile wrote it again


def test_a_damaged_program_entry_is_compiled_again(tmp_path: Path) -> None:
    argv = ["run", str(HELLO), "--db", "memory:", "--quiet"]
    command(tmp_path, "noetl-vm", *argv)
    (entry,) = entries(tmp_path)
    good = entry.read_bytes()
    entry.write_bytes(good[:-7])
    code, out, err = command(tmp_path, "noetl-vm", *argv)
    assert code == 0 and "HELLO WORLD" in out and err == ""
    assert entry.read_bytes() == good


@pytest.mark.parametrize(
    "flag, env",
    [("--no-cache", {}), (None, {"NOETLC_NO_CACHE": "1"})],
)
def test_the_cache_can_be_turned_off(tmp_path: Path, flag: str | None, env: dict[str, str]) -> None:
    extra = [flag] if flag else []
    assert command(tmp_path, "noetlc", "check", *extra, str(HELLO), **env)[0] == 0
    run = ["run", str(HELLO), "--db", "memory:", "--quiet", *extra]
    assert command(tmp_path, "noetl-vm", *run, **env)[0] == 0
    assert entries(tmp_path) == []


def test_the_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOETLC_CACHE_DIR", "/a")
    monkeypatch.setenv("XDG_CACHE_HOME", "/b")
    assert compile_cache.cache_dir() == Path("/a")
    monkeypatch.delenv("NOETLC_CACHE_DIR")
    assert compile_cache.cache_dir() == Path("/b/noetlc")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", "/home/someone")
    assert compile_cache.cache_dir() == Path("/home/someone/.cache/noetlc")


def test_the_key_covers_kind_file_options_and_source() -> None:
    base = compile_cache.key("check", "a.yaml", b"x")
    assert base == compile_cache.key("check", "a.yaml", b"x")
    others = [
        compile_cache.key("program", "a.yaml", b"x"),
        compile_cache.key("check", "b.yaml", b"x"),
        compile_cache.key("check", "a.yaml", b"y"),
        compile_cache.key("check", "a.yaml", b"x", {"until": "net"}),
    ]
    assert base not in others and len(set(others)) == len(others)


def test_entries_keep_every_part_of_a_diagnostic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOETLC_CACHE_DIR", str(tmp_path))
    span = Span("f.yaml", 3, 4, 3, 9)
    diag = Diagnostic(
        "NOE402",
        Severity.WARNING,
        "message",
        span,
        "a hint",
        (TraceStep("went", span, "start", "t1"), TraceStep("then")),
        (("declared here", Span("f.yaml", 1, 1, 1, 2)),),
    )
    k = compile_cache.key("check", "f.yaml", b"src")
    compile_cache.store(k, [diag], b"body")
    entry = compile_cache.load(k)
    assert entry is not None
    assert entry.diagnostics == [diag] and entry.body == b"body"
    # an entry under another key's name (copied or renamed) is not used
    other = compile_cache.key("check", "g.yaml", b"src")
    target = tmp_path / "v1" / other[:2] / f"{other[2:]}.nce"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(next(tmp_path.rglob("*.nce")), target)
    assert compile_cache.load(other) is None


def test_eviction_removes_the_least_recently_used(tmp_path: Path) -> None:
    folder = tmp_path / "v1" / "ab"
    folder.mkdir(parents=True)
    for i in range(6):
        p = folder / f"{i}.nce"
        p.write_bytes(b"x" * 100)
        os.utime(p, ns=(i * 10**9, i * 10**9))
    assert compile_cache.evict(tmp_path / "v1", max_entries=4) == 2
    assert sorted(p.name for p in folder.iterdir()) == ["2.nce", "3.nce", "4.nce", "5.nce"]
    assert compile_cache.evict(tmp_path / "v1", max_entries=10, max_bytes=250) == 2
    assert sorted(p.name for p in folder.iterdir()) == ["4.nce", "5.nce"]
    assert compile_cache.evict(tmp_path / "v1") == 0


def test_loading_pauses_the_collector_and_restores_it() -> None:
    import gc

    from noetlc.cli.common import loading

    assert gc.isenabled()
    with loading():
        assert not gc.isenabled()
        garbage: list[object] = []
        garbage.append(garbage)  # a cycle made while loading
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # nothing stays exempt from collection
    with pytest.raises(ValueError), loading():
        raise ValueError("a failed load")
    assert gc.isenabled()
    gc.disable()
    try:
        with loading():
            pass
        assert not gc.isenabled()  # a collector paused by the caller stays paused
    finally:
        gc.enable()


def test_run_of_a_playbook_compiles_with_the_collector_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the pass modules are imported and the program compiled inside `loading()`
    import gc

    from noetlc.cli.noetlc_commands import artifacts

    seen: list[bool] = []
    real = artifacts.load_program

    def spy(path: str, use_cache: bool = False) -> object:
        seen.append(gc.isenabled())
        return real(path, use_cache)

    monkeypatch.setattr(artifacts, "load_program", spy)
    monkeypatch.setenv("NOETLC_CACHE_DIR", str(tmp_path / "cache"))
    from noetlc.cli.vm_main import main

    assert main(["run", str(HELLO), "--db", "memory:", "--quiet"]) == 0
    assert seen == [False] and gc.isenabled()
