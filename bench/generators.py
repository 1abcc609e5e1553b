"""Synthetic playbooks for benchmarks: chains, wide inclusive fan-outs with joins, loops."""

from __future__ import annotations

import yaml


def _doc(name: str, steps: list[dict[str, object]]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "noetl.io/v2",
            "kind": "Playbook",
            "metadata": {"name": name},
            "workload": {"items": [1, 2, 3], "limit": 5},
            "workflow": steps,
        },
        sort_keys=False,
    )


def chain(n: int) -> str:
    steps: list[dict[str, object]] = []
    for i in range(n):
        step: dict[str, object] = {
            "step": "start" if i == 0 else f"s{i}",
            "tool": {
                "kind": "python",
                "input": {"x": "{{ workload.limit }}"},
                "code": "result = x",
            },
        }
        if i + 1 < n:
            step["next"] = {
                "arcs": [{"step": f"s{i + 1}", "when": f"{{{{ workload.limit > {i % 7} }}}}"}]
            }
        steps.append(step)
    return _doc(f"chain_{n}", steps)


def fanout(n: int, width: int = 8) -> str:
    """Blocks of an inclusive fork into `width` branches and an AND-join, repeated."""
    steps: list[dict[str, object]] = []
    blocks = max(1, n // (width + 2))
    previous = "start"
    steps.append({"step": "start", "tool": {"kind": "noop"}})
    for b in range(blocks):
        fork, join = f"f{b}", f"j{b}"
        steps[-1]["next"] = {"arcs": [{"step": fork}]} if steps[-1]["step"] != fork else None
        steps.append(
            {
                "step": fork,
                "tool": {"kind": "noop"},
                "next": {
                    "spec": {"mode": "inclusive"},
                    "arcs": [{"step": f"b{b}_{w}"} for w in range(width)],
                },
            }
        )
        for w in range(width):
            steps.append(
                {
                    "step": f"b{b}_{w}",
                    "tool": {"kind": "noop"},
                    "next": {"arcs": [{"step": join, "args": {"w": w}}]},
                }
            )
        steps.append({"step": join, "tool": {"kind": "noop"}})
        previous = join
    del previous
    return _doc(f"fanout_{n}", steps)


def loops(n: int) -> str:
    steps: list[dict[str, object]] = []
    for i in range(n):
        step: dict[str, object] = {
            "step": "start" if i == 0 else f"l{i}",
            "loop": {"in": "{{ workload.items }}", "iterator": "item", "spec": {"mode": "parallel", "max_in_flight": 4}},
            "tool": [
                {"name": "work", "kind": "python", "input": {"v": "{{ iter.item }}"}, "code": "result = v",
                 "spec": {"policy": {"rules": [
                     {"when": "{{ outcome.status == 'error' }}", "then": {"do": "retry", "attempts": 3}},
                     {"else": {"then": {"do": "continue", "set_iter": {"seen": "{{ outcome.result }}"}}}},
                 ]}}},
            ],
        }  # fmt: skip
        if i + 1 < n:
            step["next"] = {
                "arcs": [{"step": f"l{i + 1}", "when": "{{ event.name == 'loop.done' }}"}]
            }
        steps.append(step)
    return _doc(f"loops_{n}", steps)
