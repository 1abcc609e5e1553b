"""The FastAPI application of `noetl-vm serve`.

    from noetlc.service.app import create_app
    app = create_app(Settings(db="memory:", token="t", credential_key=key))

Access (service/guard.py): the Host and Origin checks, then, with a token set, every route but
`/api/health`, `/health` and the console's static files needs `Authorization: Bearer TOKEN`
(or `x-session-token: TOKEN`, which NoETL clients also send; only the event stream may pass
`?token=`); otherwise 401 NOE870; then the body limit and strict JSON. Errors are
JSON with a stable code (service/errors.py); a request the schema refuses is 422 NOE872; an
unknown route 404 NOE871; a user error raised below the routes the status of its kind
(`http_status_for`: the table the command lines' exit codes come from too); a bug 500 NOE900
without a trace.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from noetlc import __version__
from noetlc.diagnostics.errors import OUTCOMES, ErrorKind, UserError
from noetlc.runtime.event_store import store_error_of
from noetlc.service import (
    routes_catalog,
    routes_console,
    routes_credentials,
    routes_executions,
    routes_misc,
    routes_noetl,
)
from noetlc.service.errors import BAD_REQUEST, NOT_FOUND, ApiError
from noetlc.service.state import Service, Settings


def create_app(settings: Settings, service: Service | None = None) -> FastAPI:
    opened = service if service is not None else Service.open(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        yield
        opened.close()

    app = FastAPI(
        title="noetlc service",
        version=__version__,
        description="The NoETL-compatible HTTP API of `noetl-vm serve`.",
        lifespan=lifespan,
    )
    app.state.service = opened
    from noetlc.service.guard import Guard

    app.add_middleware(
        Guard,
        token=settings.token,
        allowed_hosts=settings.allowed_hosts,
        max_body_bytes=settings.limits.body_bytes,
    )

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{k: v for k, v in e.items() if k in ("type", "loc", "msg")} for e in exc.errors()]
        return JSONResponse({"detail": errors, "code": BAD_REQUEST}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = NOT_FOUND if exc.status_code == 404 else BAD_REQUEST
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:  # every method of every route of this path, not the first's
            headers["Allow"] = ", ".join(allowed_methods(app, request.url.path))
        return JSONResponse(
            {"detail": exc.detail, "code": code}, status_code=exc.status_code, headers=headers
        )

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        exc = store_error_of(exc) or exc  # a SQLite store the user can fix: NOE814
        code = getattr(exc, "code", None)
        if isinstance(code, str) and code.startswith("NOE"):  # a user error from below
            return JSONResponse(
                {"detail": str(exc), "code": code, "hint": getattr(exc, "hint", None)},
                status_code=http_status_for(exc),
            )
        return JSONResponse(
            {"detail": f"internal error: {type(exc).__name__}: {exc}", "code": "NOE900"},
            status_code=500,
        )

    for module in (
        routes_misc,
        routes_catalog,
        routes_executions,
        routes_credentials,
        routes_console,
        routes_noetl,
    ):
        app.include_router(module.router)
    _mount_console(app)
    return app


def http_status_for(exc: Exception) -> int:
    """The status of a user error raised below the routes: its kind's (diagnostics/errors.py);
    anything else carrying a NOE code is an input error."""
    kind = exc.kind if isinstance(exc, UserError) else ErrorKind.INPUT
    return OUTCOMES[kind].http_status


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    from starlette.routing import Match, Route

    methods: set[str] = set()
    scope = {"type": "http", "path": path, "method": "GET"}
    for route in app.router.routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches(scope)
            if match != Match.NONE:
                methods |= route.methods
    return sorted(methods)


def _mount_console(app: FastAPI) -> None:
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles

    folder = resources.files("noetlc.service").joinpath("static")
    app.mount("/static", StaticFiles(directory=str(folder)), name="static")

    @app.get("/", include_in_schema=False)
    def console() -> HTMLResponse:
        return HTMLResponse(folder.joinpath("index.html").read_text(encoding="utf-8"))
