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


def big_loop(items: int, mode: str = "sequential", tasks: int = 1) -> str:
    """One step looping over `items` workload items with a pipeline of `tasks` noop tasks."""
    pipeline = [{"name": f"t{i}", "kind": "noop"} for i in range(tasks)]
    loop: dict[str, object] = {"in": "{{ workload.items }}", "iterator": "item"}
    loop["spec"] = {"mode": mode, "max_in_flight": 8} if mode == "parallel" else {"mode": mode}
    return _playbook(
        f"loop_{mode}_{items}",
        {"items": list(range(items))},
        [
            {
                "step": "start",
                "loop": loop,
                "tool": pipeline,
                "next": {"arcs": [{"step": "end", "when": "{{ event.name == 'loop.done' }}"}]},
            },
            {"step": "end", "tool": {"kind": "noop"}},
        ],
    )


def noop_chain(n: int) -> str:
    """`n` noop steps in a row, unguarded: the 100-step chain of DESIGN §5."""
    steps: list[dict[str, object]] = []
    for i in range(n):
        step: dict[str, object] = {"step": "start" if i == 0 else f"s{i}", "tool": {"kind": "noop"}}
        if i + 1 < n:
            step["next"] = f"s{i + 1}"
        steps.append(step)
    return _playbook(f"noop_chain_{n}", {}, steps)


def decisions(n: int) -> str:
    """A guarded self-loop: `decide` runs `n` times, each run ends in an exclusive decision
    (back to itself while `ctx.i < workload.n`, else to `end`)."""
    count = {"do": "continue", "set_ctx": {"i": "{{ (ctx.i | default(0)) + 1 }}"}}
    return _playbook(
        f"decisions_{n}",
        {"n": n},
        [
            {"step": "start", "tool": {"kind": "noop"}, "next": "decide"},
            {
                "step": "decide",
                "tool": {
                    "kind": "noop",
                    "spec": {"policy": {"rules": [{"else": {"then": count}}]}},
                },
                "next": {
                    "spec": {"mode": "exclusive"},
                    "arcs": [
                        {"step": "decide", "when": "{{ ctx.i < workload.n }}"},
                        {"step": "end"},
                    ],
                },
            },
            {"step": "end", "tool": {"kind": "noop"}},
        ],
    )


def guards(n: int) -> str:
    """Many guards: a router of `n` exclusive guarded arcs, each target behind an admission
    guard, plus a task policy of `n` rules (lint and compile stress the expression pass)."""
    rules: list[dict[str, object]] = [
        {"when": f"{{{{ outcome.status == 'error' and _attempt < {i % 5 + 1} }}}}",
         "then": {"do": "retry", "attempts": 3}}
        for i in range(n)
    ]  # fmt: skip
    rules.append({"else": {"then": {"do": "continue", "set_ctx": {"v": "{{ _attempt }}"}}}})
    arcs: list[dict[str, object]] = [
        {"step": f"g{i}", "when": f"{{{{ ctx.v | default(0) > {i} and workload.limit != {i} }}}}"}
        for i in range(n)
    ]
    steps: list[dict[str, object]] = [
        {
            "step": "start",
            "tool": [{"name": "probe", "kind": "noop", "spec": {"policy": {"rules": rules}}}],
            "next": {"spec": {"mode": "exclusive"}, "arcs": arcs},
        }
    ]
    for i in range(n):
        admit = {"rules": [{"when": f"{{{{ workload.limit >= {i % 3} }}}}", "then": {"allow": True}},
                           {"else": {"then": {"allow": False}}}]}  # fmt: skip
        steps.append(
            {"step": f"g{i}", "spec": {"policy": {"admit": admit}}, "tool": {"kind": "noop"}}
        )
    return _playbook(f"guards_{n}", {"limit": 5}, steps)


def payload(kb: int) -> str:
    """A large workload (about `kb` KiB of records) passed through a python step."""
    rows = [
        {"id": i, "name": f"row-{i:06d}", "tags": ["a", "b"], "score": i * 0.5}
        for i in range(kb * 16)
    ]
    return _playbook(
        f"payload_{kb}kb",
        {"rows": rows},
        [
            {
                "step": "start",
                "tool": {"kind": "python", "input": {"rows": "{{ workload.rows }}"},
                         "code": "result = {'n': len(rows), 'last': rows[-1]['id']}"},
                "next": "end",
            },
            {"step": "end", "tool": {"kind": "noop"}},
        ],
    )  # fmt: skip


def nested(depth: int, width: int = 3) -> dict[str, str]:
    """`depth` playbooks, each calling the next as a sub-playbook from `width` steps.

    Returns {relative path: text}; the compiler checks each file on its own (sub-playbooks are
    referenced by catalog path), so this measures linting a family of composed playbooks."""
    files: dict[str, str] = {}
    for d in range(depth):
        steps: list[dict[str, object]] = []
        for w in range(width):
            step: dict[str, object] = {"step": "start" if w == 0 else f"call{w}"}
            if d + 1 < depth:
                step["tool"] = {"kind": "playbook", "path": f"bench/nested/level{d + 1}",
                                "input": {"depth": "{{ workload.depth }}", "w": w}}  # fmt: skip
            else:
                step["tool"] = {"kind": "noop"}
            if w + 1 < width:
                step["next"] = f"call{w + 1}"
            steps.append(step)
        files[f"level{d}.yaml"] = _playbook(f"level{d}", {"depth": d}, steps)
    return files


def _playbook(name: str, workload: dict[str, object], steps: list[dict[str, object]]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "noetl.io/v2",
            "kind": "Playbook",
            "metadata": {"name": name, "path": f"bench/{name}"},
            "workload": workload,
            "workflow": steps,
        },
        sort_keys=False,
        width=1000,
    )


# ---------------------------------------------------------------- the NoETL CLI's dialect
# The NoETL CLI's local runner (PyPI `noetl`) runs shell steps, substitutes `{{ name }}`
# textually, compares with ==/!= only, and ignores `loop:`; these are the same workflows in
# the subset it runs.


def noetl_chain(n: int) -> str:
    steps: list[dict[str, object]] = []
    for i in range(n):
        step: dict[str, object] = {
            "step": "start" if i == 0 else f"s{i}",
            "tool": {"kind": "shell", "cmds": ["true"]},
        }
        if i + 1 < n:
            step["next"] = {"arcs": [{"step": f"s{i + 1}"}]}
        steps.append(step)
    return _playbook(f"noetl_chain_{n}", {}, steps)


def noetl_decisions(n: int) -> str:
    return _playbook(
        f"noetl_decisions_{n}",
        {"n": n},
        [
            {"step": "start", "tool": {"kind": "shell", "cmds": ["echo 0"]}, "vars": {"i": "0"},
             "next": {"arcs": [{"step": "decide"}]}},
            {"step": "decide", "tool": {"kind": "shell", "cmds": ["echo $(( {{ vars.i }} + 1 ))"]},
             "vars": {"i": "{{ decide.result }}"},
             "next": {"spec": {"mode": "exclusive"},
                      "arcs": [{"step": "decide", "when": "{{ vars.i }} != {{ workload.n }}"},
                               {"step": "finish"}]}},
            {"step": "finish", "tool": {"kind": "shell", "cmds": ["true"]}},
        ],
    )  # fmt: skip
