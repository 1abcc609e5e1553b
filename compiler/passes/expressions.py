"""Pass `expressions`: compile every guard and templated value of the tree into one pool.

Guards: admission rules, task policy rules, arcs. Templated values: tool arguments (except a
python task's `code`, which is code, not a template: a constant with its first line's position), `set_iter`/`set_ctx` values, arc `args`
and `set`, step-level `set`, loop `in`. Each gets a pool index recorded under its tree path
(`pool.by_path`), which the net builder uses. Problems are reported at the scalar's position:
NOE301 syntax, NOE302 sandbox violations, NOE303 (note) slow path, NOE304 text conditions,
NOE305 names nothing in the playbook defines.
"""

from __future__ import annotations

import json

from noetlc.compiler import tree
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq, walk_scalars
from noetlc.diagnostics.report import Span
from noetlc.expr.compile import (
    CompiledExpression,
    ExpressionPool,
    ExpressionSyntaxError,
    ExpressionUnsafe,
    Mode,
    compile_expression,
)
from noetlc.expr.namespaces import ROOT_NAMESPACES, RUNTIME_NAMES

Path = tuple[str | int, ...]
NOT_TEMPLATES = {("python", "code")}


def run(unit: CompilationUnit) -> None:
    playbook = unit.playbook
    if playbook is None:
        return
    compiler = _PoolBuilder(unit)
    for task in playbook.workbook:
        compiler.task(task, ("workbook", task.name))
    for step in playbook.workflow:
        base: Path = ("workflow", step.name)
        if step.admit is not None:
            for i, rule in enumerate(step.admit.rules):
                compiler.guard(rule.when, (*base, "admit", i))
                if rule.set_ctx is not None:
                    compiler.value(rule.set_ctx, (*base, "admit", i, "set_ctx"))
        if step.loop is not None:
            compiler.loop_items(step.loop.items, (*base, "loop"))
            compiler.guard(step.loop.stop_when, (*base, "loop", "stop_when"))
            if step.loop.max_in_flight_from is not None:
                compiler.value(step.loop.max_in_flight_from, (*base, "loop", "max_in_flight"))
        for task in step.tasks:
            compiler.task(task, (*base, "tasks", task.name))
        if step.set_ctx is not None:
            compiler.value(step.set_ctx, (*base, "set_ctx"))
        if step.next is not None:
            for i, arc in enumerate(step.next.arcs):
                compiler.guard(arc.when, (*base, "next", i, "when"))
                if arc.args is not None:
                    compiler.value(arc.args, (*base, "next", i, "args"))
                if arc.set_ctx is not None:
                    compiler.value(arc.set_ctx, (*base, "next", i, "set_ctx"))
    unit.pool = compiler.pool


# NoETL's loop variables that start with `_` (refused by the sandbox) and what to write instead
_NOETL_LOOP_NAMES = {
    "`_index`": "NoETL's `iter._index` is `iter.index` (or `loop_index`) here; it is read in "
    "a loop step's own templates only",
    "`_first`": "NoETL's `iter._first` is `iter.index == 0` here",
    "`_last`": "NoETL's `iter._last` is known here when the loop's `in:` is a list or a template "
    "over `workload` or step results; else write `iter.index == (<the loop's list> | length) - 1`",
    # what NoETL's engine adds to the result of a step whose `case` rules `collect` pages
    # (noetl/core/dsl/engine/executor/events.py): noetlc keeps the pages in ctx instead
    "`_all_collected_items`": "NoETL's `_all_collected_items` of a `case` pagination is "
    "`ctx.<into>` here (the `into:` of its `collect`; with `strategy: extend`, the items "
    "themselves, else one entry per page)",
    "`_pagination`": "NoETL's `_pagination` of a `case` pagination: its `all_items` is "
    "`ctx.<into>` here (the `into:` of its `collect`), `pages_collected` is "
    "`ctx.<into> | length` (with the default `strategy: append`)",
}


