"""Cursor loops (`loop.cursor`) -> a parallel loop over worker slots whose tasks claim and
process rows until the cursor is drained, as NoETL's engine runs them.

NoETL (noetl/core/dsl/engine/models/workflow.py `CursorSpec`, `Loop`;
noetl/core/dsl/engine/executor/transitions.py `_issue_cursor_loop_commands`;
noetl/worker/cursor_worker.py `execute_cursor_worker`; noetl/core/cursor_drivers/postgres.py)
starts `spec.max_in_flight` worker slots. Each slot runs the claim statement (`cursor.claim`,
rendered once, on the credential `cursor.auth`), takes the rows it returns — at most
`spec.frame.max_rows` (default 1), which the claim may read as `__frame_max_rows` — and runs the
step's tasks once per row with `iter.<iterator>` bound to the row (`frame.process: frame`: once
per frame, `iter.<iterator>` the list of rows), then claims again, until a claim returns no
row or `cursor.options.max_iterations` rows (default 100 000) were taken. A row whose tasks
fail is counted and the slot goes on; a `break` stops the slot; a claim that fails fails the
slot. Each slot's result is `{status: ok|partial, processed, failed, breaks}` and the step's
result is the loop's `{results: [one per slot], stats}`.

The rewrite writes exactly that with canonical constructs: `loop.in` is the slot numbers,
`mode: parallel`, and the tasks become

    <step>__claim   (the claim statement, a task of the cursor's kind)
    <step>__row     (noop: takes the next row of the frame, else jumps back to the claim)
    ...the step's tasks...          (a failure jumps to <step>__failed)
    <step>__done    (noop: counts the row, jumps to <step>__row)
    <step>__failed  (noop: counts the failed row, jumps to <step>__row)
    <step>__drained (noop: the slot's result; the last task)

Only NoETL's postgres driver exists; another `cursor.kind` is refused (NOE212), and so is a
cursor without `kind`, `auth` or `claim`, or with a loop mode other than `cursor`, as NoETL's
models refuse them.
"""

from __future__ import annotations

import re
from typing import Any

from noetlc.compiler.desugar.common import add_policy_rules, map_step_list, node, step_name
from noetlc.compiler.shapes import task_slots
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter

DRIVERS = ("postgres",)
MAX_ITERATIONS = 100_000
# names NoETL's claim context has besides the engine's (cursor_worker.py, claim_context)
_FRAME_ROWS = re.compile(r"\b__frame_max_rows\b")


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        loop = step.get("loop")
        if not isinstance(loop, YMap) or "cursor" not in loop:
            return None
        return _rewrite(step, loop, reporter)

    return map_step_list(doc, fix)


def _text(value: YNode | None) -> str | None:
    return str(value.value) if isinstance(value, YScalar) and value.value is not None else None


def _rewrite(step: YMap, loop: YMap, reporter: Reporter) -> YMap | None:
    name = step_name(step)
    cursor = loop.get("cursor")
    where = loop.key_node("cursor")
    span = where.span if where is not None else loop.span
    if not isinstance(cursor, YMap):
        reporter.report(
            "NOE212",
            f"`loop.cursor` of step `{name}` must be a mapping `{{kind, auth, claim}}`",
            span,
            hint="write `cursor: {kind: postgres, auth: <credential>, claim: <SQL that claims "
            "rows and returns them>}`",
        )
        return None
    spec = loop.get("spec")
    spec = spec if isinstance(spec, YMap) else None
    mode = _text(spec.get("mode")) if spec is not None else None
    ok = True
    if "in" in loop:
        reporter.report(
            "NOE212",
            f"the loop of step `{name}` has both `in:` and `cursor:`",
            loop.key_node("in").span,  # type: ignore[union-attr]
            hint="a loop iterates over a collection (`in:`) or claims rows (`cursor:`): keep one",
        )
        ok = False
    if mode != "cursor":
        mode_node = spec.get("mode") if spec is not None else None
        reporter.report(
            "NOE212",
            f"a cursor loop needs `spec.mode: cursor` (step `{name}` has "
            f"{'no mode' if mode is None else f'mode `{mode}`'})",
            mode_node.span if mode_node is not None else span,
            hint="add `spec: {mode: cursor, max_in_flight: N}` to the loop",
        )
        ok = False
    for key in ("kind", "auth", "claim"):
        if _text(cursor.get(key)) is None:
            reporter.report(
                "NOE212",
                f"`loop.cursor` of step `{name}` needs `{key}:`",
                span,
                hint="write `cursor: {kind: postgres, auth: <credential>, claim: <SQL>}`",
            )
            ok = False
    kind = _text(cursor.get("kind"))
    if kind is not None and kind not in DRIVERS:
        reporter.report(
            "NOE212",
            f"no cursor driver for `{kind}`: NoETL's cursor loops claim rows from postgres",
            cursor.get("kind").span,  # type: ignore[union-attr]
            hint="use `kind: postgres`, or claim a batch in a task and loop over it with `in:`",
        )
        ok = False
    ok = _check_frame(name, spec, reporter) and ok
    iterator = _text(loop.get("iterator"))
    if iterator is None:
        reporter.report(
            "NOE204", "the loop has no `iterator:` (the name of the current item)", loop.span
        )
        ok = False
    tool = step.get("tool")
    if not ok or iterator is None or tool is None:
        return None
    return step.with_item("loop", _slots(loop, spec, span)).with_item(
        "tool", _tasks(name, iterator, cursor, spec, tool, span)
    )


