"""The service's front door: every request passes here before any route sees it.

In this order, each refusal a JSON body with a stable code (never a trace):

1. Host: only the names the service serves (loopback names and addresses by default, more
   with `--allowed-host`; `*` accepts any). A web page that rebinds its own DNS name to
   127.0.0.1 sends its own name as Host: 421 NOE877.
2. Origin: a request that changes state (not GET, HEAD or OPTIONS) from a browser page of
   another origin is refused: 403 NOE877. Browsers send `Origin` on such requests even as
   "simple" text/plain posts, so a page cannot drive the API through the operator's browser.
3. The bearer token, when the service has one: `Authorization: Bearer T` or
   `x-session-token: T`; `?token=T` only on the event stream (a browser's EventSource cannot
   set headers). 401 NOE870.
4. NUL or a lone surrogate in the path or query: 400 NOE879.
5. The body: at most `max_body_bytes` (413 NOE878); a JSON body is parsed strictly (no NaN
   or Infinity, no NUL, no lone surrogate in any string or key: 400 NOE879) before the route
   parses it again.

It is a plain ASGI middleware (not `@app.middleware`): it reads the body once, checks it and
hands the same bytes on, without buffering the streamed responses of the event route.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

from noetlc.service.errors import FOREIGN_ORIGIN, INVALID_TEXT, TOO_LARGE, UNAUTHORIZED

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = ("/api/health", "/health", "/", "/favicon.ico")
OPEN_PREFIXES = ("/static/", "/docs", "/openapi.json", "/redoc")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def is_loopback(host: str) -> bool:
    name = host.strip("[]").rstrip(".").lower()
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """The name of a Host header value or an origin's netloc, without the port."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


class HostPolicy:
    """Which Host names the service answers: loopback always, plus `allowed` (`*`: any)."""

    def __init__(self, allowed: Iterable[str]) -> None:
        names = {host_name(a) for a in allowed if a.strip()}
        self.any = "*" in names
        self.names = frozenset(names - {"*"})

    def allows(self, name: str) -> bool:
        return self.any or name in self.names or is_loopback(name)


def event_stream_path(path: str) -> bool:
    return path.startswith("/api/executions/") and path.endswith("/events")


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_hosts: Iterable[str],
        max_body_bytes: int,
    ) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.hosts = HostPolicy(allowed_hosts)
        self.max_body = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _reply(send, *refusal)
            return
        if scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        body, refusal = await self._body(receive, headers)
        if refusal is not None:
            await _reply(send, *refusal)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _refusal(
        self, scope: Scope, headers: dict[str, str]
    ) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        host = headers.get("host")
        if host is not None and not self.hosts.allows(host_name(host)):
            return (
                421,
                {
                    "detail": f"this service does not serve the host name {host_name(host)!r}",
                    "code": FOREIGN_ORIGIN,
                    "hint": "start `noetl-vm serve --allowed-host NAME` to serve that name",
                },
                {},
            )
        origin = headers.get("origin")
        if origin is not None and scope["method"] not in SAFE_METHODS:
            parsed = urlsplit(origin) if origin != "null" else None
            name = host_name(parsed.netloc) if parsed and parsed.netloc else ""
            if not name or not self.hosts.allows(name):
                return (
                    403,
                    {
                        "detail": f"a request from the page {origin!r} may not change this service",
                        "code": FOREIGN_ORIGIN,
                        "hint": "use the console the service serves, or a client that is no"
                        " browser page; `--allowed-host NAME` trusts another origin's host",
                    },
                    {},
                )
        path: str = scope["path"]
        if self.token is not None and not (path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)):
            given = _token_of(headers, scope, event_stream_path(path))
            if given is None or not secrets.compare_digest(given.encode(), self.token):
                return (
                    401,
                    {
                        "detail": "missing or wrong bearer token",
                        "code": UNAUTHORIZED,
                        "hint": "send `Authorization: Bearer TOKEN` (the token the service was"
                        " started with)",
                    },
                    {"WWW-Authenticate": "Bearer"},
                )
        raw_path = scope.get("raw_path") or path.encode("utf-8", "surrogatepass")
        for where, raw in (("path", raw_path), ("query", scope.get("query_string") or b"")):
            problem = bad_bytes(unquote_to_bytes(raw))
            if problem:
                return (
                    400,
                    {
                        "detail": f"the request's {where} has {problem}",
                        "code": INVALID_TEXT,
                        "hint": "names, ids and parameters are text without NUL characters",
                    },
                    {},
                )
        return None

    async def _body(
        self, receive: Receive, headers: dict[str, str]
    ) -> tuple[bytes, tuple[int, dict[str, Any], dict[str, str]] | None]:
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            return b"", self._too_large()
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return b"", self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and "json" in headers.get("content-type", "json").lower():
            problem = json_problem(body)
            if problem:
                return body, (
                    400,
                    {
                        "detail": f"the JSON body {problem}",
                        "code": INVALID_TEXT,
                        "hint": "send UTF-8 JSON without NaN/Infinity, NUL characters or lone"
                        " surrogates",
                    },
                    {},
                )
        return body, None

    def _too_large(self) -> tuple[int, dict[str, Any], dict[str, str]]:
        return (
            413,
            {
                "detail": f"the request body is larger than {self.max_body} bytes",
                "code": TOO_LARGE,
                "hint": "`noetl-vm serve --max-body-bytes N` raises the limit",
            },
            {},
        )


def _token_of(headers: dict[str, str], scope: Scope, query_allowed: bool) -> str | None:
    header = headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    session = headers.get("x-session-token")
    if session:
        return session.strip()
    if not query_allowed:
        return None
    from urllib.parse import parse_qs

    query = (scope.get("query_string") or b"").decode("latin-1")
    values = parse_qs(query).get("token")
    return values[0] if values else None


def bad_bytes(raw: bytes) -> str | None:
    """What makes raw request text unacceptable: NUL, or bytes that are no UTF-8 (a lone
    surrogate's encoding is no UTF-8)."""
    if b"\x00" in raw:
        return "a NUL character"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes that are not UTF-8 text (a lone surrogate?)"
    return None


def text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "a lone surrogate"
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"has {name}, which is not a JSON number")


def json_problem(body: bytes) -> str | None:
    """Why a JSON body cannot be stored and sent back, or None (malformed JSON is left to
    the route's own parser, which answers 422 with the location)."""
    problem = bad_bytes(body)
    if problem == "a NUL character":
        return "has a NUL character"
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except ValueError as exc:
        text = str(exc)
        return text if text.startswith("has ") else None
    return value_problem(value)


def value_problem(value: Any) -> str | None:
    """NUL, a lone surrogate or a non-finite number anywhere in a JSON-like value."""
    stack = [value]
    seen: set[int] = set()  # YAML aliases share nodes: each is walked once
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list | tuple):
            if id(item) in seen:
                continue
            seen.add(id(item))
        if isinstance(item, str):
            found = text_problem(item)
            if found:
                return f"has {found} in the text {item[:40]!r}"
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return f"has {item}, which is not a JSON number"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None


async def _reply(send: Send, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
    data = json.dumps(body).encode("utf-8")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})
