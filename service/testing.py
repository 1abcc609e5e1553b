"""Helpers for tests and benchmarks of the service: an httpx client over the ASGI app (no
socket), registering a playbook, waiting for an execution to end."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from noetlc.runtime.credentials import new_key, parse_key
from noetlc.service.app import create_app
from noetlc.service.state import Settings

TOKEN = "test-token-0123456789"


def b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def settings_for(db: str, **extra: Any) -> Settings:
    extra.setdefault("token", TOKEN)
    extra.setdefault("credential_key", parse_key(new_key(), "test"))
    extra.setdefault("allowed_hosts", ("testserver",))  # httpx's host name over ASGI
    extra.setdefault("allow_credential_values", True)
    return Settings(db=db, **extra)


@asynccontextmanager
async def asgi_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    headers = {"Authorization": f"Bearer {settings.token}"} if settings.token else {}
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers=headers
        ) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client
    finally:
        app.state.service.close()


async def register(api: httpx.AsyncClient, text: str) -> dict[str, Any]:
    reply = await api.post("/api/catalog/register", json={"content": b64(text)})
    if reply.status_code != 200:
        raise AssertionError(f"register: {reply.status_code} {reply.text}")
    result: dict[str, Any] = reply.json()
    return result


async def wait_done(
    api: httpx.AsyncClient, execution_id: str, timeout: float = 30
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        reply = await api.get(f"/api/executions/{execution_id}/status")
        status: dict[str, Any] = reply.json()
        if status.get("completed"):
            return status
        if loop.time() > deadline:
            raise AssertionError(f"execution {execution_id} did not end: {status}")
        await asyncio.sleep(0.02)
