"""The names of the standard tool kinds (the compiler's "tool kinds are known" check reads this)."""

from __future__ import annotations

TOOL_KINDS: tuple[str, ...] = (
    "noop",
    "python",
    "http",
    "postgres",
    "duckdb",
    "sqlite",
    "shell",
    "playbook",
    "workbook",
    "secrets",
)
