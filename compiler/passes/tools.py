"""Pass `tools`: every task's arguments fit its tool kind's schema (`stdlib_tools/schemas.py`).

Workflow tasks and root `workbook:` tasks are validated statically: a template string is
accepted wherever a value is expected (its type is only known at run time), so errors on a
value that is — or lies inside — a template are dropped. Reported: unknown arguments (NOE601,
a warning with "did you mean": NoETL's tool models accept extra keys, and the runtime leaves them
out as NoETL's executors ignore them), missing required ones (NOE602, at the task's `kind:`), values of the wrong
literal type or choice (NOE603), SQL text with templates spliced in (NOE604, a warning: values
belong in `params:`, never SQL built from data), two spellings of one argument or arguments that exclude each
other (NOE605), a step's result storage choices (NOE609, a note), templates inside python `code` (NOE608, a warning: they are rendered into the
code's text, as NoETL does), and — in a playbook that declares its `keychain:` — credentials it does not
declare (NOE606, a warning), and a playbook task with noetlc's `wait: true` (NOE610, a warning:
NoETL ignores it and does not wait for the child). Which arguments hold SQL and which name keychain entries comes
from each kind's record (`stdlib_tools/kinds.py`). Unknown kinds were reported by `resolve` and
are skipped here, and so are kinds known by name only (their plugin is not installed; `resolve`
notes it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from noetlc.compiler import tree
from noetlc.compiler.passes.schema import EXPECTED_NOUN
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.ynodes import YMap, YScalar, YSeq, node_at
from noetlc.diagnostics.report import Reporter, Span
from noetlc.stdlib_tools.kinds import ToolKind, argument_names, lookup

if TYPE_CHECKING:
    from pydantic import ValidationError

Path = tuple[str | int, ...]

_SHOWN_TYPE = {
    str: "a string", int: "an integer", float: "a number", bool: "a boolean",
    dict: "a mapping", list: "a list", type(None): "null",
}  # fmt: skip


def run(unit: CompilationUnit) -> None:
    playbook = unit.playbook
    if playbook is None:
        return
    declared = [entry.name for entry in playbook.keychain]
    tasks = [*playbook.workbook, *(t for step in playbook.workflow for t in step.tasks)]
    unused = _unused_workbook_entries(playbook.workbook, tasks)
    for task in tasks:
        reporter = _Unused(unit.reporter, task.name) if task in unused else unit.reporter
        check_task(task, reporter)  # type: ignore[arg-type]
        if declared:
            _check_keychain_names(task, declared, unit.reporter)
    _note_result_storage(unit)


def _unused_workbook_entries(
    workbook: Sequence[tree.Task], tasks: Sequence[tree.Task]
) -> list[tree.Task]:
    """Workbook entries no `kind: workbook` task names. NoETL checks a workbook entry's tool
    kind when it loads the playbook (`WorkbookTask` in noetl/core/dsl/engine/models/executor.py)
    and its arguments only when a step runs it (noetl/core/workflow/workbook/executor.py): an
    entry nothing runs cannot fail, so its argument errors are warnings here. A reference whose
    name is a template could name any entry: then every entry counts as used."""
    named: set[str] = set()
    for task in tasks:
        if task.kind != "workbook":
            continue
        for key in ("task", "name"):
            ref = task.args.get(key)
            if isinstance(ref, YScalar) and isinstance(ref.value, str):
                if _is_template(ref.value):
                    return []
                named.add(ref.value)
                break
    return [entry for entry in workbook if entry.name not in named]


class _Unused:
    """A reporter for an unused workbook entry: its errors become warnings that say why."""

    __slots__ = ("_name", "_reporter")

    def __init__(self, reporter: Reporter, name: str) -> None:
        self._reporter = reporter
        self._name = name

    def report(self, code: str, message: str, span: Span | None = None, **kw: Any) -> Any:
        from noetlc.diagnostics.codes import lookup as code_info
        from noetlc.diagnostics.severity import Severity

        if code_info(code).severity is Severity.ERROR:
            kw["severity"] = Severity.WARNING
            message += (
                f" (workbook entry `{self._name}` is not run by any step: NoETL checks its "
                "arguments only when it runs)"
            )
        return self._reporter.report(code, message, span, **kw)


def _note_result_storage(unit: CompilationUnit) -> None:
    """A step's `output:` (legacy `result:`) keeps its whole result, so `output_select` fields
    are readable; NoETL's per-step storage choices are not made here (NOE609, a note)."""
    workflow = unit.document.get("workflow") if unit.document is not None else None
    if not isinstance(workflow, YSeq):
        return
    for step in workflow:
        if not isinstance(step, YMap):
            continue
        for task in _task_nodes(step.get("tool")):
            for key in ("output", "output_select"):
                node = task.key_node(key)
                if node is not None:
                    unit.reporter.report(
                        "NOE609",
                        f"a task's `{key}` is NoETL's storage choice: here the task's whole "
                        "result is kept, and one over the payload limit is stored by reference",
                        node.span,
                    )
        for spelling in ("output", "result"):
            shaping = step.get(spelling)
            if not isinstance(shaping, YMap):
                continue
            for key in ("store", "inline_max_bytes"):
                node = shaping.key_node(key)
                if node is not None:
                    unit.reporter.report(
                        "NOE609",
                        f"`{spelling}.{key}` is NoETL's storage choice: here a result over the "
                        "payload limit is stored by reference in the execution's store",
                        node.span,
                    )


