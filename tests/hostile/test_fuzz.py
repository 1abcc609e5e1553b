"""The fuzz suite: hostile playbooks, workloads, keychains, expressions and `.nbc` programs.

Over one run (scale 1, the default; `NOETLC_FUZZ_SCALE=4` runs four times as many) it feeds
10,000+ generated or mutated inputs to the loaders, the compiler, the expression evaluator and
the VMs, and checks for each: no internal error (only the documented errors, each with its
stable code), no hang (every case runs under a 10-second alarm), no code execution (a canary
that any executed stored code would set). `test_the_suite_ran_its_cases` prints the counts.
Hypothesis runs derandomized, so a failure reproduces.
"""

from __future__ import annotations

import builtins
import os
import random
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noetlc.compiler.pipeline import compile_source
from noetlc.diagnostics.errors import UserError
from noetlc.diagnostics.yaml_safe import YamlError, load_data
from noetlc.expr.compile import ExpressionSyntaxError, ExpressionUnsafe, compile_expression
from noetlc.expr.runtime import ExpressionError, compile_entry
from noetlc.ir.program import Program as IRProgram
from noetlc.stdlib_tools.keychain import Keychain, KeychainError
from tests.hostile.program_fuzz import CANARY, SEED_FILES, drive, mutate, resign, seeds

SCALE = max(1, int(os.environ.get("NOETLC_FUZZ_SCALE", "1")))
PLAN = {
    "expressions": 4000 * SCALE,
    "workloads": 2000 * SCALE,
    "keychains": 500 * SCALE,
    "playbooks": 1500 * SCALE,
    "programs": 2000 * SCALE,
}
CASES: Counter[str] = Counter()
HANG_SECONDS = 10


