"""The playbook's shapes, decided once: which of its accepted forms a located node is written in.

The surface schema (`surface/models.py`) says which forms are valid; this module says which
form a node *is*. The `schema` pass's own checks, every `desugar` rewrite and `normalize` ask
it instead of testing node types themselves, so each shape has one definition:

* `tool`: one task mapping, a list of task entries, or missing (`task_slots`, `task_maps`);
  a task's default name is `<step>_task` for a single mapping and `task_<i>` in a list
  (`default_task_name`). A list entry is a task, a named-key task (`{fetch: {kind: ...}}`),
  an authoring block (`choose`, `while`, `until`) or something else (`task_entry`).
* task fields: the keys of a task that are not tool arguments (`TASK_META_KEYS`) and the keys
  under a task's `spec:` that are (`SPEC_TOOL_ARGUMENTS`).
* `next`: a target string, a list of entries (target strings or arc mappings), or a router
  mapping `{spec: {mode}, arcs: [...]}` (`routes`); an entry's target (`arc_target`).
* rules: `{when, then}`, `{else: {then: ...}}`, `{else: {do: ...}}` and `{else: null, then:
  ...}` (`rule_parts`).
* `loop.in`: a list, a string with a `{{ ... }}` template, missing, or neither
  (`loop_items_form`).
* the event a step's routing is decided on: `loop.done` for a loop step, else `step.done`
  (`done_event`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.ir.events import LOOP_DONE, STEP_DONE

# Keys of a task mapping that are not tool arguments (`output`/`output_select`: NoETL's result
# storage choices, noted by the `tools` pass, NOE609).
TASK_META_KEYS = frozenset(
    {"name", "kind", "spec", "retry", "desc", "description", "set", "output", "output_select"}
)
# Keys the corpus dialect writes under a task's `spec:` that are really tool arguments.
SPEC_TOOL_ARGUMENTS = frozenset(
    {
        "code", "input", "args", "method", "endpoint", "url", "params", "headers", "payload",
        "body", "json", "data", "command", "commands", "query", "cmds", "auth", "connection",
        "path", "libs", "sql",
    }
)  # fmt: skip
# A workbook entry's own keys when its call is written as `tool: KIND` with the arguments
# beside it (an older form `noetlc migrate` rewrites into `tool: {kind: KIND, ...}`)
WORKBOOK_ENTRY_KEYS = frozenset({"name", "desc", "description", "tool", "type"})
# Older playbooks mark a step that runs nothing with `tool: end` / `type: end` (the end step) or
# `router` (a step that only routes): no tool kind, a routing step (`tool: {kind: noop}`)
ROUTING_MARKERS = frozenset({"end", "router"})
# Authoring blocks inside a task list (a mapping without `kind:` that has one of these keys).
SUGAR_BLOCKS = ("choose", "while", "until")

# --------------------------------------------------------------------------- tool


def default_task_name(step_name: str, *, single: bool, index: int) -> str:
    """The name of an unnamed task: `<step>_task` for a single mapping, `task_<i>` in a list."""
    return f"{step_name}_task" if single else f"task_{index}"


def task_slots(step: YMap, step_name: str) -> list[tuple[YNode, str]]:
    """The step's task entries as written, each with its default name (empty without `tool:`)."""
    tool = step.get("tool")
    if isinstance(tool, YMap):
        return [(tool, f"{step_name}_task")]
    if isinstance(tool, YSeq):
        return [(item, f"task_{i}") for i, item in enumerate(tool.items)]
    return []


def single_task(step: YMap) -> bool:
    """Whether `tool:` is one task mapping (not a list)."""
    return isinstance(step.get("tool"), YMap)


def task_maps(step: YMap) -> list[YMap]:
    """The step's task mappings (a single `tool:` mapping is a list of one)."""
    tool = step.get("tool")
    if isinstance(tool, YMap):
        return [tool]
    if isinstance(tool, YSeq):
        return [t for t in tool.items if isinstance(t, YMap)]
    return []


def with_task_maps(step: YMap, tasks: list[YMap]) -> YMap:
    """`step` with these tasks: a single mapping stays a mapping, anything else is a list."""
    tool = step.get("tool")
    if isinstance(tool, YMap) and len(tasks) == 1:
        return step.with_item("tool", tasks[0])
    span = tool.span if tool is not None else step.span
    return step.with_item("tool", YSeq(tuple(tasks), span))


@dataclass(frozen=True, slots=True)
class TaskEntry:
    """What one entry of a `tool:` list is."""

    form: Literal["task", "named", "sugar", "other"]
    key: YScalar | None = None  # named: the key that names the task
    body: YMap | None = None  # named: the task's own fields
    block: str | None = None  # sugar: `choose`, `while` or `until`


