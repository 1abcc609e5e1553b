"""Serve the HTTP API, the playbook catalog, the credential store and the web console.

    noetl-vm serve [--host 127.0.0.1] [--port 8082] [--db URL] [--token T]
                   [--credential-key-file FILE] [--no-credential-values]

Embedded (default `--db sqlite:///.noetl/noetl.db`, or `memory:`): executions run in this
process. Distributed (`--db postgresql://...`): executions are offered to the `noetl-vm server`
and `worker` processes on that database; several `serve` processes can share it. The API needs
`Authorization: Bearer T` when a token is set (`--token` or `$NOETL_API_TOKEN`); without one the
service listens on loopback addresses only (NOE875). Credentials are encrypted with the key
from `$NOETL_CREDENTIAL_KEY` or `--credential-key-file` (NOE874 without one). OpenAPI at
`/docs`, the console at `/`.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys

from noetlc.cli.common import UsageError
from noetlc.runtime.store import DEFAULT_URL

TOKEN_ENV = "NOETL_API_TOKEN"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8082, help="port (8082)")
    p.add_argument(
        "--db",
        default=os.environ.get("NOETL_DB", DEFAULT_URL),
        metavar="URL",
        help=f"sqlite:///FILE, memory: or postgresql://... (default $NOETL_DB or {DEFAULT_URL})",
    )
    p.add_argument("--token", default=None, help=f"the API's bearer token (default ${TOKEN_ENV})")
    p.add_argument(
        "--credential-key-file",
        metavar="FILE",
        help="the credential key (32 bytes, base64 or hex; default $NOETL_CREDENTIAL_KEY)",
    )
    p.add_argument(
        "--no-credential-values",
        action="store_true",
        help="never return credential values (include_data=true gets 403)",
    )
    p.add_argument("--keychain", metavar="FILE", help="a keychain file for embedded executions")
    p.add_argument("--log-level", default="warning", help="uvicorn's log level (warning)")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    # first: without `noetlc[service]` the one message to see is NOE820, naming the extra
    import uvicorn

    from noetlc.service.app import create_app
    from noetlc.service.state import Settings

    token = args.token or os.environ.get(TOKEN_ENV) or None
    if not token and not is_loopback(args.host):
        raise UsageError(
            "NOE875",
            f"refusing to listen on {args.host} without a token",
            f"pass --token T (or set {TOKEN_ENV}); clients send `Authorization: Bearer T`",
        )
    from noetlc.runtime.credentials import load_key

    key = load_key(args.credential_key_file)  # NOE874 (a UserError) when there is none
    settings = Settings(
        db=args.db,
        token=token,
        credential_key=key,
        allow_credential_values=not args.no_credential_values,
        keychain_file=args.keychain,
    )
    app = create_app(settings)
    mode = "distributed" if args.db.startswith(("postgresql://", "postgres://")) else "embedded"
    print(
        f"noetl-vm serve: http://{args.host}:{args.port} ({mode}, {_display(args.db)})",
        file=sys.stderr,
        flush=True,
    )
    loop = "uvloop"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        loop = "asyncio"
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, loop=loop)
    return 0


def _display(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}@{host}"
    return url
