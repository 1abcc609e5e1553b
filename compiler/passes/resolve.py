"""Pass `resolve`: every name in the canonical tree refers to something that exists.

Step names are unique and do not shadow a template namespace; the entry step and every arc
target exist; every `jump.to` names a task of the same pipeline; task names are unique within
a pipeline; tool kinds are known; `kind: workbook` tasks name a task of the root `workbook:`.
Unknown names get a "did you mean" hint.
"""

from __future__ import annotations

from noetlc.compiler import tree
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.ynodes import YScalar
from noetlc.diagnostics.report import Reporter, Span
from noetlc.expr.namespaces import is_reserved
from noetlc.stdlib_tools.kinds import kind_names, lookup, plugin_problems


def run(unit: CompilationUnit) -> None:
    playbook = unit.playbook
    if playbook is None:
        return
    reporter = unit.reporter
    steps = _check_steps(playbook, reporter)
    _check_entry(playbook, steps, reporter)
    workbook = {t.name: t for t in playbook.workbook}
    for task in playbook.workbook:
        _check_kind(task, reporter)
    for step in playbook.workflow:
        _check_pipeline(step.name, step.tasks, workbook, reporter)
        if step.next is not None:
            for arc in step.next.arcs:
                if arc.step not in steps:
                    reporter.report(
                        "NOE202",
                        f"step `{step.name}` routes to `{arc.step}`, which is not a step",
                        arc.target_span,
                        hint=_did_you_mean(arc.step, steps) or "add the step or fix the name",
                    )


def _check_steps(playbook: tree.Playbook, reporter: Reporter) -> dict[str, tree.Step]:
    seen: dict[str, tree.Step] = {}
    for step in playbook.workflow:
        if step.name in seen:
            first = seen[step.name]
            reporter.report(
                "NOE201",
                f"duplicate step name `{step.name}` (first defined at line {first.name_span.line})",
                step.name_span,
                related=[("first definition", first.name_span)],
            )
            continue
        seen[step.name] = step
        _check_reserved(step.name, "step", step.name_span, reporter)
    return seen


def _check_entry(playbook: tree.Playbook, steps: dict[str, tree.Step], reporter: Reporter) -> None:
    if steps and playbook.entry not in steps:
        span = playbook.executor_spec.span if playbook.executor_spec is not None else playbook.span
        reporter.report(
            "NOE202",
            f"the entry step `{playbook.entry}` is not a step",
            span,
            hint=_did_you_mean(playbook.entry, steps) or "name a step `start`",
        )
    final = playbook.executor_spec.get("final_step") if playbook.executor_spec else None
    if isinstance(final, YScalar) and isinstance(final.value, str) and final.value not in steps:
        reporter.report(
            "NOE202",
            f"the final step `{final.value}` is not a step",
            final.span,
            hint=_did_you_mean(final.value, steps),
        )


def _check_pipeline(
    step: str, tasks: tuple[tree.Task, ...], workbook: dict[str, tree.Task], reporter: Reporter
) -> None:
    names: dict[str, tree.Task] = {}
    for task in tasks:
        if task.name in names:
            reporter.report(
                "NOE211",
                f"duplicate task name `{task.name}` in step `{step}`",
                task.name_span,
                related=[("first definition", names[task.name].name_span)],
            )
        names.setdefault(task.name, task)
        if task.name_span != task.span:  # generated names (`task_0`, `<step>_task`) are ours
            _check_reserved(task.name, "task", task.name_span, reporter)
        _check_kind(task, reporter)
        if task.kind == "workbook":
            ref = task.args.get("name") or task.args.get("task")
            target = ref.value if isinstance(ref, YScalar) else None
            if not isinstance(target, str):
                reporter.report(
                    "NOE207",
                    f"workbook task `{task.name}` does not say which workbook task to run",
                    task.span,
                    hint="add `name: <a task of the root workbook:>`",
                )
            elif target not in workbook:
                reporter.report(
                    "NOE207",
                    f"`{target}` is not a task of the playbook's `workbook:`",
                    ref.span if ref is not None else task.span,
                    hint=_did_you_mean(target, workbook) or "define it under the root `workbook:`",
                )
    for task in tasks:
        if task.policy is None:
            continue
        for rule in task.policy.rules:
            action = rule.action
            if action.do == "jump" and not action.to:
                reporter.report(
                    "NOE203", "`do: jump` needs `to:` (a task of the same pipeline)", action.span
                )
            elif action.to and action.do == "jump" and action.to not in names:
                reporter.report(
                    "NOE203",
                    f"jump target `{action.to}` is not a task of step `{step}`",
                    action.to_span,
                    hint=_did_you_mean(action.to, names)
                    or f"tasks of `{step}`: {', '.join(names) or 'none'}",
                )


def _check_kind(task: tree.Task, reporter: Reporter) -> None:
    record = lookup(task.kind)
    if record is None:
        names = kind_names()
        broken = plugin_problems()
        hint = _did_you_mean(task.kind, names) or f"known kinds: {', '.join(names)}"
        if broken:
            hint += "; plugins that failed to load: " + "; ".join(broken)
        reporter.report("NOE205", f"unknown tool kind `{task.kind}`", task.kind_span, hint=hint)
    elif record.plugin is not None:
        reporter.report(
            "NOE607",
            f"tool kind `{task.kind}` is not installed: task `{task.name}` fails when it runs",
            task.kind_span,
            hint=f"install {record.plugin}",
        )


def _check_reserved(name: str, what: str, span: Span, reporter: Reporter) -> None:
    if is_reserved(name):
        reporter.report(
            "NOE208",
            f"{what} name `{name}` shadows a template namespace",
            span,
            hint=f"rename it: `{{{{ {name} }}}}` must keep meaning the namespace",
        )


def _did_you_mean(name: str, options: object) -> str | None:
    candidates = [str(o) for o in options]  # type: ignore[attr-defined]
    import difflib  # only for a hint: not imported by valid input

    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None
