"""PostgreSQL URLs, connections and pools, with every failure turned into one exception type.

A URL is `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME&connect_timeout=S]`;
`schema` (ours) puts every noetl table in that schema (it becomes the connection's
search_path), `connect_timeout` bounds connecting, `application_name` (default `noetl`) names
the connections in `pg_stat_activity`; the other query options are asyncpg's (sslmode, ...). Anything that goes wrong while connecting raises `DatabaseError` with a stable
NOE8xx code and a hint, which the command line prints without a traceback.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from noetlc.runtime.postgres.errors import DatabaseError

T = TypeVar("T")

SCHEMES = ("postgresql", "postgres")
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_APPLICATION_NAME = "noetl"
# asyncpg's own DSN options; anything else in the query string is a mistake (NOE806).
_ASYNCPG_OPTIONS = frozenset(
    [
        "service",
        "port",
        "host",
        "dbname",
        "database",
        "user",
        "password",
        "passfile",
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslcrl",
        "sslpassword",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "target_session_attrs",
        "krbsrvname",
        "gsslib",
    ]
)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

# Errors that mean "the connection is gone": the operation may be retried on a new one.
TRANSIENT: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.ConnectionFailureError,
    asyncpg.InterfaceError,
    # a pooled connection whose backend was terminated mid-operation can surface as a
    # protocol-state error on its next use (MagicStack/asyncpg#1069); a retry gets a fresh one
    asyncpg.InternalClientError,
)


@dataclass(frozen=True, slots=True)
class PgUrl:
    """A parsed URL: `dsn` is what asyncpg gets; `schema` is ours."""

    dsn: str
    schema: str
    connect_timeout: float
    display: str  # the URL with the password masked, for messages
    application_name: str = DEFAULT_APPLICATION_NAME


def is_postgres_url(url: str) -> bool:
    return url.split(":", 1)[0].lower() in SCHEMES


def parse_url(url: str) -> PgUrl:
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a non-numeric port
    except ValueError as exc:
        raise _bad_url(url, str(exc)) from None
    if parts.scheme.lower() not in SCHEMES:
        given = f"it starts with {parts.scheme}://" if parts.scheme else "it has no scheme"
        raise _bad_url(url, f"a PostgreSQL URL starts with postgresql://, and {given}")
    if not parts.hostname and "host" not in dict(parse_qsl(parts.query)):
        raise _bad_url(url, "no host")
    if port is not None and not 0 < port < 65536:
        raise _bad_url(url, f"port {port} is out of range")
    schema = "public"
    timeout = DEFAULT_CONNECT_TIMEOUT
    application_name = DEFAULT_APPLICATION_NAME
    kept: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "schema":
            if not _IDENTIFIER.match(value):
                raise _bad_url(url, f"schema {value!r} is not a plain identifier")
            schema = value
        elif key == "connect_timeout":
            try:
                timeout = float(value)
            except ValueError:
                raise _bad_url(url, f"connect_timeout {value!r} is not a number") from None
            if timeout <= 0:
                raise _bad_url(url, "connect_timeout must be positive")
        elif key == "application_name":
            application_name = value  # a startup setting: see _server_settings
        elif key in _ASYNCPG_OPTIONS:
            kept.append((key, value))
        else:
            raise _bad_url(url, f"unknown option {key!r}")
    dsn = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(kept), ""))
    return PgUrl(dsn, schema, timeout, mask_password(url), application_name)


def mask_password(url: str) -> str:
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def _bad_url(url: str, reason: str) -> DatabaseError:
    return DatabaseError(
        "NOE806",
        f"malformed PostgreSQL URL {mask_password(url)}: {reason}",
        "use postgresql://USER@HOST:PORT/DATABASE[?schema=NAME]",
    )


def connection_error(url: PgUrl, exc: BaseException) -> DatabaseError:
    """Map whatever connecting raised onto our codes."""
    where = url.display
    if isinstance(exc, DatabaseError):
        return exc
    if isinstance(exc, socket.gaierror):
        return DatabaseError(
            "NOE805",
            f"cannot reach PostgreSQL at {where}: unknown host ({exc.strerror or exc})",
            "check the host name in the URL",
        )
    if isinstance(exc, TimeoutError):
        return DatabaseError(
            "NOE805",
            f"cannot reach PostgreSQL at {where}: no answer within {url.connect_timeout:g} s",
            "check that PostgreSQL is running and reachable (raise ?connect_timeout=S if slow)",
        )
    if isinstance(exc, (OSError, asyncpg.CannotConnectNowError, asyncpg.ConnectionFailureError)):
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return DatabaseError(
            "NOE805",
            f"cannot reach PostgreSQL at {where}: {reason}",
            "check that PostgreSQL is running and that host and port in the URL are right",
        )
    if isinstance(exc, (asyncpg.ClientConfigurationError, ValueError)):
        return _bad_url(where, str(exc))
    if isinstance(exc, asyncpg.PostgresError):
        return DatabaseError(
            "NOE807",
            f"PostgreSQL at {where} refused: {exc}",
            "check the user, password and database name in the URL",
        )
    if isinstance(exc, asyncpg.InterfaceError):
        return DatabaseError(
            "NOE805",
            f"lost the connection to PostgreSQL at {where}: {exc}",
            "check that PostgreSQL is running",
        )
    return DatabaseError(
        "NOE805", f"cannot connect to PostgreSQL at {where}: {type(exc).__name__}: {exc}", None
    )


def _server_settings(url: PgUrl) -> dict[str, str]:
    # these win over the DSN's query options in asyncpg, so the URL's application_name is
    # passed here rather than left in the DSN (where it would be overridden)
    return {"search_path": url.schema, "application_name": url.application_name}


async def connect(url: str | PgUrl) -> asyncpg.Connection:
    """One connection (migrations, LISTEN); raises DatabaseError."""
    parsed = parse_url(url) if isinstance(url, str) else url
    try:
        return await asyncpg.connect(
            parsed.dsn, timeout=parsed.connect_timeout, server_settings=_server_settings(parsed)
        )
    except Exception as exc:
        raise connection_error(parsed, exc) from None


async def create_pool(
    url: str | PgUrl,
    *,
    min_size: int = 1,
    max_size: int = 10,
    init: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
    keep_session: bool = False,
) -> asyncpg.Pool:
    """A pool that replaces broken connections on acquire (`init` runs on each new one);
    raises DatabaseError. `keep_session`: a connection goes back to the pool without
    asyncpg's reset statement (`rollback_only`) — for callers that leave no session state."""
    parsed = parse_url(url) if isinstance(url, str) else url
    try:
        pool = await asyncpg.create_pool(
            parsed.dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=parsed.connect_timeout,
            server_settings=_server_settings(parsed),
            init=init,
            reset=rollback_only if keep_session else None,
        )
    except Exception as exc:
        raise connection_error(parsed, exc) from None
    assert pool is not None
    return pool


async def rollback_only(conn: asyncpg.Connection) -> None:
    """A pool's reset for the store's connections: an open transaction is rolled back, and
    nothing else is sent. asyncpg's default (advisory unlock, CLOSE ALL, UNLISTEN *, RESET
    ALL) is a round trip on every release, and the store leaves no state it would clear:
    LISTEN and the migration lock have their own connections, settings are `SET LOCAL`,
    cursors and locks end with their transactions."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


async def with_retry(
    url: PgUrl, operation: Callable[[], Awaitable[T]], *, attempts: int = 5, delay: float = 0.1
) -> T:
    """Run `operation` (which acquires its own connection), retrying when the connection is
    lost — a restarted server or a terminated backend. Only for idempotent operations."""
    for attempt in range(1, attempts + 1):
        try:
            return await operation()
        except TRANSIENT as exc:
            if attempt == attempts:
                raise connection_error(url, exc) from None
            await asyncio.sleep(delay * attempt)
    raise AssertionError("unreachable")


def row_dict(record: Any) -> dict[str, Any]:
    return dict(record.items())