@contextmanager
def _no_hang() -> Iterator[None]:
    def hang(signum: int, frame: Any) -> None:
        raise AssertionError(f"a case ran for more than {HANG_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def _canary() -> Iterator[None]:
    builtins.__dict__.pop(CANARY, None)
    yield
    assert CANARY not in builtins.__dict__, "stored code was executed"


def _settings(kind: str) -> Any:
    return settings(
        max_examples=PLAN[kind],
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# --------------------------------------------------------------------------- expressions

ATOMS = [
    "1", "0", "-1", "10", "9999", "10 ** 9999", "2.5", "'a'", "'%0999999d'", "'x' * 1000",
    "true", "none", "x", "x.a", "x['a']", "x.items", "xs", "xs[0]", "s", "workload.n",
    "range(100000)", "range(10 ** 9)", "[1, 2]", "{'a': 1}", "(1, 2)", "undefined_name",
    "x.__class__", "xs | length", "s | upper", "xs | join(s * 1000)", "s | center(10 ** 7)",
    "lookup(x, 'a')", "dict(a=1)", "'{0}'.format(1)", "x.items()", "s.upper()",
]  # fmt: skip
BINARY = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "<", "and", "or", "in"]
FILTERS = ["length", "int", "string", "list", "tojson", "sum", "first", "join(',')", "sort",
           "default(1)", "center(99999999)", "indent(99999999)", "format(1)", "unique"]  # fmt: skip


@st.composite
def expressions(draw: Any, depth: int = 0) -> str:
    kind = draw(st.integers(0, 6 if depth < 4 else 0))
    if kind == 0:
        return draw(st.sampled_from(ATOMS))
    if kind in (1, 2):
        op = draw(st.sampled_from(BINARY))
        return f"{draw(expressions(depth + 1))} {op} {draw(expressions(depth + 1))}"
    if kind == 3:
        return f"({draw(expressions(depth + 1))})"
    if kind == 4:
        return f"{draw(expressions(depth + 1))} | {draw(st.sampled_from(FILTERS))}"
    if kind == 5:
        return "(" * draw(st.integers(20, 80)) + "1" + ")" * draw(st.integers(20, 80))
    return f"{draw(expressions(depth + 1))} if {draw(expressions(depth + 1))} else 0"


VARIABLES = {"x": {"a": 1, "__class__": 2}, "xs": [1, 2, 3], "s": "abc", "workload": {"n": "5"}}


def _expression_case(text: str, template: bool) -> None:
    source = ("{% if true %}{{ " + text + " }}{% endif %}") if template else "{{ " + text + " }}"
    with _no_hang():
        try:
            compiled = compile_expression(source)
        except (ExpressionSyntaxError, ExpressionUnsafe):
            return
        with suppress(ExpressionError):
            compile_entry(compiled.to_entry())(dict(VARIABLES))


@_settings("expressions")
@given(expressions(), st.booleans())
def test_fuzz_expressions(text: str, template: bool) -> None:
    CASES["expressions"] += 1
    _expression_case(text, template)


# --------------------------------------------------------------------------- YAML data

YAML_PIECES = [
    "a: 1\n", "b: &x [1, 2]\n", "c: *x\n", "d: &y [*x, *x, *x, *x, *x, *x, *x, *x]\n",
    "e: [*y, *y, *y, *y, *y, *y, *y, *y, *y, *y]\n", "f: &r [*r]\n", "g: !!int abc\n",
    "h: !!python/object:os.system ls\n", "i: !!binary aGk=\n", "j: " + "9" * 5000 + "\n",
    "k: {<<: *x}\n", "l: \t\n", "m: [\n", "n: '\n", "--- \n", "o: &o {p: *o}\n",
    "q: 2024-01-01\n", "r: 1e999\n", "s: ~\n", "? [1]\n: 2\n", "t: !custom 1\n", "u: *missing\n",
]  # fmt: skip


@st.composite
def yaml_documents(draw: Any) -> bytes:
    pieces = draw(st.lists(st.sampled_from(YAML_PIECES), min_size=1, max_size=8))
    data = "".join(pieces).encode()
    if draw(st.integers(0, 9)) == 0:  # some bytes that are not UTF-8
        at = draw(st.integers(0, len(data)))
        data = (
            data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\x80\x80", b"\x00"])) + data[at:]
        )
    return data


@_settings("workloads")
@given(yaml_documents())
def test_fuzz_workload_files(data: bytes) -> None:
    CASES["workloads"] += 1
    with _no_hang():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return  # the decoder's NOE004 is covered by test_yaml_safe
        try:
            load_data(text, "w.yaml")
        except YamlError as exc:
            assert exc.code in ("NOE001", "NOE006", "NOE007"), exc


@_settings("keychains")
@given(yaml_documents())
def test_fuzz_keychain_files(data: bytes) -> None:
    CASES["keychains"] += 1
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"noetlc-fuzz-keychain-{os.getpid()}.yaml"
    path.write_bytes(data)
    try:
        with _no_hang():
            try:
                Keychain(file=path)
            except KeychainError as exc:
                assert exc.code == "NOE813", exc
    finally:
        path.unlink()


# --------------------------------------------------------------------------- playbooks

_TEXTS: list[str] = []


def _seed_texts() -> list[str]:
    if not _TEXTS:
        _TEXTS.extend(p.read_text() for p in SEED_FILES)
    return _TEXTS


INSERTS = [
    "", "  ", "- ", "{{ ", " }}", "&a ", "*a ", "!!int x", "{{ (workload.b ** 9999) ** 9999 }}",
    "{{ x.items() }}", "[5, 6]", "{in: [5, 6], iterator: i}", "step: start", "next: start",
    "when: '{{ workload.stop }}'", ": ", "\t", "'", '"', "{% for i in range(10**9) %}",
    "loop:", "tool: {kind: python, code: 'result = 1'}", "1" * 5000, "\ufeff", "~",
]  # fmt: skip


@st.composite
def playbook_texts(draw: Any) -> str:
    lines = draw(st.sampled_from(_seed_texts())).splitlines()
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.integers(0, 3))
        at = draw(st.integers(0, max(0, len(lines) - 1)))
        if op == 0 and lines:
            del lines[at]
        elif op == 1 and lines:
            lines.insert(at, lines[draw(st.integers(0, len(lines) - 1))])
        elif op == 2 and lines:
            col = draw(st.integers(0, len(lines[at])))
            lines[at] = lines[at][:col] + draw(st.sampled_from(INSERTS)) + lines[at][col:]
        else:
            lines.insert(at, draw(st.sampled_from(INSERTS)))
    return "\n".join(lines) + "\n"


@_settings("playbooks")
@given(playbook_texts())
def test_fuzz_playbooks(text: str) -> None:
    CASES["playbooks"] += 1
    with _no_hang():
        unit = compile_source(text, "fuzz.yaml")
    internal = [d for d in unit.reporter.diagnostics if d.code.startswith("NOE9")]
    assert not internal, (internal, text)


# --------------------------------------------------------------------------- programs


@_settings("programs")
@given(st.integers(0, 2**32 - 1))
def test_fuzz_programs(seed: int) -> None:
    CASES["programs"] += 1
    rng = random.Random(seed)
    payload = mutate(rng.choice(seeds()), rng)
    try:
        data = resign(payload)
    except (TypeError, ValueError, OverflowError):
        return  # msgpack cannot hold it: no file can either
    with _no_hang():
        try:
            program = IRProgram.decode(data)
        except UserError as exc:
            assert exc.code in ("NOE701", "NOE702", "NOE703", "NOE704", "NOE705"), exc
            return
        vm = drive(program)
    assert (vm.error or {}).get("code") != "NOE850", vm.error


def test_the_suite_ran_its_cases(capsys: pytest.CaptureFixture[str]) -> None:
    if set(CASES) != set(PLAN):
        pytest.skip("only part of the fuzz suite ran")
    total = sum(CASES.values())
    with capsys.disabled():
        counts = ", ".join(f"{k} {v:,}" for k, v in sorted(CASES.items()))
        print(f"\nfuzz cases: {total:,} ({counts})")
    assert total >= 10_000
