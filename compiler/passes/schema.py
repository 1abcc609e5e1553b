"""Pass `schema`: validate the document against the surface schema, errors at YAML positions.

Rejected legacy keys (DESIGN §2.2) are reported first with a specific hint and are not
reported again as unknown keys. pydantic's errors are mapped back to the YAML node of the
offending key or value; for a value that matches none of a union's shapes, only the errors of
the shape that matched deepest are shown (the others are noise).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError

from noetlc.compiler.diagnostics import Reporter, Span
from noetlc.compiler.surface.models import Playbook
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq, node_at

Path = tuple[str | int, ...]

_REJECTED_STEP_KEYS = {
    "type": "step `type:` is gone: a step's behaviour comes from its `tool:` kind",
    "eval": "legacy `eval:` is rejected: write task policy rules (`spec.policy.rules`)",
    "expr": "`expr:` is rejected: use `when:`",
    "pipe": "`pipe:` is rejected: write the tasks as an ordered `tool:` list",
}
_REJECTED_ANYWHERE = {"eval", "expr", "pipe"}


def run(unit: CompilationUnit) -> None:
    doc = unit.document
    if doc is None:
        return
    rejected = _report_rejected(doc, unit.reporter)
    data = _strip(doc, rejected).to_python()
    try:
        Playbook.model_validate(data)
    except ValidationError as exc:
        _report_validation(exc, doc, unit.reporter)


# --------------------------------------------------------------------------- rejected keys


def _report_rejected(doc: YMap, reporter: Reporter) -> set[Path]:
    """Report legacy keys DESIGN §2.2 rejects; return their paths (removed before pydantic)."""
    found: set[Path] = set()
    vars_key = doc.key_node("vars")
    if vars_key is not None:
        reporter.report(
            "NOE105",
            "root-level `vars:` is not supported",
            vars_key.span,
            hint="put the values in `workload:` (immutable inputs) or set them with `set_ctx` "
            "in a task policy",
        )
        found.add(("vars",))
    workflow = doc.get("workflow")
    if not isinstance(workflow, YSeq):
        return found
    for i, step in enumerate(workflow.items):
        if not isinstance(step, YMap):
            continue
        for key, hint in _REJECTED_STEP_KEYS.items():
            key_node = step.key_node(key)
            if key_node is not None:
                reporter.report(
                    "NOE105", f"step key `{key}:` is not supported", key_node.span, hint=hint
                )
                found.add(("workflow", i, key))
        for path, key_node in _walk_keys(step, ("workflow", i)):
            if key_node.value in _REJECTED_ANYWHERE and path not in found and len(path) > 3:
                reporter.report(
                    "NOE105",
                    f"`{key_node.value}:` is not supported",
                    key_node.span,
                    hint=_REJECTED_STEP_KEYS[str(key_node.value)],
                )
                found.add(path)
        nxt = step.get("next")
        if isinstance(nxt, YSeq):
            for j, entry in enumerate(nxt.items):
                if isinstance(entry, YMap):
                    for bad in ("then", "else"):
                        key_node = entry.key_node(bad)
                        if key_node is not None:
                            reporter.report(
                                "NOE105",
                                f"`next` entries cannot have `{bad}:`",
                                key_node.span,
                                hint="write one arc per target with its own `when:` "
                                "(`next: {arcs: [{step: a, when: ...}, {step: b}]}`)",
                            )
                            found.add(("workflow", i, "next", j, bad))
    return found


def _walk_keys(node: YNode, path: Path) -> Iterator[tuple[Path, YScalar]]:
    if isinstance(node, YMap):
        for k, v in node.items:
            sub = (*path, str(k.value))
            yield sub, k
            yield from _walk_keys(v, sub)
    elif isinstance(node, YSeq):
        for i, item in enumerate(node.items):
            yield from _walk_keys(item, (*path, i))


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


def _report_validation(exc: ValidationError, doc: YMap, reporter: Reporter) -> None:
    data = doc.to_python()
    errors = []
    for err in exc.errors():
        path, tags = _data_path(err["loc"], data, missing=err["type"] == "missing")
        errors.append((err, path, tags))
    chosen = _prune_unions(errors)
    seen: set[tuple[str, Path]] = set()
    for err, path, _ in chosen:
        key = (err["type"], path)
        if key in seen:
            continue
        seen.add(key)
        _report_one(err, path, doc, reporter)


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


def _prune_unions(errors: list[Any], level: int = 0) -> list[Any]:
    """Within each union, keep only the errors of the member that matched deepest (recursively)."""
    plain = [e for e in errors if len(e[2]) <= level]
    groups: dict[tuple[Path, int], dict[str, list[Any]]] = {}
    for e in errors:
        if len(e[2]) <= level:
            continue
        depth, tag = e[2][level]
        groups.setdefault((e[1][:depth], depth), {}).setdefault(tag, []).append(e)
    kept = list(plain)
    for members in groups.values():
        best = max(
            members.values(),
            key=lambda errs: (max(len(e[1]) for e in errs), -len(errs)),
        )
        kept.extend(_prune_unions(best, level + 1))
    kept.sort(key=lambda e: [str(p) for p in e[1]])
    return kept


def _report_one(err: Any, path: Path, doc: YMap, reporter: Reporter) -> None:
    kind = err["type"]
    where = _describe(path)
    if kind == "extra_forbidden":
        parent_path, key = path[:-1], str(path[-1])
        node, key_node = node_at(doc, path)
        span = key_node.span if key_node is not None else _span_of(node)
        allowed = _allowed_keys(err["loc"][:-1])
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = (
            f"did you mean `{close[0]}`?"
            if close
            else (f"allowed keys here: {', '.join(sorted(allowed))}" if allowed else None)
        )
        reporter.report(
            "NOE101", f"unknown key `{key}` in {_describe(parent_path)}", span, hint=hint
        )
    elif kind == "missing":
        parent, _ = node_at(doc, path[:-1])
        span = _span_of(parent)
        if isinstance(parent, YMap) and parent.items:
            span = parent.items[0][0].span
        reporter.report(
            "NOE102", f"{_describe(path[:-1])} is missing the required key `{path[-1]}`", span
        )
    elif kind in ("literal_error", "enum"):
        node, _ = node_at(doc, path)
        expected = err.get("ctx", {}).get("expected", "")
        reporter.report(
            "NOE104",
            f"invalid value {_show(node)} for {where}",
            _span_of(node),
            hint=f"expected {expected}" if expected else None,
        )
    else:
        node, _ = node_at(doc, path)
        reporter.report(
            "NOE103",
            f"wrong type for {where}: {err['msg'].lower()}, got {_type_name(node)}",
            _span_of(node),
        )


def _span_of(node: YNode | None) -> Span | None:
    return node.span if node is not None else None


def _show(node: YNode | None) -> str:
    if isinstance(node, YScalar):
        return repr(node.value)
    return f"(a {_type_name(node)})"


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


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys the model at `loc` accepts (walking field annotations and union tags)."""
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
    for m in _members(tp):
        if isinstance(m, type) and issubclass(m, BaseModel):
            return m
    return None


def _descend(tp: Any, step: Any) -> Any:
    members = _members(tp)
    if isinstance(step, int):
        for m in members:
            if typing.get_origin(m) is list:
                return typing.get_args(m)[0]
        return None
    for m in members:
        if isinstance(m, type) and issubclass(m, BaseModel):
            if m.__name__ == step:
                return m
            for name, f in m.model_fields.items():
                if step in (name, f.alias):
                    return f.annotation
    # a union tag such as `list[...]` or `Router`
    for m in members:
        name = getattr(m, "__name__", str(m))
        if name == step or str(step).startswith(str(getattr(typing.get_origin(m), "__name__", ""))):
            return m
    return None
