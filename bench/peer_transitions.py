"""Peer runner for the `transitions` state-machine library, run by its own virtualenv.

    python peer_transitions.py SPEC.json  →  one JSON object {"results": {...}, "version": ...}

SPEC: {"sizes": {"chain": n, "loop": n, "decisions": n}, "repeat": k, "waiting": N}.
The same three workflows as state machines (a machine is built per run, like a program is
decoded per run on our side): a chain of n states; one state with an internal `item`
transition fired n times, its callback collecting the item; a `decide` state whose trigger
goes back to itself while `i < n` (a condition) else to `end`. `waiting`: bytes per model
parked in a state, N models on one shared machine (tracemalloc).
"""

from __future__ import annotations

import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from importlib.metadata import version
from typing import Any


def chain(n: int) -> None:
    from transitions import Machine

    states = [f"s{i}" for i in range(n)]
    transitions = [
        {"trigger": "next", "source": f"s{i}", "dest": f"s{i + 1}"} for i in range(n - 1)
    ]
    model = type("Model", (), {})()
    Machine(model=model, states=states, transitions=transitions, initial="s0")
    for _ in range(n - 1):
        model.next()
    assert model.state == f"s{n - 1}"


def loop(n: int) -> None:
    from transitions import Machine

    class Model:
        def __init__(self) -> None:
            self.collected: list[Any] = []

        def work(self, item: Any) -> None:
            self.collected.append(item)

    model = Model()
    Machine(
        model=model,
        states=["work", "end"],
        transitions=[
            {"trigger": "item", "source": "work", "dest": None, "after": "work"},
            {"trigger": "done", "source": "work", "dest": "end"},
        ],
        initial="work",
    )
    for i in range(n):
        model.item(i)  # type: ignore[attr-defined]
    model.done()  # type: ignore[attr-defined]
    assert len(model.collected) == n


def decisions(n: int) -> None:
    from transitions import Machine

    class Model:
        def __init__(self) -> None:
            self.i = 0

        def more(self) -> bool:
            return self.i < n

        def inc(self) -> None:
            self.i += 1

    model = Model()
    Machine(
        model=model,
        states=["decide", "end"],
        transitions=[
            {"trigger": "step", "source": "decide", "dest": "decide", "conditions": "more"},
            {"trigger": "step", "source": "decide", "dest": "end"},
        ],
        initial="decide",
        before_state_change="inc",
    )
    while model.state != "end":  # type: ignore[attr-defined]
        model.step()  # type: ignore[attr-defined]


def waiting(count: int) -> float:
    from transitions import Machine

    machine = Machine(model=None, states=["waiting", "done"], initial="waiting")
    machine.add_transition("finish", "waiting", "done")
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    models = []
    for _ in range(count):
        model = type("Execution", (), {})()
        machine.add_model(model)
        models.append(model)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    total = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert all(m.state == "waiting" for m in models)
    return total / count


def best(fn: Callable[[int], None], n: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn(n)
        times.append(time.perf_counter() - started)
    return min(times)


def main(spec_path: str) -> dict[str, Any]:
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    repeat = spec.get("repeat", 3)
    runners = {"chain": chain, "loop": loop, "decisions": decisions}
    results: dict[str, Any] = {
        name: {"seconds": best(runners[name], n, repeat)} for name, n in spec["sizes"].items()
    }
    if spec.get("waiting"):
        results["waiting"] = {"bytes": waiting(spec["waiting"])}
    return {"results": results, "version": version("transitions")}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