def _slots(loop: YMap, spec: YMap | None, span: Any) -> YMap:
    """`in:` the slot numbers, `mode: parallel`, `max_in_flight` slots at a time."""
    width = spec.get("max_in_flight") if spec is not None else None
    items: str | list[int]
    if isinstance(width, YScalar) and isinstance(width.value, str) and "{{" in width.value:
        inner = width.value.strip().removeprefix("{{").removesuffix("}}").strip()
        items = "{{ range((" + inner + ") | int) | list }}"
    else:
        count = width.value if isinstance(width, YScalar) and isinstance(width.value, int) else 1
        items = list(range(max(1, count)))
    new_spec: list[tuple[YScalar, YNode]] = []
    for key, value in spec.items if spec is not None else ():
        if key.value in ("mode", "frame"):
            continue
        new_spec.append((key, value))
    out = YMap((), loop.span)
    for key, value in loop.items:
        if key.value in ("cursor", "spec"):
            continue
        out = out.with_item(str(key.value), value)
    out = out.with_item("in", node(items, span))
    spec_map = YMap(tuple(new_spec), span).with_item("mode", node("parallel", span))
    if width is None:
        spec_map = spec_map.with_item("max_in_flight", node(1, span))
    return out.with_item("spec", spec_map)


def _check_frame(name: str, spec: YMap | None, reporter: Reporter) -> bool:
    """NoETL's `FramePolicy` refuses a `max_rows` below 1 and a `process` other than `row` or
    `frame` (noetl/core/dsl/engine/models/workflow.py)."""
    frame = spec.get("frame") if spec is not None else None
    if not isinstance(frame, YMap):
        return True
    ok = True
    rows, how = frame.get("max_rows"), frame.get("process")
    if rows is not None and not (
        isinstance(rows, YScalar)
        and isinstance(rows.value, int)
        and not isinstance(rows.value, bool)
        and rows.value >= 1
    ):
        reporter.report(
            "NOE212",
            f"`frame.max_rows` of the cursor loop of step `{name}` must be an integer >= 1",
            rows.span,
            hint="the most rows one claim takes, e.g. `max_rows: 10`",
        )
        ok = False
    if how is not None and _text(how) not in ("row", "frame"):
        reporter.report(
            "NOE212",
            f"`frame.process` of the cursor loop of step `{name}` must be `row` or `frame`",
            how.span,
            hint="`row`: the tasks run once per row; `frame`: once per claim, over its rows",
        )
        ok = False
    return ok


def _frame(spec: YMap | None) -> tuple[int, str]:
    frame = spec.get("frame") if spec is not None else None
    rows, process = 1, "row"
    if isinstance(frame, YMap):
        given = frame.get("max_rows")
        if isinstance(given, YScalar) and isinstance(given.value, int) and given.value >= 1:
            rows = given.value
        how = _text(frame.get("process"))
        if how in ("row", "frame"):
            process = how
    return rows, process


