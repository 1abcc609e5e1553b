"""What one request may ask of the service: the defaults of `noetl-vm serve --max-...` and of
`Settings.limits`. A module of its own that imports nothing of the service, so the command
line reads the defaults from here without importing FastAPI (or needing it installed)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one request may ask of the service (docs/api.md, "Limits"); each is a
    `noetl-vm serve --max-...` flag."""

    body_bytes: int = 16 * 1024 * 1024
    yaml_bytes: int = 4 * 1024 * 1024
    yaml_depth: int = 64
    workload_bytes: int = 1024 * 1024
    page_size: int = 500
