"""The pydantic-free fast path of the `schema` and `tools` passes (`stdlib_tools/shape_check`).

`fits` must be sound: whenever it accepts data, pydantic accepts it too (else a playbook
pydantic rejects would pass `check` silently). These tests regenerate the tables from the
models (stale tables fail), compare `fits` with pydantic on every playbook the repository
has (and the NoETL corpus when present) and on seeded mutations of them, and check that the
fast path really takes the common case.
"""

from __future__ import annotations

import copy
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from noetlc.compiler.pipeline import compile_file
from noetlc.compiler.surface.models import STEP_KEYS as MODEL_STEP_KEYS
from noetlc.compiler.surface.models import Playbook
from noetlc.compiler.surface.shape_table import MODELS, STEP_KEYS
from noetlc.stdlib_tools import args_table
from noetlc.stdlib_tools.kinds import lookup
from noetlc.stdlib_tools.shape_check import fits
from tests.conftest import CONFORMANCE_CASES, NOETL_FILES, REPO

SCRIPT = REPO / "scripts" / "gen_shape_tables.py"
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
DIAGNOSTIC_CASES = sorted((REPO / "tests" / "diagnostics" / "cases").glob("*.yaml"))
PLAYBOOKS = [*EXAMPLES, *CONFORMANCE_CASES, *DIAGNOSTIC_CASES, *NOETL_FILES]


def test_committed_tables_are_what_the_models_generate() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert STEP_KEYS == MODEL_STEP_KEYS


def pydantic_accepts(data: Any) -> bool:
    try:
        Playbook.model_validate(data)
    except ValidationError:
        return False
    return True


def document(path: Path) -> Any:
    unit = compile_file(path, until="load")
    return None if unit.document is None else unit.document.to_python()


@pytest.mark.parametrize("path", PLAYBOOKS, ids=lambda p: p.name)
def test_fits_never_accepts_what_pydantic_rejects(path: Path) -> None:
    data = document(path)
    if data is None:
        return  # does not load: no schema check at all
    if fits(MODELS, "Playbook", data):
        assert pydantic_accepts(data), path


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_examples_take_the_fast_path(path: Path) -> None:
    data = document(path)
    assert fits(MODELS, "Playbook", data)


def tool_tasks(path: Path) -> list[tuple[str, Any]]:
    unit = compile_file(path, until="normalize")
    if unit.playbook is None:
        return []
    tasks = [*unit.playbook.workbook, *(t for s in unit.playbook.workflow for t in s.tasks)]
    return [(t.kind, t.args.to_python()) for t in tasks]


@pytest.mark.parametrize("path", PLAYBOOKS, ids=lambda p: p.name)
def test_tool_arguments_fit_only_what_the_schema_accepts(path: Path) -> None:
    for kind, args in tool_tasks(path):
        record = lookup(kind)
        if record is None or not record.args_fit(args):
            continue
        record.schema.model_validate(args)  # raises if the fast path was wrong


def test_noop_arguments_take_the_fast_path() -> None:
    record = lookup("noop")
    assert record is not None
    assert record.args_fit({"result": {"a": 1}, "message": "{{ n }} items"})
    assert args_table.MODELS["NoopArgs"] is not None


def mutations(value: Any, rng: random.Random) -> Any:
    """One random change somewhere in `value`: a scalar of another type, a key added or
    removed, an item wrapped in a list."""
    replacements: list[Any] = [None, True, 3, -1, 2.5, "x", [], {}, ["a"], {"k": 1}, {1: "a"}]
    out = copy.deepcopy(value)
    node = out
    for _ in range(rng.randint(0, 6)):
        if isinstance(node, dict) and node:
            key = rng.choice(list(node))
            if isinstance(node[key], dict | list) and node[key]:
                node = node[key]
                continue
        elif isinstance(node, list) and node:
            index = rng.randrange(len(node))
            if isinstance(node[index], dict | list) and node[index]:
                node = node[index]
                continue
        break
    if isinstance(node, dict) and node:
        key = rng.choice(list(node))
        action = rng.randrange(4)
        if action == 0:
            del node[key]
        elif action == 1:
            node[key] = rng.choice(replacements)
        elif action == 2:
            node[rng.choice(["else_", "in_", "zzz", "when", "step", "kind", "from"])] = rng.choice(
                replacements
            )
        else:
            node[key] = [node[key]]
    elif isinstance(node, list) and node:
        node[rng.randrange(len(node))] = rng.choice(replacements)
    return out


def test_fits_agrees_with_pydantic_on_mutated_playbooks() -> None:
    rng = random.Random(20261125)
    accepted = 0
    for path in EXAMPLES + CONFORMANCE_CASES[:20]:
        data = document(path)
        if data is None:
            continue
        for _ in range(60):
            mutated = mutations(data, rng)
            if fits(MODELS, "Playbook", mutated):
                accepted += 1
                assert pydantic_accepts(mutated), (path, mutated)
    assert accepted > 50  # the mutations did exercise the accepting side


@pytest.mark.parametrize(
    "data",
    [
        {"workflow": [{"step": "start"}], "extra": 1},  # closed root: unknown key
        {"workflow": [{"desc": "no name"}]},  # a required field is missing
        {"workflow": [{"step": 1}]},  # an int is no string
        {"workflow": [{"step": "a", "loop": {"in": [], "concurrency": True}}]},  # bool for int
        {"workflow": [{"step": "a", "case": [{"else": 1, "else_": 2}]}]},  # two spellings
        {"workflow": [{"step": "a", "next": [{"step": "b", 3: "x"}]}]},  # a key that is no str
        {"workflow": [{"step": "a"}], "executor": {"spec": {"budgets": {"events": -1}}}},
        {"workflow": [{"step": "a"}], "kind": "Workflow"},  # not one of the literals
        {"workflow": "start"},  # not a list
    ],
)
def test_fits_refuses(data: Any) -> None:
    assert not fits(MODELS, "Playbook", data)


