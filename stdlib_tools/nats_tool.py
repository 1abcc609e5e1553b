"""The `nats` tool: publish, request, and JetStream key/value through nats-py.

`operation:` is `publish` (fire and forget on `subject:`), `request` (wait for one reply, within
`timeout:`, default 5 s), `kv_put`, `kv_get`, `kv_delete` or `kv_keys` on `bucket:` (`kv_put`
creates a missing bucket, with `ttl:` seconds as its entries' maximum age). Messages and values
that are mappings or lists are sent as JSON, text as UTF-8; what comes back is JSON-decoded when
it is JSON, else text.

The server: `url:` (or `servers:`), else the keychain entry named by `auth:` — a `nats://` URL,
or a mapping with `url`/`servers` (or `host` and `port`) and `user`/`password` or `token` —
else `nats://127.0.0.1:4222`. Connections are cached per server and closed at exit.

Results: publish `{subject, bytes}`; request `{subject, data, headers}`; kv_put `{bucket, key,
revision}`; kv_get `{bucket, key, value, revision, found}` (a missing key is `found: false`,
not an error); kv_delete `{bucket, key, deleted}`; kv_keys `{bucket, keys}`. Errors: no
connection (`ConnectionError`, retryable), no reply in time (`Timeout`, retryable), nobody
listening on a request's subject (`NoResponders`), a missing bucket (`NotFound`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from noetlc.stdlib_tools import aioloop
from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import NatsArgs

DEFAULT_URL = "nats://127.0.0.1:4222"
CONNECT_TIMEOUT = 5.0
REQUEST_TIMEOUT = 5.0
INSTALL_HINT = "pip install nats-py"

_connections: dict[str, Any] = {}
_locks: dict[str, asyncio.Lock] = {}


class NatsSpecError(Exception):
    """`auth:` does not describe a NATS server."""


def run(
    args: NatsArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    try:
        import nats  # noqa: F401  (the optional client)
    except ImportError:
        return error(
            "ToolUnavailable", "the nats tool needs the nats-py package", hint=INSTALL_HINT
        )
    try:
        options = server_of(args, keychain)
    except NatsSpecError as exc:
        return error("ToolArgumentError", str(exc))
    timeout = args.timeout if args.timeout is not None else _number(spec.get("timeout"))
    from nats import errors as nats_errors
    from nats.js import errors as js_errors

    try:
        result = aioloop.run(_operate(args, options, timeout), _overall(timeout))
    except nats_errors.NoRespondersError:
        return error("NoResponders", f"nobody listens on subject `{args.subject}`")
    except (nats_errors.TimeoutError, TimeoutError):
        return error(
            "Timeout", f"no answer from NATS within {_overall(timeout):g} s", retryable=True
        )
    except js_errors.BucketNotFoundError:
        return error("NotFound", f"there is no key/value bucket `{args.bucket}`")
    except js_errors.ServiceUnavailableError as exc:
        return error("JetStreamUnavailable", f"JetStream is not enabled on the server: {exc}")
    except (OSError, nats_errors.NoServersError, nats_errors.ConnectionClosedError) as exc:
        return error(
            "ConnectionError",
            f"cannot connect to NATS at {', '.join(options['servers'])}: {exc}",
            retryable=True,
        )
    except nats_errors.Error as exc:
        return error(type(exc).__name__, str(exc) or type(exc).__name__)
    return ok(result)


def server_of(args: NatsArgs, keychain: Keychain) -> dict[str, Any]:
    """nats.connect options from `url:` or the keychain entry named by `auth:`."""
    if args.url is not None:
        return {"servers": [args.url] if isinstance(args.url, str) else list(args.url)}
    auth = args.auth
    if auth is None:
        return {"servers": [DEFAULT_URL]}
    if isinstance(auth, str) and auth.startswith(("nats://", "tls://", "ws://", "wss://")):
        return {"servers": [auth]}
    value: Any = keychain.resolve(auth) if isinstance(auth, str) else auth
    if isinstance(value, str) and "://" in value:
        return {"servers": [value]}
    if isinstance(value, dict):
        servers = value.get("servers") or value.get("url") or value.get("nats_url")
        if servers is None and value.get("host"):
            servers = f"nats://{value['host']}:{value.get('port') or 4222}"
        options: dict[str, Any] = {
            "servers": [servers] if isinstance(servers, str) else list(servers or [DEFAULT_URL])
        }
        user = value.get("user") or value.get("username")
        if user is not None:
            options["user"] = str(user)
            options["password"] = str(value.get("password") or "")
        if value.get("token") is not None:
            options["token"] = str(value["token"])
        return options
    named = f"keychain entry `{auth}`" if isinstance(auth, str) else "`auth:`"
    raise NatsSpecError(
        f"{named} is not a NATS server: give a nats:// URL or a mapping with url (or host and "
        "port) and user/password or token"
    )


def _overall(timeout: float | None) -> float:
    return (timeout or REQUEST_TIMEOUT) + CONNECT_TIMEOUT


def _encode(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, default=str).encode("utf-8")


def _decode(data: bytes | None) -> Any:
    if not data:
        return None
    text = data.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


async def _operate(args: NatsArgs, options: dict[str, Any], timeout: float | None) -> Any:
    nc = await _connection(options)
    op = args.operation
    if op == "publish":
        payload = _encode(args.data)
        await nc.publish(str(args.subject), payload, headers=args.headers)
        await nc.flush(timeout=timeout or REQUEST_TIMEOUT)
        return {"subject": args.subject, "bytes": len(payload)}
    if op == "request":
        reply = await nc.request(
            str(args.subject),
            _encode(args.data),
            timeout=timeout or REQUEST_TIMEOUT,
            headers=args.headers,
        )
        return {"subject": args.subject, "data": _decode(reply.data), "headers": reply.headers}
    return await _kv(nc, args)


async def _kv(nc: Any, args: NatsArgs) -> Any:
    from nats.js import errors as js_errors
    from nats.js.api import KeyValueConfig

    js = nc.jetstream()
    bucket, key, op = str(args.bucket), str(args.key), args.operation
    try:
        kv = await js.key_value(bucket)
    except js_errors.BucketNotFoundError:
        if op != "kv_put":
            raise
        config = KeyValueConfig(bucket=bucket, ttl=args.ttl)
        kv = await js.create_key_value(config=config)
    if op == "kv_put":
        revision = await kv.put(key, _encode(args.value))
        return {"bucket": bucket, "key": key, "revision": revision}
    if op == "kv_get":
        try:
            entry = await kv.get(key)
        except js_errors.KeyNotFoundError:
            return {"bucket": bucket, "key": key, "value": None, "revision": None, "found": False}
        return {
            "bucket": bucket,
            "key": key,
            "value": _decode(entry.value),
            "revision": entry.revision,
            "found": True,
        }
    if op == "kv_delete":
        await kv.delete(key)
        return {"bucket": bucket, "key": key, "deleted": True}
    try:
        keys = await kv.keys()
    except js_errors.NoKeysError:
        keys = []
    return {"bucket": bucket, "keys": sorted(keys)}


async def _connection(options: dict[str, Any]) -> Any:
    import nats

    key = json.dumps(options, sort_keys=True)
    nc = _connections.get(key)
    if nc is not None and not nc.is_closed:
        return nc
    lock = _locks.setdefault(key, asyncio.Lock())
    async with lock:
        nc = _connections.get(key)
        if nc is None or nc.is_closed:
            nc = await nats.connect(
                **options,
                connect_timeout=CONNECT_TIMEOUT,
                # one quick try: an unreachable server is the task's ConnectionError at once
                # (a dropped connection is noticed by `is_closed` and made again next call)
                max_reconnect_attempts=1,
                reconnect_time_wait=0.1,
                error_cb=_quiet,
            )
            _connections[key] = nc
            aioloop.on_close(lambda: _close(key))
    return nc


async def _quiet(exc: Exception) -> None:
    """Connection errors reach the task as its outcome; the client's own logging stays off."""


async def _close(key: str) -> None:
    nc = _connections.pop(key, None)
    _locks.pop(key, None)
    if nc is not None and not nc.is_closed:
        await nc.close()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