def _check_keychain_names(task: tree.Task, declared: list[str], reporter: Reporter) -> None:
    """A playbook that declares its keychain should name only declared entries: a typo would
    otherwise surface at run time as a missing credential (NOE812)."""
    refs: list[YScalar] = []
    record = lookup(task.kind)
    for key in record.credentials if record is not None else ():
        value = task.args.get(key)
        if isinstance(value, YScalar):
            refs.append(value)
        elif isinstance(value, YMap) and task.kind == "python":  # {alias: entry}
            refs.extend(v for _, v in value.items if isinstance(v, YScalar))
    for ref in refs:
        name = ref.value
        if not isinstance(name, str) or _is_template(name) or "://" in name or name in declared:
            continue
        import difflib  # only for a hint: not imported by valid input

        close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
        reporter.report(
            "NOE606",
            f"task `{task.name}` uses keychain entry `{name}`, which the playbook's "
            "`keychain:` does not declare",
            ref.span,
            hint=f"did you mean `{close[0]}`?"
            if close
            else f"declare it: `keychain: [{{name: {name}, kind: ...}}]`",
        )


def _task_nodes(tool: object) -> list[YMap]:
    """The task mappings of a step's `tool:` as written: one mapping, a list of mappings, or a
    list of `{label: mapping}` entries."""
    items = list(tool) if isinstance(tool, YSeq) else [tool]
    out: list[YMap] = []
    for item in items:
        if not isinstance(item, YMap):
            continue
        if "kind" not in item and len(item.items) == 1 and isinstance(item.items[0][1], YMap):
            out.append(item.items[0][1])
        else:
            out.append(item)
    return out


def check_task(task: tree.Task, reporter: Reporter) -> None:
    record = lookup(task.kind)
    if record is None or not record.available:
        return
    data = task.args.to_python()
    if record.sql:
        _warn_templated_sql(task, record, reporter)
    if task.kind == "python":
        _warn_templated_code(task, reporter)
        _check_python_syntax(task, reporter)
    wait = task.args.get("wait")
    if task.kind == "playbook" and isinstance(wait, YScalar) and wait.value is True:
        # noetlc's own argument: NoETL's worker waits only with `return_step`, and then gives
        # the child's status view (noetl/worker/nats_worker.py, `_execute_playbook`)
        reporter.report(
            "NOE610",
            "`wait: true` is noetlc's: NoETL ignores it and starts the child without waiting "
            "(with `return_step:` it waits and gives the child's status view); noetlc waits, "
            "gives the child's result, and a failed child fails this task",
            wait.span,
        )
    if record.args_fit(data):
        return  # valid for certain: neither pydantic nor the schema is imported
    from pydantic import ValidationError

    try:
        record.schema.model_validate(data)
    except ValidationError as exc:
        _report(exc, task, data, reporter)


