"""Synthetic playbooks for benchmarks: chains, wide inclusive fan-outs with joins, loops."""

from __future__ import annotations

from typing import Any

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
    """`n` noop steps in a row, unguarded: the 100-step chain of the reference workflows."""
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


def structured(
    n: int, seed: int = 0, defect: str | None = None, width: int = 3, max_depth: int = 6
) -> str:
    """A random structured workflow of about `n` steps: sequences, exclusive blocks (guarded
    split, merge), inclusive blocks (fork, inferred AND-join) and loops (guarded back arc, then
    the exit). Sound by construction; `defect` breaks it in a known way, for the linter's tests:

    * `deadlock` — one exclusive block's merge becomes `spec.join: all` (NOE504);
    * `no_exit` — one loop's back arc loses its guard and the exit arc (NOE505);
    * `loop_done` — one plain step routes on `loop.done` (NOE502).

    Nesting stops at `max_depth`, which caps the size (about 350 steps at the default 6, which
    the linter's tests are written against); benchmarks pass a deeper limit to reach `n`.
    """
    import random

    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    names = iter(f"s{i}" for i in range(1, 10 * n + 100))
    marks: dict[str, list[dict[str, Any]]] = {
        "xor_merge": [],
        "xor_split": [],
        "loop_end": [],
        "plain": [],
    }

    def new_step(prefix: str = "") -> dict[str, Any]:
        step: dict[str, Any] = {"step": f"{prefix}{next(names)}", "tool": {"kind": "noop"}}
        steps.append(step)
        return step

    def link(source: dict[str, Any], target: str, when: str | None = None) -> None:
        arcs = source.setdefault("next", {"arcs": []})["arcs"]
        arcs.append({"step": target, **({"when": when} if when else {})})

    def block(
        budget: int, depth: int, in_fork: bool = False
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(entry step, exit steps still without their onward arc)."""
        if budget <= 1 or depth > max_depth:
            step = new_step()
            if not in_fork:  # a new arc inside a fork would change the joins inferred
                marks["plain"].append(step)
            return step, [step]
        # No loops between a fork and its join: a guarded back arc there sends dead tokens
        # to the join (the net's dead-path elimination), which NOE504/NOE506 report.
        kinds = ("seq", "seq", "xor", "and") if in_fork else ("seq", "seq", "xor", "and", "loop")
        kind = rng.choice(kinds)
        if kind == "seq":
            first, exits = block(budget // 2, depth + 1, in_fork)
            second, tail = block(budget - budget // 2, depth + 1, in_fork)
            for e in exits:
                link(e, second["step"])
            return first, tail
        if kind in ("xor", "and"):
            k = rng.randint(2, max(2, min(width, budget - 2)))
            split = new_step("x" if kind == "xor" else "f")
            if kind == "and":
                split["next"] = {"spec": {"mode": "inclusive"}, "arcs": []}
            inner = in_fork or kind == "and"
            bodies = [block(max(1, (budget - 2) // k), depth + 1, inner) for _ in range(k)]
            if kind == "and":
                # a branch starts with a plain step: a loop head right after the fork would be
                # inferred as an AND-join of the fork (and deadlock, as NOE504 reports)
                heads = []
                for entry, exits in bodies:
                    head = new_step()
                    link(head, entry["step"])
                    heads.append((head, exits))
                bodies = heads
            merge = new_step("m" if kind == "xor" else "j")
            for b, (entry, exits) in enumerate(bodies):
                guard = f"{{{{ workload.choice == {b} }}}}" if kind == "xor" and b < k - 1 else None
                link(split, entry["step"], guard)
                for e in exits:
                    link(e, merge["step"])
            if kind == "xor":
                marks["xor_merge"].append(merge)
                marks["xor_split"].append(split)
            return split, [merge]
        entry, exits = block(budget - 1, depth + 1, in_fork)
        end = new_step("l")
        for e in exits:
            link(e, end["step"])
        # back arc first (the exit is added later), bounded by a ctx counter: a guard on the
        # workload alone would take the same decision every turn (a loop that never ends)
        turns = f"ctx.{end['step']}_turns"
        link(end, entry["step"], f"{{{{ ({turns} or 0) < 2 }}}}")
        end["next"]["arcs"][-1]["set"] = {turns: f"{{{{ ({turns} or 0) + 1 }}}}"}
        marks["loop_end"].append(end)
        return entry, [end]

    start = {"step": "start", "tool": {"kind": "noop"}}
    steps.append(start)
    body, exits = block(max(1, n - 2), 0)
    link(start, body["step"])
    final = new_step("end")
    for e in exits:
        link(e, final["step"])
    if defect == "deadlock" and marks["xor_merge"]:
        # an AND-join behind an exclusive split whose first arc always fires: the other arcs
        # can never fire and never reach the join, dead or alive (the control VM deadlocks)
        i = rng.randrange(len(marks["xor_merge"]))
        marks["xor_merge"][i].setdefault("spec", {})["join"] = "all"
        marks["xor_split"][i]["next"]["arcs"][0].pop("when", None)
    elif defect == "no_exit" and marks["loop_end"]:
        end = rng.choice(marks["loop_end"])
        end["next"]["arcs"] = [{"step": end["next"]["arcs"][0]["step"]}]  # back, always
    elif defect == "loop_done" and marks["plain"]:
        plain = rng.choice([s for s in marks["plain"] if "next" in s] or marks["plain"])
        link(plain, final["step"], "{{ event.name == 'loop.done' }}")
    doc = yaml.safe_dump(
        {
            "apiVersion": "noetl.io/v2",
            "kind": "Playbook",
            "metadata": {"name": f"structured_{n}_{seed}"},
            "workload": {"choice": 0, "again": False},
            "workflow": steps,
        },
        sort_keys=False,
    )
    return doc


def wide_fanout(width: int, depth: int = 2) -> str:
    """One inclusive fork into `width` chains of `depth` steps and one AND-join: 2^width
    interleavings for a plain reachability graph."""
    steps: list[dict[str, object]] = [
        {
            "step": "start",
            "tool": {"kind": "noop"},
            "next": {"spec": {"mode": "inclusive"}, "arcs": [{"step": f"b{w}_0"} for w in range(width)]},
        }
    ]  # fmt: skip
    for w in range(width):
        for d in range(depth):
            target = f"b{w}_{d + 1}" if d + 1 < depth else "join"
            steps.append(
                {
                    "step": f"b{w}_{d}",
                    "tool": {"kind": "noop"},
                    "next": {"arcs": [{"step": target}]},
                }
            )
    steps.append({"step": "join", "tool": {"kind": "noop"}})
    return _doc(f"wide_fanout_{width}x{depth}", steps)


# ------------------------------------------- both servers' dialect (the side-by-side bench)
# Accepted as they are by NoETL's own server and worker and by `noetl-vm serve`: routing by
# `next: {arcs: [...]}` only, one tool per step, loops over `workload.items` reading
# `iter.<iterator>`, python code that sets `result`. The side-by-side bench waits until a playbook's last step
# (`last_step`) is among the completed steps.

PYTHON_CODE = "result = {'v': int(x) + 1}"


def _arcs_chain(name: str, n: int, tool: dict[str, object]) -> str:
    steps: list[dict[str, object]] = []
    for i in range(n):
        step: dict[str, object] = {"step": "start" if i == 0 else f"s{i}", "tool": dict(tool)}
        if i + 1 < n:
            step["next"] = {"arcs": [{"step": f"s{i + 1}"}]}
        steps.append(step)
    return _playbook(name, {"limit": 5}, steps)


def python_chain(n: int) -> str:
    """`n` python steps in a row, each reading the workload and returning a dict."""
    tool: dict[str, object] = {
        "kind": "python",
        "input": {"x": "{{ workload.limit }}"},
        "code": PYTHON_CODE,
    }
    return _arcs_chain(f"python_chain_{n}", n, tool)


def arcs_noop_chain(n: int) -> str:
    """`n` noop steps in a row (noop_chain with `next: {arcs}` instead of `next: NAME`)."""
    return _arcs_chain(f"arcs_noop_chain_{n}", n, {"kind": "noop"})


def python_loop(items: int, mode: str = "sequential", max_in_flight: int = 8) -> str:
    """One step looping over `items` workload items with one python task, then `end`."""
    spec: dict[str, object] = {"mode": mode}
    if mode == "parallel":
        spec["max_in_flight"] = max_in_flight
    loop = {"in": "{{ workload.items }}", "iterator": "item", "spec": spec}
    tool = {"kind": "python", "input": {"x": "{{ iter.item }}"}, "code": PYTHON_CODE}
    done = {"arcs": [{"step": "end", "when": "{{ event.name == 'loop.done' }}"}]}
    return _playbook(
        f"python_loop_{mode}_{items}",
        {"items": list(range(items))},
        [
            {"step": "start", "loop": loop, "tool": tool, "next": done},
            {"step": "end", "tool": {"kind": "noop"}},
        ],
    )


def last_step(text: str) -> str:
    """The name of a generated playbook's last step (where every run of it ends)."""
    doc = yaml.safe_load(text)
    name: str = doc["workflow"][-1]["step"]
    return name
