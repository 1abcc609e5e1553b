"""Property: random mutations of real playbooks never raise anything but diagnostics."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noetlc.compiler.pipeline import compile_source
from noetlc.diagnostics.errors import InternalCompilerError
from tests.conftest import CONFORMANCE_CASES, NOETL_FILES

# the conformance cases, and the NoETL corpus when it is present
SOURCES = [p for p in CONFORMANCE_CASES + NOETL_FILES if p.stat().st_size < 20_000]

GARBAGE: list[Any] = [None, 0, -1, 3.5, True, "", "{{", "{{ x", "}}", [], {}, [1, [2]], {"a": {}}]


def _paths(node: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_paths(v, (*here, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_paths(v, (*here, i)))
    return out


def _mutate(data: Any, rng: random.Random) -> Any:
    paths = [p for p in _paths(data) if p]
    if not paths:
        return copy.deepcopy(rng.choice(GARBAGE))
    path = rng.choice(paths)
    parent = data
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if rng.random() < 0.4:
        del parent[last]
    else:
        # a fresh copy: a shared list inserted twice could end up inside itself
        parent[last] = copy.deepcopy(rng.choice(GARBAGE))
    return data


def _compile(text: str) -> None:
    try:
        unit = compile_source(text, "mutant.yaml")
    except InternalCompilerError as exc:  # pragma: no cover - the failure being tested
        raise AssertionError(f"internal error on:\n{text}") from exc
    for d in unit.reporter.diagnostics:
        assert d.code.startswith("NOE")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(SOURCES),
    seed=st.integers(0, 2**32 - 1),
    rounds=st.integers(1, 4),
)
def test_structural_mutations(source: Path, seed: int, rounds: int) -> None:
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    rng = random.Random(seed)
    for _ in range(rounds):
        data = _mutate(data, rng)
    _compile(yaml.safe_dump(data, sort_keys=False))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.sampled_from(SOURCES), cut=st.floats(0, 1), junk=st.binary(max_size=20))
def test_truncated_and_corrupted_text(source: Path, cut: float, junk: bytes) -> None:
    text = source.read_text(encoding="utf-8")
    truncated = text[: int(len(text) * cut)]
    _compile(truncated)
    _compile(truncated + junk.decode("latin-1"))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text(text: str) -> None:
    _compile(text)
