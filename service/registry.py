"""Registering catalog entries: decode, read the document, compile and lint a playbook.

The content is the standard base64 of the file's UTF-8 bytes or the plain text. The path is
the first of `metadata.path`, `path`, `metadata.name`, `name`, else `unknown`; the kind is the
document's `kind:` or the request's `resource_type`, lower-cased (Playbook -> playbook,
Credential/Secret -> credential). A playbook is compiled before it is stored: compile errors
refuse it (422, NOE873) with every located diagnostic; warnings and lint findings are stored
with the version. Same content for a path gives the same version back.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from noetlc.runtime.catalog import CatalogStore
from noetlc.service.errors import (
    INVALID_TEXT,
    REFUSED_PLAYBOOK,
    TOO_LARGE,
    ApiError,
    bad_request,
)
from noetlc.service.guard import text_problem, value_problem
from noetlc.service.limits import Limits

KIND_ALIASES = {
    "playbook": "playbook",
    "credential": "credential",
    "secret": "credential",
    "mcp": "mcp",
    "agent": "agent",
}
EXECUTABLE = ("playbook", "agent")


def normalize_kind(kind: str | None) -> str:
    text = (kind or "playbook").strip().lower()
    return KIND_ALIASES.get(text, text)


def decode_content(content: str) -> str:
    """Base64 of UTF-8 text, else the text itself."""
    stripped = content.strip()
    if stripped and "\n" not in stripped and ":" not in stripped:
        try:
            return base64.b64decode(stripped, validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            pass
    return content


def document_path(document: Any) -> str:
    if not isinstance(document, dict):
        return "unknown"
    found = document.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    for value in (
        metadata.get("path"),
        document.get("path"),
        metadata.get("name"),
        document.get("name"),
    ):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return "unknown"


def read_document(text: str, path_hint: str = "<catalog>") -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path_hint}:{mark.line + 1}:{mark.column + 1}" if mark else path_hint
        raise ApiError(
            422,
            REFUSED_PLAYBOOK,
            f"the content is not valid YAML ({where}): {getattr(exc, 'problem', exc)}",
            "send the playbook file's text, plain or base64",
            diagnostics=[
                {
                    "code": "NOE001",
                    "severity": "error",
                    "message": str(getattr(exc, "problem", exc)),
                    "line": mark.line + 1 if mark else None,
                    "column": mark.column + 1 if mark else None,
                }
            ],
        ) from None


def compile_playbook(text: str, path: str) -> tuple[bytes, list[dict[str, Any]]]:
    """(program bytes, findings) of a playbook; NOE873 with the diagnostics when it has errors."""
    from noetlc.analysis.lint import lint_unit
    from noetlc.compiler.pipeline import compile_source

    unit = compile_source(text, file=path)
    if unit.reporter.has_errors or unit.program is None:
        diagnostics = [d.to_json() for d in unit.reporter.sorted()]
        first = next((d for d in diagnostics if d["severity"] == "error"), diagnostics[0])
        where = f"{path}:{first['line']}:{first['column']}" if first.get("line") else path
        raise ApiError(
            422,
            REFUSED_PLAYBOOK,
            f"register_resource: '{path}' is not a valid playbook: {where}: "
            f"error[{first['code']}]: {first['message']}",
            first.get("hint") or "run `noetlc check FILE` for every diagnostic",
            diagnostics=diagnostics,
        )
    findings = [d.to_json() for d in lint_unit(unit).diagnostics]
    return unit.program.nbc, findings


def register(
    catalog: CatalogStore,
    content: str,
    resource_type: str | None,
    limits: Limits | None = None,
) -> tuple[dict[str, Any], bool]:
    """Store one resource; (the entry, whether this call created its version)."""
    if not isinstance(content, str) or not content.strip():
        raise bad_request("content is required", "send the file's text (base64 or plain)", 422)
    limits = limits or Limits()
    text = decode_content(content)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.yaml_bytes:
        raise ApiError(
            413,
            TOO_LARGE,
            f"the document is {size} bytes, over the limit of {limits.yaml_bytes}",
            "`noetl-vm serve --max-yaml-bytes N` raises the limit",
        )
    check_text(text, "the document")
    document = read_document(text)
    depth = nesting(document, limits.yaml_depth)
    if depth > limits.yaml_depth:
        raise ApiError(
            413,
            TOO_LARGE,
            f"the document nests deeper than {limits.yaml_depth} levels",
            "`noetl-vm serve --max-yaml-depth N` raises the limit",
        )
    problem = value_problem(document)
    if problem:  # YAML escapes (`"\uD800"`, `"\0"`) or `.inf` the JSON body could not carry
        raise ApiError(
            400,
            INVALID_TEXT,
            f"the document {problem}",
            "playbooks are UTF-8 text without NUL characters, lone surrogates or .inf/.nan",
        )
    path = document_path(document)
    declared = document.get("kind") if isinstance(document, dict) else None
    kind = normalize_kind(declared if isinstance(declared, str) else resource_type)
    if kind == "credential":
        raise bad_request(
            f"'{path}' is a credential: the catalog keeps documents in clear text",
            "send it to POST /api/credentials, which encrypts the data",
            422,
        )
    program: bytes | None = None
    findings: list[dict[str, Any]] = []
    if kind == "playbook":
        if not isinstance(document, dict):
            raise ApiError(
                422,
                REFUSED_PLAYBOOK,
                f"register_resource: '{path}' is not a valid playbook: not a mapping",
                "a playbook is a YAML mapping with apiVersion, kind, metadata and workflow",
            )
        program, findings = compile_playbook(text, path)
    return catalog.register(path, kind, text, document, program, findings)


def check_text(text: str, what: str) -> None:
    problem = text_problem(text)
    if problem:
        raise ApiError(
            400,
            INVALID_TEXT,
            f"{what} has {problem}",
            "playbooks are UTF-8 text without NUL characters or lone surrogates",
        )


def nesting(value: Any, limit: int) -> int:
    """How deep `value` nests (counting stops past `limit`: no recursion on hostile input)."""
    deepest = 0
    seen: set[int] = set()  # YAML aliases share nodes: each is walked once
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list) and id(item) not in seen:
            seen.add(id(item))
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def public_entry(entry: dict[str, Any], *, with_findings: bool = True) -> dict[str, Any]:
    """A catalog entry as the API shows it (the program bytes are not shown)."""
    import datetime as dt

    created = dt.datetime.fromtimestamp(entry["created_at"], dt.UTC).isoformat()
    out = {
        "catalog_id": entry["catalog_id"],
        "path": entry["path"],
        "version": entry["version"],
        "kind": entry["kind"],
        "content": entry["content"],
        "layout": None,
        "payload": entry["payload"],
        "meta": {"registered_at": created},
        "created_at": created,
    }
    if with_findings:
        out["findings"] = entry["findings"]
    return out
