"""Pass `schema`: validate the document against the surface schema, errors at YAML positions.

Rejected legacy keys (root `vars`, `eval`, `expr`, `pipe`, step `type`, ...) are reported first with a specific hint and are not
reported again as unknown keys. pydantic's errors are mapped back to the YAML node of the
offending key or value; for a value that matches none of a union's shapes, only the errors of
the shape that matched deepest are shown (the others are noise), and a value whose type fits
none of the shapes gets one error naming all of them.

Valid documents are the common case: the generated shape table of the surface models
(`compiler/surface/shape_table.py`, `noetlc.stdlib_tools.shape_check.fits`) accepts them
without pydantic. pydantic and the models are imported only when the table cannot accept the
document, to produce the diagnostics (the pass reports nothing else: its output is the
diagnostics).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from noetlc.compiler.shapes import ROUTING_MARKERS, WORKBOOK_ENTRY_KEYS, routes
from noetlc.compiler.surface.shape_table import MODELS, STEP_KEYS
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq, node_at
from noetlc.diagnostics.report import Reporter, Span
from noetlc.stdlib_tools.shape_check import fits

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

Path = tuple[str | int, ...]

_MIGRATE = "; `noetlc migrate FILE -i` rewrites it"
_REJECTED_STEP_KEYS = {
    "type": "step `type:` is NoETL's older `tool.kind`: write `tool: {kind: ..., ...arguments}`"
    + _MIGRATE,
    "eval": "legacy `eval:` is rejected: write task policy rules (`spec.policy.rules`)" + _MIGRATE,
    "expr": "`expr:` is rejected: use `when:`",
    "pipe": "`pipe:` is rejected: write the tasks as an ordered `tool:` list" + _MIGRATE,
}
# What `noetlc migrate` rewrites (the `migrate` option): not reported then, only removed
# before the surface models see the document; the desugar pass rewrites them.
_MIGRATABLE = frozenset({"eval", "pipe", "type"})
_REJECTED_ANYWHERE = {"eval", "expr", "pipe"}
# Values under these keys are user data (tool arguments, writes, inputs): a key named `expr`
# inside them is data, not the legacy keyword.
_DATA_KEYS = frozenset(
    {
        "input", "args", "params", "headers", "payload", "body", "json", "data", "workload",
        "set", "set_ctx", "set_iter", "vars", "code", "query", "sql", "command", "commands",
        "cmds", "auth", "connection", "env", "metadata", "keychain", "assert", "in",
        "collection", "result",
    }
)  # fmt: skip
_NEXT_ENTRY_HINT = (
    "write one arc per target with its own `when:` "
    "(`next: {arcs: [{step: a, when: ...}, {step: b}]}`)" + _MIGRATE
)


def run(unit: CompilationUnit) -> None:
    doc = unit.document
    if doc is None:
        return
    rejected = _report_rejected(doc, unit.reporter, migrate=bool(unit.options.get("migrate")))
    data = _strip(doc, rejected).to_python()
    if fits(MODELS, "Playbook", data):
        return  # valid for certain (the generated shape table): no pydantic to import
    from pydantic import ValidationError

    from noetlc.compiler.surface.models import Playbook

    try:
        Playbook.model_validate(data)
    except ValidationError as exc:
        _report_validation(exc, doc, unit.reporter)


# --------------------------------------------------------------------------- rejected keys


def _report_rejected(doc: YMap, reporter: Reporter, *, migrate: bool = False) -> set[Path]:
    """Report the legacy keys the canonical form rejects; return their paths (removed before
    pydantic). With `migrate`, the keys `noetlc migrate` rewrites are removed, not reported."""
    found: set[Path] = set()
    vars_key = doc.key_node("vars")
    if vars_key is not None and not migrate:
        reporter.report(
            "NOE105",
            "root-level `vars:` is not supported",
            vars_key.span,
            hint="put the values in `workload:` (immutable inputs) or set them with `set_ctx` "
            "in a task policy; `noetlc migrate FILE -i` rewrites them as ctx values set at "
            "the start",
        )
    if vars_key is not None:
        found.add(("vars",))
    tracing_key = doc.key_node("tracing")
    if tracing_key is not None and not migrate:
        reporter.report(
            "NOE106",
            "root-level `tracing:` (exporting OpenTelemetry traces) is not supported",
            tracing_key.span,
            hint="every event of an execution is in the store (`noetl-vm events ID`); remove "
            "the block (`noetlc migrate FILE -i` removes it)",
        )
    if tracing_key is not None:
        found.add(("tracing",))
    for section in ("workflow", "workbook"):
        items = doc.get(section)
        if not isinstance(items, YSeq):
            continue
        for i, item in enumerate(items.items):
            if not isinstance(item, YMap):
                continue
            if section == "workbook" and "kind" not in item:
                _tool_as_kind(item, (section, i), reporter, found, migrate, WORKBOOK_ENTRY_KEYS)
                if "tool" not in item:
                    _tool_as_kind(
                        item, (section, i), reporter, found, migrate, WORKBOOK_ENTRY_KEYS, "type"
                    )
            if section == "workflow":
                _tool_as_kind(item, (section, i), reporter, found, migrate)
                _type_as_kind(item, (section, i), found)
                _rejected_step_keys(item, (section, i), reporter, found, migrate)
                _rejected_next_entries(item, (section, i), reporter, found, migrate)
            for path, key_node in _walk_structural_keys(item, (section, i)):
                if key_node.value not in _REJECTED_ANYWHERE:
                    continue
                if migrate and key_node.value in _MIGRATABLE:
                    found.add(path)
                elif not any(path[:n] in found for n in range(2, len(path) + 1)):
                    reporter.report(
                        "NOE105",
                        f"`{key_node.value}:` is not supported",
                        key_node.span,
                        hint=_REJECTED_STEP_KEYS[str(key_node.value)],
                    )
                    found.add(path)
    return found


def _tool_as_kind(
    step: YMap,
    here: Path,
    reporter: Reporter,
    found: set[Path],
    migrate: bool,
    own: frozenset[str] | None = None,
    spelling: str = "tool",
) -> None:
    """`tool: postgres` with the tool's arguments on the step (an older form), or on a
    workbook entry (`own`: the entry's own keys; `spelling`: `type`, the oldest form)."""
    tool = step.get(spelling)
    if not (isinstance(tool, YScalar) and isinstance(tool.value, str) and tool.value):
        return
    keep = STEP_KEYS if own is None else own
    extra = [str(k.value) for k, _ in step.items if str(k.value) not in keep]
    if not migrate:
        key = step.key_node(spelling)
        assert key is not None
        where = "step" if own is None else "workbook entry"
        if tool.value == "iterator" and own is None:
            reporter.report(
                "NOE105",
                f"`{spelling}: iterator` is an older loop form",
                key.span,
                hint="write `loop: {in: <collection>, iterator: <element>}` and the `task:` as "
                "the step's `tool:`" + _MIGRATE,
            )
        elif tool.value in ROUTING_MARKERS and own is None:
            reporter.report(
                "NOE105",
                f"`{spelling}: {tool.value}` marks a step that runs no tool (an older form)",
                key.span,
                hint="write `tool: {kind: noop}`" + _MIGRATE,
            )
        else:
            reporter.report(
                "NOE105",
                f"`{spelling}: {tool.value}` with the tool's arguments on the {where} is an "
                "older form",
                key.span,
                hint="write `tool: {kind: "
                + str(tool.value)
                + ", ...arguments}`; `noetlc migrate FILE -i` rewrites it",
            )
    found.add((*here, spelling))
    found.update((*here, k) for k in extra)


def _type_as_kind(step: YMap, here: Path, found: set[Path]) -> None:
    """A step's `type: KIND` (NoETL's oldest form) carries the tool's arguments beside it:
    they are not reported one by one (`type:` itself is, NOE105; `migrate` rewrites it)."""
    kind = step.get("type")
    if "tool" in step or not (isinstance(kind, YScalar) and isinstance(kind.value, str)):
        return
    found.update((*here, str(k.value)) for k, _ in step.items if str(k.value) not in STEP_KEYS)


def _rejected_step_keys(
    step: YMap, here: Path, reporter: Reporter, found: set[Path], migrate: bool
) -> None:
    for key, hint in _REJECTED_STEP_KEYS.items():
        key_node = step.key_node(key)
        if key_node is not None and migrate and key in _MIGRATABLE:
            found.add((*here, key))
        elif key_node is not None:
            reporter.report(
                "NOE105", f"step key `{key}:` is not supported", key_node.span, hint=hint
            )
            found.add((*here, key))


def _rejected_next_entries(
    step: YMap, here: Path, reporter: Reporter, found: set[Path], migrate: bool
) -> None:
    written = routes(step.get("next"))
    if written.form not in ("list", "router"):
        return
    base = (*here, *written.at)
    for j, entry in enumerate(written.entries):
        if not isinstance(entry, YMap):
            continue
        for bad in ("then", "else"):
            key_node = entry.key_node(bad)
            if key_node is not None and migrate:
                found.add((*here, "next"))  # the whole router: desugar rewrites it
            elif key_node is not None:
                reporter.report(
                    "NOE105",
                    f"`next` entries cannot have `{bad}:`",
                    key_node.span,
                    hint=_NEXT_ENTRY_HINT,
                )
                found.add((*base, j, bad))


def _walk_structural_keys(node: YNode, path: Path) -> Iterator[tuple[Path, YScalar]]:
    """Every key below `node`, without descending into user data (`_DATA_KEYS`)."""
    if isinstance(node, YMap):
        for k, v in node.items:
            sub = (*path, str(k.value))
            yield sub, k
            if k.value not in _DATA_KEYS:
                yield from _walk_structural_keys(v, sub)
    elif isinstance(node, YSeq):
        for i, item in enumerate(node.items):
            yield from _walk_structural_keys(item, (*path, i))


def _strip(node: YNode, paths: set[Path], here: Path = ()) -> YNode:
    if not paths:
        return node
    if isinstance(node, YMap):
        return YMap(
            tuple(
                (k, _strip(v, paths, (*here, str(k.value))))
                for k, v in node.items
                if (*here, str(k.value)) not in paths
            ),
            node.span,
        )
    if isinstance(node, YSeq):
        return YSeq(
            tuple(_strip(v, paths, (*here, i)) for i, v in enumerate(node.items)), node.span
        )
    return node


# --------------------------------------------------------------------------- pydantic errors


@dataclass(frozen=True, slots=True)
class _Error:
    """One validation problem, as the models describe it."""

    kind: str  # pydantic's error type, or "union_type" for a value no union member takes
    loc: tuple[Any, ...]  # pydantic's location (data keys interleaved with union tags)
    path: Path  # the location in the data
    tags: tuple[tuple[int, str], ...]  # (depth in `path`, union member) pairs along `loc`
    expected: tuple[str, ...]  # what the value should have been, in words


# pydantic error types -> what the value should have been (the tools pass reads it too)
EXPECTED_NOUN = {
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
}


def _report_validation(exc: ValidationError, doc: YMap, reporter: Reporter) -> None:
    data = doc.to_python()
    errors = []
    for err in exc.errors():
        path, tags = _data_path(err["loc"], data, missing=err["type"] == "missing")
        expected = err.get("ctx", {}).get("expected") if err["type"] == "literal_error" else None
        noun = expected or EXPECTED_NOUN.get(err["type"]) or err["msg"].lower()
        errors.append(_Error(err["type"], tuple(err["loc"]), path, tags, (noun,)))
    seen: set[tuple[str, Path]] = set()
    for error in _prune_unions(errors):
        key = (error.kind, error.path)
        if key in seen:
            continue
        seen.add(key)
        _report_one(error, doc, reporter)


def _data_path(
    loc: tuple[Any, ...], data: Any, *, missing: bool
) -> tuple[Path, tuple[tuple[int, str], ...]]:
    """Split a pydantic `loc` into the path through the data and the union tags it passed.

    Each tag is `(depth, tag)`: the union member chosen at that depth of the data path.
    """
    path: list[str | int] = []
    tags: list[tuple[int, str]] = []
    cursor: Any = data
    for i, step in enumerate(loc):
        in_dict = isinstance(cursor, dict) and isinstance(step, str) and step in cursor
        in_list = isinstance(cursor, list) and isinstance(step, int) and 0 <= step < len(cursor)
        if in_dict or in_list:
            path.append(step)
            cursor = cursor[step]
        elif missing and isinstance(cursor, dict) and isinstance(step, str) and i == len(loc) - 1:
            path.append(step)  # a missing key: the path names it
        else:
            tags.append((len(path), str(step)))
    return tuple(path), tuple(tags)


def _prune_unions(errors: list[_Error], level: int = 0) -> list[_Error]:
    """Within each union, keep only the errors of the member that matched deepest (recursively).

    When the value's type fits no member at all (every member failed on the value itself),
    the members' errors become one `union_type` error listing what each member expects.
    """
    plain = [e for e in errors if len(e.tags) <= level]
    groups: dict[tuple[Path, int], dict[str, list[_Error]]] = {}
    for e in errors:
        if len(e.tags) <= level:
            continue
        depth, tag = e.tags[level]
        groups.setdefault((e.path[:depth], depth), {}).setdefault(tag, []).append(e)
    kept = list(plain)
    for (where, _), members in groups.items():
        if all(
            len(errs) == 1 and errs[0].path == where and _is_type_error(errs[0])
            for errs in members.values()
        ):
            first = next(iter(members.values()))[0]
            nouns = tuple(dict.fromkeys(n for errs in members.values() for n in errs[0].expected))
            kept.append(_Error("union_type", first.loc, where, (), nouns))
            continue
        best = max(
            members.values(),
            key=lambda errs: (max(len(e.path) for e in errs), -len(errs)),
        )
        kept.extend(_prune_unions(best, level + 1))
    kept.sort(key=lambda e: [str(p) for p in e.path])
    return kept


def _is_type_error(err: _Error) -> bool:
    return err.kind in EXPECTED_NOUN or err.kind in ("literal_error", "union_type")


def _report_one(err: _Error, doc: YMap, reporter: Reporter) -> None:
    path = err.path
    where = _describe(path)
    if err.kind == "extra_forbidden":
        key = str(path[-1])
        node, key_node = node_at(doc, path)
        span = key_node.span if key_node is not None else _span_of(node)
        allowed = _allowed_keys(err.loc[:-1])
        import difflib  # only for a hint: not imported by valid input

        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = (
            f"did you mean `{close[0]}`?"
            if close
            else (f"allowed keys here: {', '.join(sorted(allowed))}" if allowed else None)
        )
        if len(path) > 2 and path[-2] == "then" and "rules" in path[:-2]:
            # NoETL's policy rule actions accept extra keys and its engine reads only its own
            # (`PolicyRuleThen`, `extra = "allow"`: noetl/core/dsl/engine/models/policy.py)
            from noetlc.diagnostics.severity import Severity

            reporter.report(
                "NOE101",
                f"unknown key `{key}` in {_describe(path[:-1])}: ignored (the rule acts "
                "without it, as on NoETL)",
                span,
                hint=hint,
                severity=Severity.WARNING,
            )
            return
        reporter.report("NOE101", f"unknown key `{key}` in {_describe(path[:-1])}", span, hint=hint)
    elif err.kind == "missing":
        parent, _ = node_at(doc, path[:-1])
        span = _span_of(parent)
        if isinstance(parent, YMap) and parent.items:
            span = parent.items[0][0].span
        reporter.report(
            "NOE102", f"{_describe(path[:-1])} is missing the required key `{path[-1]}`", span
        )
    elif err.kind in ("literal_error", "enum"):
        node, _ = node_at(doc, path)
        reporter.report(
            "NOE104",
            f"invalid value {_show(node)} for {where}",
            _span_of(node),
            hint=f"expected {err.expected[0]}",
        )
    else:
        node, _ = node_at(doc, path)
        reporter.report(
            "NOE103",
            f"{where} must be {_either(err.expected)}, not {_type_name(node)}",
            _span_of(node),
        )


def _either(nouns: tuple[str, ...]) -> str:
    if len(nouns) == 1:
        return nouns[0]
    return f"{', '.join(nouns[:-1])} or {nouns[-1]}"


def _span_of(node: YNode | None) -> Span | None:
    return node.span if node is not None else None


def _show(node: YNode | None) -> str:
    if isinstance(node, YScalar):
        return repr(node.value)
    return f"({_type_name(node)})"


def _type_name(node: YNode | None) -> str:
    if isinstance(node, YMap):
        return "a mapping"
    if isinstance(node, YSeq):
        return "a list"
    if node is None or node.value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(node.value), type(node.value).__name__
    )


