"""Service fixtures: the ASGI app over a fresh SQLite store, driven through httpx."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from noetlc.service.testing import asgi_client, settings_for


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'noetl.db'}"


@pytest.fixture
async def api(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(settings_for(db_url)) as client:
        yield client
