"""The `http` tool: one request with httpx; the result is NoETL's response envelope.

The result is `{status_code, headers, url, elapsed, data}` — the mapping NoETL's http tool
returns (noetl/noetl `noetl/tools/http/response.py`, `process_response`): `data` is the body,
`elapsed` the seconds the request took, so playbooks read `fetch.data.items`,
`response.data.paging.hasMore`, `_prev.data` as they do on NoETL.
`outcome.http = {status, headers, url, method}` too (header names lower-case). A JSON response
body is decoded; other text is a string; a binary body is base64 (`http.encoding: base64`).
A non-2xx answer is an error outcome (`HttpError`) that still carries `http` and the envelope
as the result; the error carries NoETL's fields (`noetl_fields`): `kind: tool_error`,
`code: HTTP_<status>`, `status_code` (and `http_status`), `source: http`, `retryable` for 429
and 5xx; noetlc's own `status` (the code), `body` (its start) and `category`: `rate_limit`
(429), `auth` (401/403), `not_found` (404), `client_error` (other 4xx), `server_error` (5xx),
`redirect`, `timeout` or `connection`. Timeouts and connection failures are retryable.

Bodies: `json:` is sent as JSON; `data:`/`payload:` as NoETL does — query parameters for GET,
HEAD, DELETE and OPTIONS, a JSON body otherwise; `body:` as raw text (a mapping or list as
JSON); `form:` form-encoded. `auth:` names a keychain entry: a string is a bearer token, a
mapping gives `token`, `username`/`password` (basic), `headers`, or `api_key` (+ `header`).
The timeout is `timeout:`, else `spec.timeout` (seconds, or `{connect, read, write, pool}`),
else 30 s. Clients are shared (connection pooling) and closed at exit. A call that can be
cancelled (the runtime gives it the action's cancel flag) runs on the tools' event loop: a
cancel cancels it at once (`Cancelled` error).
"""

from __future__ import annotations

import atexit
import base64
import json
import threading
from typing import Any

import httpx

from noetlc.stdlib_tools import aioloop
from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import HttpArgs, HttpTimeout

DEFAULT_TIMEOUT = 30.0
QUERY_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
TOOL_ERROR = "tool_error"  # NoETL's `error.kind` of every http error
TEXT_TYPES = ("text/", "json", "xml", "javascript", "x-www-form-urlencoded", "yaml", "csv")

_clients: dict[bool, httpx.Client] = {}
_clients_lock = threading.Lock()


class AuthSpecError(Exception):
    """The keychain entry named by `auth:` is not a usable HTTP credential."""


