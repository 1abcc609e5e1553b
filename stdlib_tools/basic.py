"""The former entry point of the tools, kept so existing callers keep working.

`call_tool(kind, args, spec)` is `registry.call_tool` without a context (default keychain,
the working directory as the playbook folder, no child playbooks).
"""

from __future__ import annotations

from typing import Any

from noetlc.stdlib_tools.registry import call_tool as _call_tool


def call_tool(kind: str, args: dict[str, Any], spec: dict[str, Any] | None) -> dict[str, Any]:
    return _call_tool(kind, args, spec)