def _tasks(
    name: str, iterator: str, cursor: YMap, spec: YMap | None, tool: YNode, span: Any
) -> YSeq:
    rows, process = _frame(spec)
    options = cursor.get("options")
    cap = MAX_ITERATIONS
    if isinstance(options, YMap):
        given = options.get("max_iterations")
        if isinstance(given, YScalar) and isinstance(given.value, int) and given.value >= 1:
            cap = given.value
    claim_sql = str(cursor.get("claim").value)  # type: ignore[union-attr]
    claim_sql = _FRAME_ROWS.sub(str(rows), claim_sql)
    iv = f"iter.{name}__cursor"  # the slot's counters and current frame
    frame, pos = f"{iv}.frame", f"{iv}.pos"
    processed, failed, breaks = f"{iv}.processed", f"{iv}.failed", f"{iv}.breaks"
    taken = f"{iv}.taken"

    def state(**changes: str) -> str:
        fields = {
            "processed": f"{processed} | default(0)",
            "failed": f"{failed} | default(0)",
            "breaks": f"{breaks} | default(0)",
            "taken": f"{taken} | default(0)",
            "frame": f"{frame} | default([])",
            "pos": f"{pos} | default(0)",
        }
        fields.update(changes)
        return "{{ {" + ", ".join(f"'{k}': ({v})" for k, v in fields.items()) + "} }}"

    claim = {
        "name": f"{name}__claim",
        "kind": str(cursor.get("kind").value),  # type: ignore[union-attr]
        "auth": str(cursor.get("auth").value),  # type: ignore[union-attr]
        "command": claim_sql,
        "spec": {
            "policy": {
                "rules": [
                    {"when": "{{ outcome.status == 'error' }}", "then": {"do": "fail"}},
                    {
                        "when": "{{ (outcome.result.rows | default([]) | length) == 0 }}",
                        "then": {"do": "jump", "to": f"{name}__drained"},
                    },
                    {
                        "else": {
                            "then": {
                                "do": "continue",
                                "set_iter": {
                                    f"{name}__cursor": state(
                                        frame=f"(outcome.result.rows)[:{rows}]", pos="0"
                                    )
                                },
                            }
                        }
                    },
                ]
            }
        },
    }
    if process == "frame":
        take_rule: dict[str, Any] = {
            "when": f"{{{{ ({pos} | default(0)) == 0 and ({frame} | default([]) | length) > 0 }}}}",
            "then": {
                "do": "continue",
                "set_iter": {
                    iterator: f"{{{{ {frame} }}}}",
                    f"{iterator}_rows": f"{{{{ {frame} }}}}",
                    f"{name}__cursor": state(pos=f"{frame} | length"),
                },
            },
        }
    else:
        take_rule = {
            "when": f"{{{{ ({pos} | default(0)) < ({frame} | default([]) | length) }}}}",
            "then": {
                "do": "continue",
                "set_iter": {
                    iterator: f"{{{{ {frame}[{pos}] }}}}",
                    f"{name}__cursor": state(pos=f"({pos}) + 1"),
                },
            },
        }
    row = {
        "name": f"{name}__row",
        "kind": "noop",
        "spec": {
            "policy": {
                "rules": [
                    {
                        "when": f"{{{{ ({taken} | default(0)) >= {cap} }}}}",
                        "then": {"do": "jump", "to": f"{name}__drained"},
                    },
                    take_rule,
                    {"else": {"then": {"do": "jump", "to": f"{name}__claim"}}},
                ]
            }
        },
    }
    counted = "1" if process == "row" else f"({frame} | length)"

    def counting(task: str, counter: str) -> dict[str, Any]:
        """A noop task that adds the rows just handled to `counter` and `taken`, then takes
        the next row."""
        more = {
            counter: f"({counter_names[counter]} | default(0)) + {counted}",
            "taken": f"({taken} | default(0)) + {counted}",
        }
        then = {"do": "jump", "to": f"{name}__row", "set_iter": {f"{name}__cursor": state(**more)}}
        return {
            "name": f"{name}__{task}",
            "kind": "noop",
            "spec": {"policy": {"rules": [{"else": {"then": then}}]}},
        }

    counter_names = {"processed": processed, "failed": failed}
    done = counting("done", "processed")
    failed_task = counting("failed", "failed")
    status = f"'ok' if ({failed} | default(0)) == 0 else 'partial'"
    summary = ", ".join(
        f"'{key}': ({value} | default(0))"
        for key, value in (("processed", processed), ("failed", failed), ("breaks", breaks))
    )
    drained = {
        "name": f"{name}__drained",
        "kind": "noop",
        "input": "{{ {'status': (" + status + "), " + summary + "} }}",
    }
    body = _body_tasks(name, tool, span)
    on_failure = {
        "when": "{{ outcome.status == 'error' }}",
        "then": {"do": "jump", "to": f"{name}__failed"},
    }
    tasks: list[YNode] = [node(claim, span), node(row, span)]
    for task in body:
        tasks.append(add_policy_rules(task, [node(on_failure, span)], first=False))
    tasks.extend(node(t, span) for t in (done, failed_task, drained))
    return YSeq(tuple(tasks), tool.span)


def _body_tasks(name: str, tool: YNode, span: Any) -> list[YMap]:
    """The step's tasks as named mappings (a single task keeps its usual name `<step>_task`)."""
    out: list[YMap] = []
    for item, default in task_slots(YMap(((YScalar("tool", span), tool),), span), name):
        if isinstance(item, YMap):
            if "name" not in item:
                item = item.with_item("name", node(default, item.span))
            out.append(item)
    return out