def defined_names(playbook: tree.Playbook) -> frozenset[str]:
    """Every bare name some scope can define: namespaces, steps, tasks, iterators, and the
    keys of workload, set_ctx / set_iter writes and arc arguments."""
    names: set[str] = set(ROOT_NAMESPACES) | RUNTIME_NAMES | set(playbook.workload.keys())

    def keys(node: YMap | None) -> None:
        if node is not None:
            names.update(node.keys())

    def task(t: tree.Task) -> None:
        names.add(t.name)
        keys(t.set_ctx)
        keys(t.set_iter)
        for rule in t.policy.rules if t.policy is not None else ():
            keys(rule.action.set_ctx)
            keys(rule.action.set_iter)

    for t in playbook.workbook:
        task(t)
    for step in playbook.workflow:
        names.add(step.name)
        keys(step.set_ctx)
        if step.loop is not None:
            names.update((step.loop.iterator, "loop_index"))  # NoETL's iteration number
        for t in step.tasks:
            task(t)
        for arc in step.next.arcs if step.next is not None else ():
            keys(arc.args)
            keys(arc.set_ctx)
    return frozenset(names)


class _PoolBuilder:
    def __init__(self, unit: CompilationUnit) -> None:
        self.unit = unit
        self._lines: list[str] | None = None  # the source's lines, split once (code spans)
        self.pool = ExpressionPool()
        assert unit.playbook is not None
        self.defined = defined_names(unit.playbook)

    def task(self, task: tree.Task, base: Path) -> None:
        if task.set_ctx is not None:
            self.value(task.set_ctx, (*base, "set_ctx"))
        if task.set_iter is not None:
            self.value(task.set_iter, (*base, "set_iter"))
        for key, value in task.args.items:
            if (task.kind, key.value) in NOT_TEMPLATES:
                self.code(value, (*base, "args", str(key.value)))
                continue
            self.value(value, (*base, "args", str(key.value)))
        if task.policy is not None:
            for i, rule in enumerate(task.policy.rules):
                self.guard(rule.when, (*base, "rules", i, "when"))
                if rule.action.set_iter is not None:
                    self.value(rule.action.set_iter, (*base, "rules", i, "set_iter"))
                if rule.action.set_ctx is not None:
                    self.value(rule.action.set_ctx, (*base, "rules", i, "set_ctx"))
                if rule.action.delay_template is not None:
                    self.value(rule.action.delay_template, (*base, "rules", i, "delay"))
                if rule.action.max_delay_template is not None:
                    self.value(rule.action.max_delay_template, (*base, "rules", i, "max_delay"))

    def code(self, node: YNode, path: Path) -> None:
        """A python task's code: a constant of the pool whose `where` is its first line's
        file position (a block scalar's first content line, not its `|`), so a run-time error
        at line N of the code is reported at the YAML line that raised. Never shared with
        another entry: two tasks with the same code are at different lines."""
        if not isinstance(node, YScalar) or not isinstance(node.value, str):
            return
        span = node.span
        if self._lines is None:
            self._lines = self.unit.source.splitlines()
        lines = self._lines
        if 0 < span.line <= len(lines):
            text = lines[span.line - 1]
            mark = text[span.column - 1 : span.column]
            if mark in ("|", ">"):  # a block: its content starts on a later line
                for number in range(span.line + 1, min(span.end_line, len(lines)) + 1):
                    body = lines[number - 1]
                    if body.strip():
                        indent = len(body) - len(body.lstrip(" "))
                        span = Span.point(span.file, number, indent + 1)
                        break
            elif node.value.count("\n") != span.end_line - span.line:
                return  # escaped newlines in a quoted scalar: no file line per code line
            elif mark in ("'", '"'):
                span = Span.point(span.file, span.line, span.column + 1)
        entry = CompiledExpression(
            node.value, "template", "const", value=node.value, normalized=node.value, span=span
        )
        self.pool.entries.append(entry)
        self.pool.by_path[path] = len(self.pool.entries) - 1

    def guard(self, guard: tree.Guard | None, path: Path) -> None:
        if guard is None:
            return
        compiled = self.compile(guard.source, "guard", guard.span)
        if compiled is None:
            return
        self.pool.add(compiled, path)
        if compiled.text_template:
            self.unit.reporter.report(
                "NOE304",
                "this condition mixes text and `{{ }}`: it renders to a string, which is true "
                "unless empty",
                guard.span,
                hint="put the whole comparison inside the braces: "
                "\"{{ workload.environment == 'production' }}\"",
            )

    def value(self, node: YNode, path: Path) -> None:
        if isinstance(node, YScalar):
            if isinstance(node.value, str) and ("{{" in node.value or "{%" in node.value):
                compiled = self.compile(node.value, "template", node.span)
                if compiled is not None:
                    self.pool.add(compiled, path)
            return
        if isinstance(node, YMap | YSeq):
            for sub, scalar in walk_scalars(node):
                self.value(scalar, (*path, *sub))

    def loop_items(self, node: YNode, path: Path) -> None:
        """The loop's items as one expression: a template as written, a YAML list as a list
        expression whose elements are its values (a `"{{ e }}"` element is `e`)."""
        if not isinstance(node, YSeq):
            self.value(node, path)
            return
        if not any(
            isinstance(scalar.value, str) and ("{{" in scalar.value or "{%" in scalar.value)
            for _, scalar in walk_scalars(node)
        ):  # a list of plain values: one constant of the pool
            constant = compile_expression(node.to_python(), mode="template", span=node.span)
            self.pool.add(constant, path)
            return
        parts: list[str] = []
        for item in node.items:
            text = item.value if isinstance(item, YScalar) else None
            if isinstance(text, str) and ("{{" in text or "{%" in text):
                body = text.strip()
                if not (body.startswith("{{") and body.endswith("}}") and body.count("{{") == 1):
                    self.unit.reporter.report(
                        "NOE204",
                        "an element of a loop's `in:` list mixes text and a template",
                        item.span,
                        hint="write the element as one template: `\"{{ 'a-' ~ x }}\"`",
                    )
                    return
                parts.append(f"({body[2:-2].strip()})")
            else:
                parts.append(json.dumps(item.to_python()))
        compiled = self.compile("{{ [" + ", ".join(parts) + "] }}", "template", node.span)
        if compiled is not None:
            self.pool.add(compiled, path)

    def compile(self, source: str, mode: Mode, span: Span) -> CompiledExpression | None:
        try:
            compiled = compile_expression(source, mode=mode, span=span)
        except ExpressionSyntaxError as exc:
            self.unit.reporter.report("NOE301", f"template syntax error: {exc}", span)
            return None
        except ExpressionUnsafe as exc:
            loop_name = next((n for n in _NOETL_LOOP_NAMES if n in str(exc)), "")
            hint = _NOETL_LOOP_NAMES.get(loop_name) or exc.hint
            self.unit.reporter.report("NOE302", f"sandbox violation: {exc}", span, hint=hint)
            return None
        if not compiled.fast:
            self.unit.reporter.report(
                "NOE303", f"expression on the slow path (jinja2): {compiled.slow_reason}", span
            )
        for name in compiled.names:
            if name not in self.defined and name not in compiled.optional_names:
                self.undefined_name(name, span)
        return compiled

    def undefined_name(self, name: str, span: Span) -> None:
        if name in ("task", "step"):
            self.unit.reporter.report(
                "NOE306",
                f"`{name}` names no step or task: results are read by the producer's name",
                span,
                hint="write the name of the step or task whose result you mean: "
                "`{{ fetch }}`, `{{ fetch.data }}`",
            )
            return
        import difflib  # only for a hint: not imported by valid input

        close = difflib.get_close_matches(name, sorted(self.defined), n=1, cutoff=0.75)
        hint = f"did you mean `{close[0]}`?" if close else None
        self.unit.reporter.report(
            "NOE305",
            f"`{name}` is not defined by this playbook (no step, task, loop iterator, "
            "workload key, set_ctx/set_iter key or arc argument has that name)",
            span,
            hint=hint,
        )
