"""What routes declare they need, so the OpenAPI schema states it: the service object
(`ServiceDep`), the bearer token (`bearer`: documents the scheme; service/guard.py enforces
it before any route runs), and the shapes of ids in paths."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPBearer
from starlette.convertors import Convertor, register_url_convertor

from noetlc.service.state import Service

ID_PATTERN = r"^[0-9]{1,20}$"

bearer = HTTPBearer(
    auto_error=False,
    description="the token `noetl-vm serve` was started with (NOETL_API_TOKEN or"
    " --token-file); `x-session-token: TOKEN` is accepted too",
)


async def get_service(request: Request) -> Service:
    """The service object. A coroutine, though it does no I/O: FastAPI runs a plain `def`
    dependency on its thread pool, one hand-off to a worker thread and back per request
    (py-spy: ~15 % of the service's CPU time under 1,000 sequential `POST /api/execute`,
    docs/performance.md); a coroutine is awaited on the event loop."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]
ExecutionId = Annotated[
    str, Path(pattern=ID_PATTERN, description="an execution id: a 64-bit snowflake in decimal")
]
CatalogId = Annotated[
    str, Path(pattern=ID_PATTERN, description="a catalog entry id: a snowflake in decimal")
]


class Digits(Convertor[str]):
    """`{execution_id:digits}`: only decimal ids match the route, so `/executions/cleanup`
    is the cleanup route's (405 for GET), not an execution id that fails validation."""

    regex = "[0-9]{1,20}"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return str(value)


register_url_convertor("digits", Digits())
