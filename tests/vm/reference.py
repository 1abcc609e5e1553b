"""A small reference interpreter of the routing semantics (docs/runtime.md) that walks the canonical tree directly.

It shares nothing with the VMs but the canonical tree and the join inference: templates go
through jinja2 itself (`ImmutableSandboxedEnvironment`, ChainableUndefined), tools through
`stdlib_tools.basic`, and the semantics are written out plainly from the design — a worklist
of tokens, admission rules, task policies, sequential loops, routing, AND-joins that count
arrivals (live or dead). The differential test runs both and compares the outcome. Parallel
loops run in input order here, so cases that compare must not depend on interleaving.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from jinja2 import ChainableUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from noetlc.compiler import tree
from noetlc.compiler.passes.net import infer_joins
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.expr.namespaces import BARE_NAME_ORDER
from noetlc.stdlib_tools.basic import call_tool

ENV = ImmutableSandboxedEnvironment(undefined=ChainableUndefined)
SINGLE = re.compile(r"^\s*\{\{(.*)\}\}\s*$", re.S)


def _flat(scope: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for ns in reversed(BARE_NAME_ORDER):
        if isinstance(scope.get(ns), dict):
            flat.update(scope[ns])
    flat.update(scope)
    return flat


def render(node: YNode | None, scope: dict[str, Any]) -> Any:
    if node is None:
        return None
    if isinstance(node, YMap):
        return {k.value if hasattr(k, "value") else k: render(v, scope) for k, v in node.items}
    if isinstance(node, YSeq):
        return [render(v, scope) for v in node]
    assert isinstance(node, YScalar)
    value = node.value
    if not isinstance(value, str) or "{{" not in value:
        return value
    single = SINGLE.match(value)
    if single and "{{" not in single.group(1):
        result = ENV.compile_expression(single.group(1), undefined_to_none=False)(**_flat(scope))
        return None if isinstance(result, ChainableUndefined) else result
    return ENV.from_string(value).render(**_flat(scope))


def truth(guard: tree.Guard, scope: dict[str, Any]) -> bool:
    text = guard.source.strip()
    single = SINGLE.match(text)
    expr = single.group(1) if single else text
    return bool(ENV.compile_expression(expr, undefined_to_none=False)(**_flat(scope)))


class Reference:
    def __init__(self, playbook: tree.Playbook, workload: dict[str, Any]) -> None:
        self.pb = playbook
        self.steps = {s.name: s for s in playbook.workflow}
        self.workload = {**playbook.workload.to_python(), **workload}
        self.ctx: dict[str, Any] = {}
        self.results: dict[str, Any] = {}
        self.record: dict[str, dict[str, Any]] = {}
        self.joins = {j.step: j for j in infer_joins(playbook).values() if j.kind == "all"}
        self.arrived: dict[str, list[tuple[str, dict[str, Any] | None]]] = {}
        self.status = "running"
        self.error: str | None = None
        self.alternatives = self.forward_predecessors()
        self.dead_seen: dict[str, int] = {}

    def forward_predecessors(self) -> dict[str, int]:
        """How many distinct steps lead to each step, not counting the back edges of cycles."""
        preds: dict[str, set[str]] = {name: set() for name in self.steps}
        self.back: set[tuple[str, str]] = set()
        on_path: set[str] = set()
        done: set[str] = set()

        def visit(name: str) -> None:
            on_path.add(name)
            step = self.steps[name]
            for arc in step.next.arcs if step.next else ():
                if arc.step in on_path:
                    self.back.add((name, arc.step))
                    continue
                preds[arc.step].add(name)
                if arc.step not in done:
                    visit(arc.step)
            on_path.discard(name)
            done.add(name)

        visit(self.pb.entry)
        return {name: len(p) for name, p in preds.items()}

    def scope(self, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            **self.results,
            "workload": self.workload,
            "ctx": self.ctx,
            "args": args,
            "iter": {},
            **extra,
        }

    # ---------------------------------------------------------------- the token game

    def run(self) -> dict[str, Any]:
        work: deque[tuple[str, str | None, dict[str, Any] | None]] = deque(
            [(self.pb.entry, None, {})]
        )
        while work and self.status == "running":
            step, source, args = work.popleft()
            join = self.joins.get(step)
            if join is not None and source in join.branches:
                self.arrived.setdefault(step, []).append((source, args))
                arrived = self.arrived[step]
                if len({s for s, _ in arrived}) < len(join.branches):
                    continue
                del self.arrived[step]
                live = {s: a for s, a in arrived if a is not None}
                args = live if live else None
            if args is None:  # a dead token: the step does not run, its paths are dead
                if join is None and self.alternatives.get(step, 0) > 1:
                    seen = self.dead_seen.get(step, 0) + 1  # a merge dies with its last path
                    if seen < self.alternatives[step]:
                        self.dead_seen[step] = seen
                        continue
                    del self.dead_seen[step]
                work.extend(self.dead_from(step))
                continue
            self.dead_seen.pop(step, None)
            work.extend(self.run_step(self.steps[step], args))
        if self.status == "running":
            stuck = any(a is not None for arrived in self.arrived.values() for _, a in arrived)
            self.status = "failed" if stuck else "completed"
        return {"status": self.status, "steps": self.record, "ctx": self.ctx}

    def dead_from(self, step: str) -> list[tuple[str, str | None, dict[str, Any] | None]]:
        s = self.steps[step]
        return [
            (a.step, step, None)
            for a in (s.next.arcs if s.next else ())
            if self.on_join_path(a.step) and (step, a.step) not in self.back
        ]

    def on_join_path(self, step: str, seen: frozenset[str] = frozenset()) -> bool:
        if step in self.joins:
            return True
        if step in seen:
            return False
        s = self.steps[step]
        return any(
            self.on_join_path(a.step, seen | {step}) for a in (s.next.arcs if s.next else ())
        )

    def run_step(self, step: tree.Step, args: dict[str, Any]) -> list[Any]:
        rec = self.record.setdefault(step.name, {"runs": 0, "status": None, "result": None})
        if step.admit is not None:
            for rule in step.admit.rules:
                if rule.when is None or truth(rule.when, self.scope(args)):
                    if not rule.allow:
                        rec["status"] = "skipped"
                        return self.dead_from(step.name)
                    break
        rec["runs"] += 1
        if step.loop is None:
            ok, result = self.pipeline(step, args, {})
            event = "step.done" if ok else "step.failed"
        else:
            items = render(step.loop.items, self.scope(args)) or []
            collected: list[Any] = []
            ok, failed = True, 0
            for index, item in enumerate(items):
                it_ok, it_result = self.pipeline(
                    step, args, {step.loop.iterator: item, "index": index}
                )
                if not it_ok:
                    failed += 1
                    if step.loop.failure_mode == "fail_fast":
                        ok = False
                        break
                collected.append(it_result if it_ok else None)
            total = len(collected)
            stats = {"total": total, "success": total - failed, "failed": failed}
            result = {"results": collected, "stats": stats} if ok else None
            event = "loop.done" if ok else "step.failed"
        if ok:
            rec["status"], rec["result"] = "done", result
            self.results[step.name] = result
            data: dict[str, Any] = {"result": result}
        else:
            rec["status"] = "failed"
            data = {"error": result}
        return self.route(step, args, event, data)

    def route(
        self, step: tree.Step, args: dict[str, Any], event: str, data: dict[str, Any]
    ) -> list[Any]:
        out: list[Any] = []
        succeeded = event != "step.failed"
        scope = self.scope(args, event={"name": event, "step": step.name, "data": data})
        fired = stopped = False  # stopped: a stopping arc fired (exclusive: any arc)
        exclusive = step.next is not None and step.next.mode == "exclusive"
        for arc in step.next.arcs if step.next else ():
            if arc.when is None:
                take = succeeded
            elif "event" in arc.when.source:
                take = truth(arc.when, scope)
            else:
                take = succeeded and truth(arc.when, scope)
            if take and not stopped:
                fired = True
                stopped = exclusive or arc.stop
                if arc.set_ctx is not None:
                    self.write_ctx(render(arc.set_ctx, scope))
                new_args = render(arc.args, scope) if arc.args is not None else args
                out.append((arc.step, step.name, new_args or {}))
            elif (
                (succeeded or fired)
                and self.on_join_path(arc.step)
                and (step.name, arc.step) not in self.back  # never around a cycle
            ):
                out.append((arc.step, step.name, None))
        if any(o[2] is not None and (step.name, o[0]) in self.back for o in out):
            out = [o for o in out if o[2] is not None]  # staying in a cycle: nothing is dead
        if not succeeded and not fired:
            self.status, self.error = "failed", f"{step.name} failed unhandled"
        if not succeeded and fired:  # failed and handled: its success paths are dead
            out.extend(d for d in self.dead_from(step.name) if d[0] not in {o[0] for o in out})
        return out

    def write_ctx(self, writes: dict[str, Any] | None) -> None:
        for key, value in (writes or {}).items():
            if isinstance(value, dict) and list(value) == ["append"]:
                self.ctx[key] = [*(self.ctx.get(key) or []), value["append"]]
            else:
                self.ctx[key] = value

    # ---------------------------------------------------------------- a pipeline

    def pipeline(
        self, step: tree.Step, args: dict[str, Any], iteration: dict[str, Any]
    ) -> tuple[bool, Any]:
        names = [t.name for t in step.tasks]
        local: dict[str, Any] = {}
        it = dict(iteration)
        pc, attempts, last = 0, dict.fromkeys(names, 0), None
        while pc < len(step.tasks):
            task = step.tasks[pc]
            attempts[task.name] += 1
            scope = {
                **self.scope(args),
                **local,
                "iter": it,
                "_attempt": attempts[task.name],
                "_task": task.name,
            }
            try:
                targs = render(task.args, scope) or {}
                outcome = (
                    call_tool(task.kind, targs, None)
                    if task.kind != "noop"
                    else {"status": "ok", "result": targs.get("input"), "error": None, "meta": {}}
                )
            except Exception as exc:  # a template error is the task's error
                outcome = {
                    "status": "error",
                    "result": None,
                    "error": {"message": str(exc)},
                    "meta": {},
                }
            scope.update(outcome=outcome, output={**outcome, "data": outcome.get("result")})
            if outcome["status"] == "ok":
                last = outcome.get("result")
                local[task.name] = last
                local["_prev"] = last
                scope[task.name] = last
                if task.set_iter is not None:
                    it.update(render(task.set_iter, scope) or {})
                if task.set_ctx is not None:
                    self.write_ctx(render(task.set_ctx, scope))
            rule = next(
                (
                    r
                    for r in (task.policy.rules if task.policy else ())
                    if r.when is None or truth(r.when, scope)
                ),
                None,
            )
            if rule is None:
                if outcome["status"] != "ok" and not (
                    task.policy and task.policy.on_unmatched == "continue"
                ):
                    return False, outcome.get("error")
                pc += 1
                continue
            action = rule.action
            if action.set_iter is not None:
                it.update(render(action.set_iter, scope) or {})
            if action.set_ctx is not None:
                self.write_ctx(render(action.set_ctx, scope))
            if action.do == "continue":
                pc += 1
            elif action.do == "retry":
                if attempts[task.name] >= (action.attempts or 1):
                    if outcome["status"] != "ok":
                        return False, outcome.get("error")
                    pc += 1
            elif action.do == "jump":
                pc = names.index(action.to or "")
                attempts[action.to or ""] = 0
            elif action.do == "break":
                return True, last
            else:
                return False, outcome.get("error") or {"message": "policy fail"}
        return True, last