_TASK = TaskEntry("task")
_OTHER = TaskEntry("other")
_SUGAR = {block: TaskEntry("sugar", block=block) for block in SUGAR_BLOCKS}


def task_entry(item: YNode) -> TaskEntry:
    """A task (it has `kind:`, or is a mapping of no other form: `normalize` reports a missing
    kind), a named-key task `{name: {kind: ...}}`, an authoring block, or not a mapping."""
    if not isinstance(item, YMap):
        return _OTHER
    items = item.items
    if len(items) == 1:
        key, body = items[0]
        if key.value != "kind" and isinstance(body, YMap) and "kind" in body:
            return TaskEntry("named", key=key, body=body)
    blocks = []
    for key, _ in items:  # one scan of the keys
        if key.value == "kind":
            return _TASK
        if key.value in _SUGAR:
            blocks.append(key.value)
    for block in SUGAR_BLOCKS:
        if block in blocks:
            return _SUGAR[block]
    return _TASK


# --------------------------------------------------------------------------- next


@dataclass(frozen=True, slots=True)
class Routes:
    """A step's `next` as written."""

    form: Literal["none", "target", "list", "router"]
    entries: tuple[YNode, ...]  # target strings and arc mappings, as written
    at: tuple[str, ...]  # where the entries are below the step: (next,) or (next, arcs)
    mode: str | None  # a router's `spec.mode` as written
    node: YNode | None


_NO_ROUTES = Routes("none", (), (), None, None)


def routes(nxt: YNode | None) -> Routes:
    """`next: target`, `next: [target | arc, ...]` or `next: {spec: {mode}, arcs: [...]}`."""
    if nxt is None:
        return _NO_ROUTES
    if isinstance(nxt, YScalar):
        if not text(nxt):
            return Routes("none", (), (), None, nxt)
        return Routes("target", (nxt,), ("next",), None, nxt)
    if isinstance(nxt, YSeq):
        return Routes("list", nxt.items, ("next",), None, nxt)
    spec = nxt.get("spec")
    mode = text(spec.get("mode")) if isinstance(spec, YMap) else None
    arcs = nxt.get("arcs")
    entries = arcs.items if isinstance(arcs, YSeq) else ()
    return Routes("router", entries, ("next", "arcs"), mode, nxt)


def arc_target(entry: YNode) -> tuple[str, YNode] | None:
    """The target step of a `next` entry (a string, or an arc's `step:`) and its node."""
    if isinstance(entry, YScalar):
        target = text(entry)
        return (target, entry) if target else None
    if isinstance(entry, YMap):
        node = entry.get("step")
        target = text(node)
        return (target, node) if target and node is not None else None
    return None


def done_event(step: YMap) -> str:
    """The event a step's routing is decided on: `loop.done` for a loop step."""
    return LOOP_DONE if step.get("loop") is not None else STEP_DONE


# --------------------------------------------------------------------------- rules


def rule_parts(item: YMap) -> tuple[YNode | None, YMap | None, bool]:
    """A rule -> (its `when` node, its `then` mapping, whether it is the `else` rule).

    Accepted shapes: `{when, then}`; `{else: {then: {...}}}`; the corpus's `{else: {do: ...}}`;
    and `{else: null, then: {...}}` (the corpus writes `then` one level too far left).
    """
    otherwise = item.get("else")
    if isinstance(otherwise, YMap):
        return None, _map(otherwise.get("then")) if "then" in otherwise else otherwise, True
    if "else" in item and isinstance(otherwise, YScalar) and otherwise.value is None:
        return None, _map(item.get("then")), True
    return item.get("when"), _map(item.get("then")), False


# --------------------------------------------------------------------------- loops


def loop_items_form(items: YNode | None) -> Literal["missing", "list", "template", "invalid"]:
    """`loop.in`: a YAML list, a string with a `{{ ... }}` template, missing, or neither."""
    if items is None:
        return "missing"
    if isinstance(items, YSeq):
        return "list"
    if isinstance(items, YScalar) and isinstance(items.value, str) and "{{" in items.value:
        return "template"
    return "invalid"


# --------------------------------------------------------------------------- scalars


def text(node: YNode | None) -> str | None:
    """A scalar's text (numbers too); None for null, booleans and collections."""
    if isinstance(node, YScalar) and node.value is not None and not isinstance(node.value, bool):
        return str(node.value)
    return None


def _map(node: YNode | None) -> YMap | None:
    return node if isinstance(node, YMap) else None