def test_fits_accepts_open_models_and_numbers_for_floats() -> None:
    data = {
        "workflow": [
            {
                "step": "a",
                "tool": {"kind": "noop", "anything": {"nested": [1, 2]}},  # open task
                "spec": {"timeout": 3, "custom": None},  # an int for a float, an extra key
                "next": [{"step": "b", "when": True}],
            }
        ],
        "executor": {"spec": {"budgets": {"events": 0}}},
    }
    assert fits(MODELS, "Playbook", data)
    assert pydantic_accepts(data)


def test_a_model_the_table_cannot_decide_never_fits() -> None:
    assert args_table.MODELS["NatsArgs"] is None  # validators without `shape_rules`
    assert not fits(args_table.MODELS, "NatsArgs", {"subject": "a"})
    assert not fits(MODELS, "NoSuchModel", {})


@pytest.mark.parametrize(
    "args, expected",
    [
        ({"code": "x = 1", "input": {"a": "{{ b }}"}}, True),
        ({"script": {"uri": "a.py", "source": {"type": "file"}}}, True),
        ({}, False),  # `code` or `script` is required (a validator)
        ({"code": None}, False),
        ({"code": "x", "script": {"source": {"type": "file"}}}, False),  # not both
    ],
)
def test_declared_rules_stand_for_the_validators(args: dict[str, Any], expected: bool) -> None:
    record = lookup("python")
    assert record is not None
    assert record.args_fit(args) is expected
    if expected:
        record.schema.model_validate(args)
    else:
        with pytest.raises(ValidationError):
            record.schema.model_validate(args)


def test_tool_arguments_fit_agrees_with_the_schemas_on_random_arguments() -> None:
    # every built-in kind, arguments drawn from its own spellings and a pool of values: the
    # declared `shape_rules` must refuse whatever the validators refuse
    from noetlc.stdlib_tools.kinds import BUILTIN

    values: list[Any] = [
        None, "x", "GET", "get", "postgres", "append", "publish", "kv_get", 0, 3, -2, 2.5,
        True, {}, {"a": 1}, {"a": "b"}, ["a"], [1], {"source": {"type": "inline"}},
        {"type": "sqlite", "query": "select 1"}, {"expects": ["a"]},
    ]  # fmt: skip
    rng = random.Random(7)
    accepted: dict[str, int] = {}
    for name, record in sorted(BUILTIN.items()):
        spec = args_table.MODELS.get(record.schema.__name__)
        keys = [*spec[1], "bogus"] if spec is not None else ["bogus"]
        for _ in range(400):
            args = {rng.choice(keys): rng.choice(values) for _ in range(rng.randint(0, 4))}
            if not record.args_fit(args):
                continue
            accepted[name] = accepted.get(name, 0) + 1
            try:
                record.schema.model_validate(args)
            except ValidationError as exc:
                raise AssertionError(f"{name}: {args} fits, but {exc}") from None
    # the fast path did accept arguments of most kinds (so the check above was exercised)
    assert len(accepted) >= 8, accepted


PYTHON_ARGS: list[dict[str, Any]] = [
    {"code": "x = 1"},
    {"code": "def main(a): return a", "input": {"a": [1, {"b": None}]}, "auth": "token"},
    {"code": "x", "args": {"n": 2.5}, "libs": ["json"], "assert": {"expects": ["n"]}},
    {"code": "x", "libs": {"np": "numpy", "j": {"from": "json", "import": "dumps"}}},
    {"script": {"uri": "a.py", "source": {"type": "file", "path": "b.py"}}},
    {"script": {"source": {"type": "inline", "code": "x = 1"}}, "auth": {"db": "pg"}},
]


@pytest.mark.parametrize("args", PYTHON_ARGS)
def test_built_arguments_are_what_pydantic_makes(args: dict[str, Any]) -> None:
    record = lookup("python")
    assert record is not None and record.plain_args
    built = record.build_args(args)
    assert built is not None
    model = record.schema.model_validate(args)
    for options in ({}, {"by_alias": True}, {"exclude_none": True}):
        assert built.model_dump(**options) == model.model_dump(**options)
    for name in type(model).model_fields:
        mine, theirs = getattr(built, name), getattr(model, name)
        if hasattr(theirs, "model_dump"):
            assert mine.model_dump() == theirs.model_dump()
            assert mine.model_extra == theirs.model_extra
        elif not isinstance(theirs, dict | list):  # containers: compared by model_dump
            assert mine == theirs
    # new containers, as pydantic makes them: the executor may change them freely
    if "input" in args:
        assert built.input is not args["input"]


def test_build_refuses_what_pydantic_would_convert() -> None:
    from noetlc.stdlib_tools.shape_check import build

    # an integer for a float: pydantic makes 3.0, `build` leaves it to pydantic
    assert build(args_table.MODELS, "HttpTimeout", {"connect": 3}) is None
    assert build(args_table.MODELS, "HttpTimeout", {"connect": 3.0}) is not None
    http = lookup("http")
    assert http is not None and http.build_args({"url": "x"}) is None  # not `plain_args`