def _check_python_syntax(task: tree.Task, reporter: Reporter) -> None:
    """A python task's literal `code:` must compile (NOE620 at the offending line); code that
    is a template is rendered at run time and checked then."""
    node = task.args.get("code")
    code = node.value if isinstance(node, YScalar) else None
    if not isinstance(code, str) or _is_template(code):
        return
    error = python_syntax_error(code)
    if error is None:
        return
    lineno, offset, message = error
    span = node.span  # type: ignore[union-attr]
    if "\n" in code.rstrip("\n") or span.end_line > span.line:
        # a block scalar: the text starts on the next line, indented (usually) two columns
        # further than its key
        key = task.args.key_node("code")
        indent = key.span.column + 2 if key is not None else span.column
        line, column = span.line + lineno, indent + (offset or 1) - 1
    else:
        line, column = span.line, span.column + (offset or 1)
    reporter.report(
        "NOE620",
        f"the code of python task `{task.name}` has a syntax error: {message}"
        f" (line {lineno} of the code)",
        Span.point(span.file, line, column),
        hint="the code runs as a Python module, or as a function body when it uses `return`",
    )


def python_syntax_error(code: str) -> tuple[int, int, str] | None:
    """(line, column, message) of the first syntax error of task code, or None. Code with a
    top-level `return` is a function body (as the python tool runs it)."""
    import ast

    try:
        ast.parse(code, "<python task>", "exec")
        return None
    except SyntaxError as exc:
        if "outside function" not in str(exc.msg):
            return exc.lineno or 1, exc.offset or 1, str(exc.msg)
    body = "".join(f"    {line}\n" for line in code.splitlines()) or "    pass\n"
    try:
        ast.parse(f"def __task_body__():\n{body}", "<python task>", "exec")
    except SyntaxError as exc:
        return max((exc.lineno or 2) - 1, 1), max((exc.offset or 5) - 4, 1), str(exc.msg)
    return None


def _warn_templated_sql(task: tree.Task, record: ToolKind, reporter: Reporter) -> None:
    for spelling in record.sql:
        value = task.args.get(spelling)
        key = task.args.key_node(spelling)
        text = value.value if isinstance(value, YScalar) else None
        if _is_template(text) and not _single_expression(str(text)) and key is not None:
            reporter.report(
                "NOE604",
                f"the SQL of task `{task.name}` is built from a template",
                key.span,
            )
            return


def _warn_templated_code(task: tree.Task, reporter: Reporter) -> None:
    value = task.args.get("code")
    key = task.args.key_node("code")
    if isinstance(value, YScalar) and _is_template(value.value) and key is not None:
        reporter.report(
            "NOE608",
            f"the python code of task `{task.name}` contains templates: they are rendered into "
            "the code's text before it runs",
            key.span,
        )


def _report(exc: ValidationError, task: tree.Task, data: dict[str, Any], rep: Reporter) -> None:
    errors = exc.errors()
    paths = [
        _data_path(err["loc"], data, named=err["type"] in ("extra_forbidden", "missing"))
        for err in errors
    ]
    by_path: dict[Path, list[str]] = {}
    for err, path in zip(errors, paths):
        kind = err["type"]
        if kind == "missing" or kind == "missing_argument":
            field = str(err.get("ctx", {}).get("field") or err["loc"][-1])
            message = err["msg"] if kind == "missing_argument" else None
            rep.report(
                "NOE602",
                message or f"the {task.kind} tool needs `{field}:`",
                task.kind_span,
                hint=f"add `{field}:` to task `{task.name}`",
            )
        elif kind == "argument_conflict":
            _report_conflict(err["msg"], task, rep)
        elif kind == "extra_forbidden":
            _report_unknown(path, task, data, rep)
        elif not _under_template(data, path) and not _deeper_error(path, paths):
            by_path.setdefault(path, []).append(_expected(err))
    for path, nouns in by_path.items():
        value = _value_at(data, path)
        wanted = " or ".join(dict.fromkeys(nouns))
        rep.report(
            "NOE603",
            f"`{_show_path(path)}` of the {task.kind} tool must be {wanted}, "
            f"not {_describe(value)}",
            _span_of(task, path),
        )