def run(
    args: HttpArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    headers = {str(k): "" if v is None else str(v) for k, v in (args.headers or {}).items()}
    params = dict(args.params or {})
    request: dict[str, Any] = {}
    try:
        basic = _apply_auth(args.auth, keychain, headers)
    except AuthSpecError as exc:
        return error("ToolArgumentError", str(exc))
    if basic is not None:
        request["auth"] = basic
    loose = args.data if args.data is not None else args.payload
    if loose is not None and args.method in QUERY_METHODS:
        if not isinstance(loose, dict):
            return error(
                "ToolArgumentError",
                f"`data:` of a {args.method} request becomes query parameters: give a mapping",
            )
        params.update(loose)
    elif loose is not None:
        _body(request, loose)
    elif args.json_body is not None:
        request["json"] = args.json_body
    elif args.body is not None:
        _body(request, args.body)
    elif args.form is not None:
        request["data"] = {k: "" if v is None else str(v) for k, v in args.form.items()}
    timeout = _timeout(args.timeout if args.timeout is not None else spec.get("timeout"))
    url = str(args.url)
    call: dict[str, Any] = {
        "params": params or None,
        "headers": headers,
        "timeout": timeout,
        "follow_redirects": args.follow_redirects,
        **request,
    }
    try:
        if ctx.cancelled is None:
            response = _client(args.verify).request(args.method, url, **call)
        else:
            # a cancellable call runs on the tools' event loop: a cancel cancels its task,
            # which closes the connection at once
            response = aioloop.run(
                _async_request(args.verify, args.method, url, call), None, ctx.cancelled
            )
    except aioloop.Cancelled:
        outcome = error("Cancelled", f"{args.method} {url}: the request was cancelled")
        outcome["http"] = {"status": None, "headers": {}, "url": url, "method": args.method}
        return outcome
    except httpx.TimeoutException as exc:
        return _transport_error("Timeout", "timeout", args.method, url, exc)
    except httpx.TransportError as exc:
        return _transport_error("ConnectionError", "connection", args.method, url, exc)
    except httpx.InvalidURL as exc:
        return error("ToolArgumentError", f"invalid URL {url!r}: {exc}")
    return _outcome(response, args.method)


def _body(request: dict[str, Any], value: Any) -> None:
    if isinstance(value, dict | list):
        request["json"] = value
    elif isinstance(value, bytes):
        request["content"] = value
    else:
        request["content"] = str(value).encode("utf-8")


def _apply_auth(
    auth: str | dict[str, Any] | None, keychain: Keychain, headers: dict[str, str]
) -> httpx.BasicAuth | None:
    if auth is None:
        return None
    value: Any = keychain.resolve(auth) if isinstance(auth, str) else auth
    if isinstance(value, dict) and set(value) <= {"credential", "key", "type"}:
        ref = value.get("credential") or value.get("key")
        if isinstance(ref, str):
            value = keychain.resolve(ref)
    if isinstance(value, str):
        headers.setdefault("Authorization", f"Bearer {value}")
        return None
    if isinstance(value, dict):
        token = value.get("token") or value.get("bearer") or value.get("access_token")
        if isinstance(value.get("headers"), dict):
            for k, v in value["headers"].items():
                headers.setdefault(str(k), str(v))
        if isinstance(token, str):
            headers.setdefault("Authorization", f"Bearer {token}")
        if isinstance(value.get("api_key"), str):
            headers.setdefault(str(value.get("header") or "X-API-Key"), value["api_key"])
        if value.get("username") is not None:
            return httpx.BasicAuth(str(value["username"]), str(value.get("password") or ""))
        if token or value.get("headers") or value.get("api_key"):
            return None
    named = f"keychain entry `{auth}`" if isinstance(auth, str) else "`auth:`"
    raise AuthSpecError(
        f"{named} is not an HTTP credential: give a token string, or a mapping with `token`, "
        "`username`/`password`, `headers` or `api_key`"
    )


def _timeout(value: Any) -> httpx.Timeout:
    if isinstance(value, HttpTimeout):
        value = value.model_dump()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return httpx.Timeout(float(value))
    if isinstance(value, dict):
        phases = {
            k: float(v)
            for k, v in value.items()
            if k in ("connect", "read", "write", "pool") and isinstance(v, int | float)
        }
        return httpx.Timeout(DEFAULT_TIMEOUT, **phases)
    return httpx.Timeout(DEFAULT_TIMEOUT)


def _client(verify: bool) -> httpx.Client:
    with _clients_lock:
        client = _clients.get(verify)
        if client is None or client.is_closed:
            client = httpx.Client(verify=verify)
            _clients[verify] = client
        return client


_async_clients: dict[bool, httpx.AsyncClient] = {}  # used on the tools' loop only


async def _async_request(
    verify: bool, method: str, url: str, call: dict[str, Any]
) -> httpx.Response:
    client = _async_clients.get(verify)
    if client is None or client.is_closed:
        client = _async_clients[verify] = httpx.AsyncClient(verify=verify)
        aioloop.on_close(client.aclose)
    return await client.request(method, url, **call)


def _close_clients() -> None:
    with _clients_lock:
        for client in _clients.values():
            client.close()
        _clients.clear()


atexit.register(_close_clients)


def _outcome(response: httpx.Response, method: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "status": response.status_code,
        "headers": dict(response.headers.items()),
        "url": str(response.url),
        "method": method,
    }
    body = _decode(response, info)
    envelope = {
        "status_code": response.status_code,
        "headers": info["headers"],
        "url": info["url"],
        "elapsed": _elapsed(response),
        "data": body,
    }
    if response.is_success:
        outcome = ok(envelope)
    else:
        status = response.status_code
        outcome = error(
            "HttpError",
            f"{method} {response.url} -> {status} {response.reason_phrase}".rstrip(),
            result=envelope,
            status=status,
            body=_excerpt(body),
            **noetl_fields(status),
            category=_classify(status),
        )
    outcome["http"] = info
    return outcome


BODY_EXCERPT = 1000  # characters of an error answer's body kept in the error itself


def _excerpt(body: Any) -> str | None:
    """The start of an error answer's body, as text (the whole body stays in `result`)."""
    if body is None:
        return None
    text = body if isinstance(body, str) else json.dumps(body, default=str, ensure_ascii=False)
    return text if len(text) <= BODY_EXCERPT else text[:BODY_EXCERPT] + "…"


def _elapsed(response: httpx.Response) -> float | None:
    try:
        return response.elapsed.total_seconds()
    except RuntimeError:  # a response that was never read through a client (tests)
        return None


def _decode(response: httpx.Response, info: dict[str, Any]) -> Any:
    if not response.content:
        return None
    ctype = response.headers.get("content-type", "").lower()
    if "json" in ctype:
        try:
            return response.json()
        except ValueError:
            return response.text
    if not ctype or any(t in ctype for t in TEXT_TYPES):
        return response.text
    info["encoding"] = "base64"
    return base64.b64encode(response.content).decode("ascii")


def _classify(status: int) -> str:
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status >= 500:
        return "server_error"
    if status >= 400:
        return "client_error"
    return "redirect"


def noetl_fields(status: int | None) -> dict[str, Any]:
    """The fields NoETL's task sequence gives an http error (noetl/noetl
    `noetl/worker/task_sequence_executor.py`: its http tool sets no `error_kind`, so every error
    is `kind: tool_error`, `code: HTTP_<status>`, `status_code`, retryable for 429 and 5xx;
    `http_status` and `source` are `noetl/core/errors.py` `ErrorInfo`'s names)."""
    fields: dict[str, Any] = {"kind": TOOL_ERROR, "source": "http"}
    if status is not None:
        fields.update(
            code=f"HTTP_{status}",
            status_code=status,
            http_status=status,
            retryable=status == 429 or status >= 500,
        )
    return fields


def _transport_error(
    type_: str, category: str, method: str, url: str, exc: Exception
) -> dict[str, Any]:
    message = f"{method} {url}: {str(exc) or type(exc).__name__}"
    outcome = error(type_, message, **noetl_fields(None), category=category, retryable=True)
    outcome["http"] = {"status": None, "headers": {}, "url": url, "method": method}
    return outcome