def _describe(path: Path) -> str:
    if not path:
        return "the playbook"
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return f"`{out}`"


# --------------------------------------------------------------------------- allowed keys


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys the model at `loc` accepts (walking field annotations and union tags)."""
    from noetlc.compiler.surface.models import Playbook

    current: Any = Playbook
    for step in loc:
        current = _descend(current, step)
        if current is None:
            return []
    model = _as_model(current)
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _members(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(tp):
            out.extend(_members(arg))
        return out
    if origin is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    return [tp]


def _as_model(tp: Any) -> type[BaseModel] | None:
    from pydantic import BaseModel

    for m in _members(tp):
        if isinstance(m, type) and issubclass(m, BaseModel):
            return m
    return None


def _descend(tp: Any, step: Any) -> Any:
    """One step of a pydantic `loc` through the type `tp`: a list index, a field, a union tag."""
    members = _members(tp)
    if isinstance(step, int):
        for m in members:
            if typing.get_origin(m) is list:
                return typing.get_args(m)[0]
        return None
    from pydantic import BaseModel

    tag = str(step)
    for m in members:  # a union tag: `Router`, `str`, `list[Task]`, `dict[str,any]`
        origin = typing.get_origin(m)
        if origin is not None and tag.startswith(f"{origin.__name__}["):
            return m
        if origin is None and isinstance(m, type) and m.__name__ == tag:
            return m
    for m in members:
        if isinstance(m, type) and issubclass(m, BaseModel):
            for name, f in m.model_fields.items():
                if tag in (name, f.alias):
                    return f.annotation
    return None
