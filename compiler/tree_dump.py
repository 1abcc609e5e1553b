"""A deterministic, readable text dump of the canonical tree (golden tests, `--dump-after`)."""

from __future__ import annotations

import json

from noetlc.compiler import tree
from noetlc.compiler.ynodes import YMap, YNode


def dump_tree(playbook: tree.Playbook) -> str:
    out: list[str] = []
    meta = playbook.metadata
    out.append(f"playbook {meta.name}")
    if meta.path:
        out.append(f"  path {meta.path}")
    if meta.version:
        out.append(f"  version {meta.version}")
    out.append(f"  entry {playbook.entry}")
    if playbook.workload.items:
        out.append(f"  workload {_data(playbook.workload)}")
    if playbook.executor_spec is not None:
        out.append(f"  executor.spec {_data(playbook.executor_spec)}")
    for key in playbook.keychain:
        out.append(f"  keychain {key.name} kind={key.kind} {_data(key.fields)}")
    for task in playbook.workbook:
        out.extend(_task(task, "  workbook "))
    for step in playbook.workflow:
        out.extend(_step(step))
    return "\n".join(out) + "\n"


def _step(step: tree.Step) -> list[str]:
    lines = [f"step {step.name}"]
    if step.admit is not None:
        lines.append("  admit")
        for rule in step.admit.rules:
            cond = f"when {_guard(rule.when)}" if rule.when else "else"
            lines.append(f"    {cond} -> {'allow' if rule.allow else 'deny'}")
    if step.loop is not None:
        loop = step.loop
        lines.append(
            f"  loop {loop.iterator} in {_data(loop.items)} mode={loop.mode} "
            f"max_in_flight={loop.max_in_flight} failure={loop.failure_mode}"
        )
    if step.join:
        lines.append(f"  join {step.join}")
    if step.listener is not None:
        lines.append(f"  listener timeout={step.listener.timeout}")
    if step.spec is not None:
        lines.append(f"  spec {_data(step.spec)}")
    for task in step.tasks:
        lines.extend(_task(task, "  task "))
    if step.set_ctx is not None:
        lines.append(f"  on done set_ctx {_data(step.set_ctx)}")
    if step.next is None:
        lines.append("  final")
    else:
        lines.append(f"  next {step.next.mode}")
        for arc in step.next.arcs:
            parts = [f"    -> {arc.step}"]
            if arc.when is not None:
                parts.append(f"when {_guard(arc.when)}")
            if arc.args is not None:
                parts.append(f"args {_data(arc.args)}")
            if arc.set_ctx is not None:
                parts.append(f"set_ctx {_data(arc.set_ctx)}")
            lines.append(" ".join(parts))
    return lines


def _task(task: tree.Task, prefix: str) -> list[str]:
    lines = [f"{prefix}{task.name} kind={task.kind}"]
    indent = " " * (len(prefix) - len(prefix.lstrip()) + 2)
    if task.args.items:
        lines.append(f"{indent}args {_data(task.args)}")
    if task.spec is not None:
        lines.append(f"{indent}spec {_data(task.spec)}")
    if task.set_ctx is not None:
        lines.append(f"{indent}on ok set_ctx {_data(task.set_ctx)}")
    if task.set_iter is not None:
        lines.append(f"{indent}on ok set_iter {_data(task.set_iter)}")
    if task.policy is not None:
        lines.append(f"{indent}policy on_unmatched={task.policy.on_unmatched}")
        for rule in task.policy.rules:
            cond = f"when {_guard(rule.when)}" if rule.when else "else"
            lines.append(f"{indent}  {cond} -> {_action(rule.action)}")
    return lines


def _action(action: tree.Action) -> str:
    parts: list[str] = [action.do]
    if action.to:
        parts.append(f"to={action.to}")
    if action.do == "retry":
        parts.append(f"attempts={action.attempts} backoff={action.backoff} delay={action.delay}")
        if action.max_delay is not None:
            parts.append(f"max_delay={action.max_delay}")
        if action.jitter:
            parts.append(f"jitter={action.jitter}")
    if action.set_iter is not None:
        parts.append(f"set_iter {_data(action.set_iter)}")
    if action.set_ctx is not None:
        parts.append(f"set_ctx {_data(action.set_ctx)}")
    return " ".join(parts)


def _guard(guard: tree.Guard) -> str:
    return json.dumps(guard.source)


def _data(node: YNode | YMap) -> str:
    return json.dumps(node.to_python(), ensure_ascii=False, default=str)