def _report_unknown(path: Path, task: tree.Task, data: dict[str, Any], rep: Reporter) -> None:
    if len(path) == 1:
        name = str(path[0])
        same = _other_spellings(task.kind, name)
        given = [s for s in same if s in data]
        if given:
            rep.report(
                "NOE605",
                f"`{name}` and `{given[0]}` are two spellings of one argument of the "
                f"{task.kind} tool",
                _span_of(task, path),
                hint=f"keep one of them: {', '.join(f'`{s}`' for s in [given[0], name])}",
            )
            return
        record = lookup(task.kind)
        allowed = argument_names(record.schema) if record is not None else []
        import difflib  # only for a hint: not imported by valid input

        close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
        hint = (
            f"did you mean `{close[0]}`?"
            if close
            else f"the {task.kind} tool takes: {', '.join(allowed)}; remove `{name}` if it is "
            "not meant for it"
        )
        rep.report(
            "NOE601",
            f"unknown argument `{name}` for the {task.kind} tool of task `{task.name}`: "
            "ignored (the task runs without it, as on NoETL)",
            _span_of(task, path),
            hint=hint,
        )
        return
    rep.report(
        "NOE601",
        f"unknown key `{path[-1]}` in `{_show_path(path[:-1])}` of the {task.kind} tool of "
        f"task `{task.name}`: ignored (the task runs without it, as on NoETL)",
        _span_of(task, path),
        hint="see `docs/tools.md` for the keys this argument takes",
    )


def _report_conflict(message: str, task: tree.Task, rep: Reporter) -> None:
    names = [part.strip("` ,") for part in message.split("one of", 1)[-1].split(",")]
    present = [n for n in names if n in task.args]
    where = _span_of(task, (present[-1],)) if present else task.kind_span
    rep.report("NOE605", message, where, hint="keep only one of them")


def _other_spellings(kind: str, name: str) -> list[str]:
    record = lookup(kind)
    if record is None:
        return []
    for field, info in record.schema.model_fields.items():
        alias = info.validation_alias
        choices = [str(c) for c in getattr(alias, "choices", ())] or [info.alias or field]
        if name in choices:
            return [c for c in choices if c != name]
    return []


# --------------------------------------------------------------------------- locations


def _data_path(loc: tuple[Any, ...], data: Any, *, named: bool) -> Path:
    """pydantic's `loc` without its union tags (`('timeout', 'float')` -> `('timeout',)`);
    `named`: the last step is a key that is not in the data (unknown or missing)."""
    path: list[str | int] = []
    cursor: Any = data
    for i, step in enumerate(loc):
        found, child = _child(cursor, step)
        if found:
            path.append(step)
            cursor = child
        elif named and i == len(loc) - 1 and isinstance(cursor, dict):
            path.append(step)
    return tuple(path)


def _child(data: Any, step: Any) -> tuple[bool, Any]:
    if isinstance(data, dict) and isinstance(step, str) and step in data:
        return True, data[step]
    if isinstance(data, list) and isinstance(step, int) and 0 <= step < len(data):
        return True, data[step]
    return False, None


def _deeper_error(path: Path, paths: list[Path]) -> bool:
    """A union member went deeper than this type error: its errors are the useful ones."""
    return any(len(other) > len(path) and other[: len(path)] == path for other in paths)


def _value_at(data: Any, path: Path) -> Any:
    for step in path:
        found, data = _child(data, step)
        if not found:
            return None
    return data


def _under_template(data: Any, path: Path) -> bool:
    if _is_template(data):
        return True
    for step in path:
        found, data = _child(data, step)
        if not found:
            return False
        if _is_template(data):
            return True
    return False


def _single_expression(text: str) -> bool:
    """`"{{ workload.query }}"`: the whole SQL is one value, not text with data spliced in."""
    body = text.strip()
    return body.startswith("{{") and body.endswith("}}") and body.count("{{") == 1


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _span_of(task: tree.Task, path: Path) -> Span:
    """The offending key (or list item) of the arguments, else the task's `kind:`."""
    node, key = node_at(task.args, path)
    if key is not None and path and isinstance(path[-1], str):
        return key.span
    if node is not None and path and isinstance(path[-1], int) and node is not task.args:
        return node.span
    return task.kind_span


def _expected(err: Any) -> str:
    if err["type"] == "literal_error":
        return f"one of {err.get('ctx', {}).get('expected', '')}"
    return EXPECTED_NOUN.get(err["type"]) or str(err["msg"]).lower()


def _describe(value: Any) -> str:
    noun = _SHOWN_TYPE.get(type(value), type(value).__name__)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return f"{noun} ({value!r})" if len(repr(value)) <= 40 else noun
    return noun


def _show_path(path: Path) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out
