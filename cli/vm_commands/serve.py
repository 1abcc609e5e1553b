"""Serve the HTTP API, the playbook catalog, the credential store and the web console.

    noetl-vm serve [--host 127.0.0.1] [--port 8082] [--db URL] [--token-file FILE]
                   [--allowed-host NAME]... [--credential-key-file FILE] [--credential-values]

Embedded (default `--db sqlite:///.noetl/noetl.db`, or `memory:`): executions run in this
process, task code in child processes. Distributed (`--db postgresql://...`): executions are
offered to the `noetl-vm server` and `worker` processes on that database; several `serve`
processes can share it. The API needs `Authorization: Bearer T` when a token is set
(`$NOETL_API_TOKEN`, `--token-file FILE`; `--token T` works but shows T in the process list);
without one the service listens on loopback addresses only (NOE875). Only the Host names it
serves are answered (loopback names, plus `--allowed-host`). Credentials are encrypted with the
key from `--credential-key-file` or `$NOETL_CREDENTIAL_KEY`; without either, the first start
creates a key file beside the store and says where. OpenAPI at `/docs`, the console at `/`.
Operator errors and their exit codes: README, "noetl-vm serve: errors".
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any

from noetlc.cli.common import UnavailableError, UsageError
from noetlc.cli.vm_commands import isolate
from noetlc.runtime.event_store import DEFAULT_URL, ensure_sqlite_folder
from noetlc.service.limits import Limits

TOKEN_ENV = "NOETL_API_TOKEN"
MIN_TOKEN = 16
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
KEY_FILE = "credential.key"

LIMITS = Limits()  # the flags' defaults


def _mib(n: int) -> str:
    return f"{n / 1024**2:g} MiB"


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"must be a number from 1 to 65535, got {text!r}")
    return int(text)


def _positive(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return int(text)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=_port, default=8082, help="port, 1 to 65535 (8082)")
    p.add_argument(
        "--db",
        default=os.environ.get("NOETL_DB", DEFAULT_URL),
        metavar="URL",
        help=f"sqlite:///FILE, memory: or postgresql://... (default $NOETL_DB or {DEFAULT_URL})",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"a file holding the API's bearer token (or ${TOKEN_ENV})",
    )
    p.add_argument(
        "--token",
        default=None,
        help=f"the bearer token (visible in the process list: prefer --token-file or ${TOKEN_ENV})",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name to serve besides the loopback names (repeatable; * for any)",
    )
    p.add_argument(
        "--credential-key-file",
        metavar="FILE",
        help="the credential key (32 bytes, base64 or hex; default $NOETL_CREDENTIAL_KEY, else"
        f" {KEY_FILE} beside the store, created on the first start)",
    )
    p.add_argument(
        "--credential-values",
        action="store_true",
        help="let GET /api/credentials/NAME?include_data=true return values (off: 403)",
    )
    p.add_argument(
        "--no-credential-values",
        action="store_true",
        help="never return credential values (the default; kept for older scripts)",
    )
    p.add_argument("--keychain", metavar="FILE", help="a keychain file for embedded executions")
    p.add_argument(
        "--log-level", choices=LOG_LEVELS, default="warning", help="uvicorn's log level (warning)"
    )
    p.add_argument(
        "--max-body-bytes",
        type=_positive,
        default=LIMITS.body_bytes,
        metavar="N",
        help=f"largest request body ({_mib(LIMITS.body_bytes)}; over it: 413 NOE878)",
    )
    p.add_argument(
        "--max-yaml-bytes",
        type=_positive,
        default=LIMITS.yaml_bytes,
        metavar="N",
        help=f"largest registered document ({_mib(LIMITS.yaml_bytes)})",
    )
    p.add_argument(
        "--max-yaml-depth",
        type=_positive,
        default=LIMITS.yaml_depth,
        metavar="N",
        help=f"deepest nesting of a registered document ({LIMITS.yaml_depth})",
    )
    p.add_argument(
        "--max-workload-bytes",
        type=_positive,
        default=LIMITS.workload_bytes,
        metavar="N",
        help=f"largest workload of one execution, as JSON ({_mib(LIMITS.workload_bytes)})",
    )
    p.add_argument(
        "--max-page-size",
        type=_positive,
        default=LIMITS.page_size,
        metavar="N",
        help=f"largest page a list route returns ({LIMITS.page_size}; 100 unless asked)",
    )
    isolate.add_arguments(p)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(args: argparse.Namespace) -> str | None:
    """The token from `--token-file`, `--token` or the environment; NOE882 when blank or
    shorter than MIN_TOKEN characters."""
    where = f"${TOKEN_ENV}"
    token = os.environ.get(TOKEN_ENV)
    if args.token is not None:
        token, where = args.token, "--token"
        print(
            "noetl-vm serve: warning: --token shows the token to anyone who lists processes;"
            f" use --token-file FILE or ${TOKEN_ENV}",
            file=sys.stderr,
        )
    if args.token_file:
        try:
            token = Path(args.token_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(
                "NOE882", f"cannot read --token-file {args.token_file}: {exc}"
            ) from None
        where = args.token_file
    if token is None:
        return None
    token = token.strip()
    problem = None
    if not token:
        problem = "blank"
    elif not token.isprintable() or not token.isascii():
        problem = "not printable ASCII"
    elif len(token) < MIN_TOKEN:
        problem = f"{len(token)} characters, shorter than {MIN_TOKEN}"
    if problem:
        raise UsageError(
            "NOE882",
            f"the API token from {where} is {problem}",
            'make one with `python -c "import secrets;print(secrets.token_urlsafe(32))"`',
        )
    return token


def store_key_file(db: str) -> Path | None:
    """Where the first start keeps the credential key: beside a SQLite store, else in
    `.noetl/` of the working directory (PostgreSQL; its workers need the same key); None for
    `memory:`."""
    if db.startswith("sqlite:///"):
        return Path(db[len("sqlite:///") :]).expanduser().resolve().parent / KEY_FILE
    if db.startswith(("postgresql://", "postgres://")):
        return Path(".noetl").resolve() / KEY_FILE
    return None


def the_key(args: argparse.Namespace) -> tuple[bytes, str, str]:
    """(key, where it came from, a sentence to print): flag, environment, the key file beside
    the store, or a new key written there (0600)."""
    from noetlc.runtime.credentials import KEY_ENV, load_key, new_key, parse_key

    if args.credential_key_file or os.environ.get(KEY_ENV):
        where = args.credential_key_file or f"${KEY_ENV}"
        return load_key(args.credential_key_file), where, f"credential key from {where}"
    path = store_key_file(args.db)
    if path is None:  # memory: nothing outlives the process, so neither may the key
        note = "credential key: a new one for this process"
        return parse_key(new_key(), "a new key"), "a new key for this process", note
    if path.is_file():
        return load_key(str(path)), str(path), f"credential key from {path}"
    if args.db.startswith("sqlite:///"):
        # the store's rule, checked before the key is written: a mistyped --db folder is
        # NOE803 whether or not a key was given, never a folder made for the key
        ensure_sqlite_folder(str(Path(args.db[len("sqlite:///") :]).expanduser()))
    try:
        path.parent.mkdir(exist_ok=True)  # `.noetl/` of the working directory at most
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return load_key(str(path)), str(path), f"credential key from {path}"
    except OSError as exc:
        raise UnavailableError(
            "NOE874",
            f"no credential key, and none can be created at {path}: {exc}",
            f"set {KEY_ENV} or pass --credential-key-file FILE",
        ) from None
    text = new_key()
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return (
        parse_key(text, str(path)),
        str(path),
        f"credential key: created {path} (0600); keep it with the store — credentials"
        " stored under it cannot be read without it",
    )


def listen(host: str, port: int) -> Any:
    """The listening socket, bound here so a port in use is our coded error (NOE880)."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        why = {
            errno.EADDRINUSE: "the port is in use (another noetl-vm serve?)",
            errno.EACCES: "permission denied (ports below 1024 need privileges)",
            errno.EADDRNOTAVAIL: "this machine has no such address",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise UnavailableError(
            "NOE880",
            f"cannot listen on {host}:{port}: {why}",
            "pick another --port (or --host), or stop the process that holds it",
        ) from None
    except socket.gaierror as exc:
        sock.close()
        raise UnavailableError("NOE880", f"cannot listen on {host}:{port}: {exc}") from None
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def lock_store(db: str) -> Any:
    """One `serve` per SQLite store: an exclusive lock on `FILE.serve.lock` held while this
    process runs; a second `serve` on the same file is refused (NOE881). PostgreSQL stores
    are meant to be shared, and `memory:` is private."""
    if not db.startswith("sqlite:///"):
        return None
    import fcntl

    path = Path(db[len("sqlite:///") :]).expanduser()
    ensure_sqlite_folder(str(path))  # a mistyped folder is NOE803, not created
    lock_path = path.with_name(path.name + ".serve.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 64).decode("ascii", "replace").strip() or "another process"
        os.close(fd)
        raise UnavailableError(
            "NOE881",
            f"another noetl-vm serve (pid {holder}) already serves {path}",
            "use that service, stop it first, or give this one another --db",
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def run(args: argparse.Namespace) -> int:
    # first: without `noetlc[service]` the one message to see is NOE820, naming the extra
    import uvicorn

    from noetlc.service.app import create_app
    from noetlc.service.state import Settings

    token = read_token(args)
    if not token and not is_loopback(args.host):
        raise UsageError(
            "NOE875",
            f"refusing to listen on {args.host} without a token",
            f"set {TOKEN_ENV} (or pass --token-file FILE); clients send `Authorization: Bearer T`",
        )
    if args.credential_values and args.no_credential_values:
        raise UsageError("NOE800", "--credential-values and --no-credential-values contradict")
    allowed = list(args.allowed_host)
    if not is_loopback(args.host) and args.host not in ("0.0.0.0", "::", "[::]"):
        allowed.append(args.host)  # the address it listens on is a name it serves
    key, key_source, key_note = the_key(args)
    sock = listen(args.host, args.port)
    lock = lock_store(args.db)
    before = isolate.start(args, [token] if token else [])
    os.environ.pop(TOKEN_ENV, None)
    from noetlc.runtime.credentials import KEY_ENV

    os.environ.pop(KEY_ENV, None)
    settings = Settings(
        db=args.db,
        token=token,
        credential_key=key,
        key_source=key_source,
        allow_credential_values=args.credential_values,
        keychain_file=args.keychain,
        allowed_hosts=tuple(allowed),
        limits=Limits(
            body_bytes=args.max_body_bytes,
            yaml_bytes=args.max_yaml_bytes,
            yaml_depth=args.max_yaml_depth,
            workload_bytes=args.max_workload_bytes,
            page_size=args.max_page_size,
        ),
    )
    app = create_app(settings)
    mode = "distributed" if args.db.startswith(("postgresql://", "postgres://")) else "embedded"
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"noetl-vm serve: http://{shown}:{args.port} ({mode}, {_display(args.db)}); {key_note}",
        file=sys.stderr,
        flush=True,
    )
    loop = "uvloop"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        loop = "asyncio"
    config = uvicorn.Config(app, log_level=args.log_level, loop=loop)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        if lock is not None:
            os.close(lock)
        isolate.stop(before)
    return 0


def _display(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}@{host}"
    return url
