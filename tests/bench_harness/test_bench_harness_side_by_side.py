"""The side-by-side bench's logic without servers or timings: its playbooks compile and run,
when a status reply ends a run, the rotation of the engines, the environment it reads, the CPU
arithmetic."""

from __future__ import annotations

import os

import pytest

from noetlc.bench import generators, side_by_side
from noetlc.bench.side_by_side import RunFailed, cpu_between, ended, noetl_from_env, rotated
from noetlc.compiler.pipeline import compile_source


@pytest.mark.parametrize("label", list(side_by_side.PLAYBOOKS))
def test_the_playbooks_compile(label: str) -> None:
    unit = compile_source(side_by_side.PLAYBOOKS[label]())
    assert not unit.reporter.has_errors, unit.reporter.sorted()[:3]


def test_last_steps() -> None:
    assert generators.last_step(generators.python_chain(3)) == "s2"
    assert generators.last_step(generators.arcs_noop_chain(100)) == "s99"
    assert generators.last_step(generators.python_loop(5, "parallel")) == "end"


def test_a_run_ends_only_when_the_last_step_completed_for_sure() -> None:
    done = {"completed": True, "completion_inferred": False, "completed_steps": ["start", "end"]}
    assert ended(done, "end")
    # NoETL's server guesses an end while no command is pending for a moment
    assert not ended({**done, "completion_inferred": True}, "end")
    assert not ended({**done, "completed_steps": ["start"]}, "end")
    assert not ended({"completed": False, "completed_steps": []}, "end")
    with pytest.raises(RunFailed):
        ended({"completed": False, "failed": True}, "end")


def test_rotation() -> None:
    assert [rotated(["a", "b", "c"], turn) for turn in range(4)] == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]
    assert rotated([], 3) == []


def test_noetl_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (side_by_side.SERVER_ENV, side_by_side.PIDS_ENV, side_by_side.PG_DB_ENV):
        monkeypatch.delenv(name, raising=False)
    engine, reason = noetl_from_env()
    assert engine is None and side_by_side.SERVER_ENV in reason and "\n" not in reason
    monkeypatch.setenv(side_by_side.SERVER_ENV, "http://127.0.0.1:8093/")
    engine, reason = noetl_from_env()
    assert engine is not None and not reason
    assert engine.host_port == ("127.0.0.1", 8093) and not engine.cpu_measured
    monkeypatch.setenv(side_by_side.PIDS_ENV, f"{os.getpid()}, 1")
    engine, _ = noetl_from_env()
    assert engine is not None and engine.cpu_measured and engine.pids() == [os.getpid(), 1]
    assert engine.backends is None


def test_cpu_between() -> None:
    assert cpu_between({1: 1.0, 2: 0.5}, {1: 1.5, 3: 0.25}) == pytest.approx(0.75)
    assert cpu_between(None, {1: 1.0}) is None
    assert os.getpid() in side_by_side.with_descendants([os.getpid()])


def test_the_legs_of_a_step() -> None:
    events = [
        ("workflow.started", 0.0),
        ("step.scheduled", 0.0),
        ("task.started", 0.002),
        ("step.done", 0.005),
        ("next.selected", 0.009),
        ("step.scheduled", 0.009),
        ("task.started", 0.013),
        ("step.done", 0.015),
        ("loop.iteration.started", 0.021),
        ("task.started", 0.022),
        ("loop.iteration.done", 0.025),
    ]
    split = side_by_side.legs(events)
    assert split == pytest.approx({"pick-up": 2.0, "task": 3.0, "server": 5.0})
    assert side_by_side.legs([("step.scheduled", 0.0)]) == {}
