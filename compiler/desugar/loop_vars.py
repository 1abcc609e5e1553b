"""NoETL's `iter._index`, `iter._first`, `iter._last` in a loop step -> noetlc's names.

NoETL's engine binds them beside the iterator in every iteration's context: the item's index
from 0, whether it is the first, whether it is the last of the collection
(noetl/core/dsl/engine/executor/commands.py, the loop command's `iter`; the same in
noetl/core/dsl/engine/executor/state.py `get_render_context`). Names that start with `_` are
out of the expression sandbox's reach, so the loop step's own templates (its tools, `input`,
`args`, `set`) are rewritten: `iter._index` is `iter.index`, `iter._first` is
`(iter.index == 0)`, and `iter._last` is `(iter.index == N - 1)` with N the length of the
loop's list when it is known in every iteration: a YAML list, or a single template that reads
only `workload` or finished steps' results (values no iteration changes). Otherwise
`iter._last` stays, and the sandbox refuses it with a hint (NOE302). A cursor loop's `iter`
is its frame's (NoETL's cursor worker binds `_index` per row): left alone. NoETL runs these
names, so `noetlc migrate` prints them as written (a canonical rewrite, no warning).
"""

from __future__ import annotations

import re

from noetlc.compiler.desugar.common import map_step_list, steps
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter

_NAMES = re.compile(r"\biter\._(index|first|last)\b")
_SINGLE = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}\s*$", re.DOTALL)
# what a loop's list may read so that it is the same in every iteration
_STABLE_ROOTS = frozenset({"workload"})


def run(doc: YMap, reporter: Reporter) -> YMap:
    step_names = {
        str(step.get("step").value)  # type: ignore[union-attr]
        for _, step in steps(doc)
        if isinstance(step.get("step"), YScalar)
    }

    def fix(step: YMap) -> YMap | None:
        loop = step.get("loop")
        if not isinstance(loop, YMap) or "cursor" in loop:
            return None
        if not any(_mentions(value) for key, value in step.items if key.value != "loop"):
            return None
        last = _last(loop.get("in"), step_names)
        items = tuple(
            (key, value if key.value in ("loop", "next") else _rewrite(value, last))
            for key, value in step.items
        )
        return YMap(items, step.span)

    return map_step_list(doc, fix)


def _mentions(node: YNode) -> bool:
    if isinstance(node, YScalar):
        return isinstance(node.value, str) and "iter._" in node.value
    if isinstance(node, YSeq):
        return any(_mentions(v) for v in node.items)
    if isinstance(node, YMap):
        return any(_mentions(v) for _, v in node.items)
    return False


def _rewrite(node: YNode, last: str | None) -> YNode:
    if isinstance(node, YScalar):
        if isinstance(node.value, str) and "iter._" in node.value:

            def name(match: re.Match[str]) -> str:
                which = match.group(1)
                if which == "index":
                    return "iter.index"
                if which == "first":
                    return "(iter.index == 0)"
                return match.group(0) if last is None else f"(iter.index == {last} - 1)"

            text = _NAMES.sub(name, node.value)
            return node if text == node.value else YScalar(text, node.span, node.quoted)
        return node
    if isinstance(node, YSeq):
        return YSeq(tuple(_rewrite(v, last) for v in node.items), node.span)
    if isinstance(node, YMap):
        return YMap(tuple((k, _rewrite(v, last)) for k, v in node.items), node.span)
    return node


def _last(source: YNode | None, step_names: set[str]) -> str | None:
    """The loop list's length as an expression every iteration can evaluate, or None."""
    if isinstance(source, YSeq):
        return str(len(source.items))
    if not isinstance(source, YScalar) or not isinstance(source.value, str):
        return None
    match = _SINGLE.match(source.value)
    if match is None:
        return None
    from noetlc.expr.compile import compile_expression

    expr = match.group("expr").strip()
    try:
        compiled = compile_expression("{{ " + expr + " }}")
    except Exception:  # a bad expression is reported where it is written
        return None
    if not compiled.names or not set(compiled.names) <= (_STABLE_ROOTS | step_names):
        return None
    return f"(({expr}) | length)"
