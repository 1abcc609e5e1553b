"""The keychain: credentials a playbook declares by name, resolved from providers, and redacted.

A playbook declares entries at the root (`keychain: [{name: pg_main, kind: postgres_credential,
...}]`); tools name them (`auth: pg_main`). Values come from, in order:

1. the environment: `NOETL_KEYCHAIN_<NAME>` (name upper-cased, other characters -> `_`); a
   value starting with `{`, `[` or `"` is JSON, anything else is the plain string;
2. a provider the runtime passes (`noetl-vm serve`: the service's encrypted credential store,
   by entry name; each value it gives is asked for once per keychain);
3. a file: `--keychain FILE` (YAML or JSON mapping name -> value), else `.noetl/keychain.yaml`
   in the working directory when it exists.

Extra fields of a declaration (`host`, `port`, ...) are defaults under a mapping value: they are
written in the playbook, so they are not secret. Of a value a provider gave, the secret parts
are (`secret_parts`): a plain string (a URL: its password alone), and in a mapping the fields
named like a secret (password, token, key, secret, private key...) and the password of a URL
inside; user, host, port and database names are not. `redact` replaces each secret of 4
characters or more, in its plain, URL-encoded, base64 and JSON-escaped forms, by `"***"`
wherever it occurs (secrets shorter than 4 characters only where a whole string equals them,
so a one-letter secret does not blank every text).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from noetlc.diagnostics.errors import ErrorKind, UserError

DEFAULT_FILE = Path(".noetl") / "keychain.yaml"
ENV_PREFIX = "NOETL_KEYCHAIN_"
MASK = "***"
MIN_SUBSTRING = 4
MIN_NUMBER = 6  # characters of a secret number's text (`98765` is not masked, `987654` is)


class KeychainError(UserError):
    """A user-fixable keychain problem with a stable NOE8xx code and a hint."""

    kind = ErrorKind.USAGE


def env_var(name: str) -> str:
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _parse_env_value(text: str) -> Any:
    if text[:1] in '{["':
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def load_file(path: str | Path) -> dict[str, Any]:
    """A keychain file: a YAML/JSON mapping name -> value (NOE813 when unreadable or invalid)."""
    p = Path(path)
    hint = "the file must be a YAML or JSON mapping: `pg_main: postgresql://user:pw@host/db`"
    # only when there is a file to read: the YAML reader stays out of runs without one
    from noetlc.diagnostics.yaml_safe import YamlError, read_data_file

    try:
        data = read_data_file(p, "keychain file")
    except YamlError as exc:
        raise KeychainError(
            "NOE813",
            f"keychain file {exc.file}:{exc.line}:{exc.column}"
            + (" is not valid YAML: " if exc.code == "NOE001" else ": ")
            + exc.problem,
            hint,
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KeychainError(
            "NOE813", f"keychain file {p} must be a mapping, not {type(data).__name__}", hint
        )
    return {str(k): v for k, v in data.items()}


class Keychain:
    def __init__(
        self,
        declared: Iterable[Mapping[str, Any]] = (),
        *,
        file: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        provider: Callable[[str], Any] | None = None,
        no_file: bool = False,
    ) -> None:
        """`declared`: the playbook's root `keychain:` entries. `file`: `--keychain FILE`
        (must exist); without it `.noetl/keychain.yaml` is read when present. `env`: the
        environment to read (default: `os.environ` at lookup time)."""
        self.declared: dict[str, dict[str, Any]] = {}
        for entry in declared:
            name = entry.get("name")
            if isinstance(name, str):
                self.declared[name] = dict(entry)
        self._file_name: str | None = None
        if file is not None:
            self._file: dict[str, Any] = load_file(file)
            self._file_name = str(file)
        elif not no_file and DEFAULT_FILE.is_file():
            self._file = load_file(DEFAULT_FILE)
            self._file_name = str(DEFAULT_FILE)
        else:
            self._file = {}
        self._env = env
        self._provider = provider  # name -> value, or None when it has no such entry
        self._provided: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._substrings: set[str] = set()
        self._exact: set[str] = set()
        self._numbers: set[int | float] = set()
        self._pattern: re.Pattern[str] | None = None

    @classmethod
    def only(cls, values: Mapping[str, Any]) -> Keychain:
        """A keychain of these entries and nothing else (no environment, no file): what the
        process of an isolated plugin tool receives (stdlib_tools/tool_exec.py)."""
        return cls(env={}, provider=dict(values).get, no_file=True)

    # ------------------------------------------------------------------ resolution

    def resolve(self, name: str) -> Any:
        """The value of entry `name` (registered for redaction); NOE812 when no provider has it."""
        env = os.environ if self._env is None else self._env
        raw = env.get(env_var(name))
        value: Any = _parse_env_value(raw) if raw is not None else self._provide(name)
        if value is None and raw is None:
            value = self._file.get(name)
        if value is None and raw is None and name not in self._file:
            raise KeychainError(
                "NOE812",
                f"keychain entry `{name}` is not set",
                f"set the environment variable {env_var(name)} (a string, or JSON for a "
                f"mapping), or add `{name}:` to "
                + (self._file_name or f"{DEFAULT_FILE} (or a file given with --keychain FILE)"),
            )
        self.register(value)
        defaults = {
            k: v for k, v in self.declared.get(name, {}).items() if k not in ("name", "kind")
        }
        if defaults and isinstance(value, dict):
            return {**defaults, **value}
        return value

    def resolve_all(self) -> dict[str, Any]:
        """Every declared entry, resolved up front (before the workflow runs, so a missing secret fails at start, not halfway)."""
        return {name: self.resolve(name) for name in self.declared}

    def namespace(self) -> dict[str, Any]:
        """The `keychain` namespace of templates: every declared entry a provider has, resolved
        (so registered for redaction); a missing one stays undefined, and a tool that needs it
        reports NOE812."""
        return {name: self.resolve(name) for name in self.declared if self.has(name)}

    def has(self, name: str) -> bool:
        env = os.environ if self._env is None else self._env
        return env_var(name) in env or self._provide(name) is not None or name in self._file

    def _provide(self, name: str) -> Any:
        if self._provider is None:
            return None
        if name not in self._provided:
            self._provided[name] = self._provider(name)
        return self._provided[name]

    # ------------------------------------------------------------------ redaction

    def register(self, value: Any) -> None:
        """Treat the secret parts of `value` as secret (`secret_parts`): each in its plain,
        URL-encoded, base64 and JSON-escaped forms. A number of at least `MIN_NUMBER`
        characters is masked where it appears as a number and inside text (`"pin 98765432
        refused"`); shorter ones are not (they would mask the counts and indexes of every
        event)."""
        found: list[tuple[str, bool]] = []
        numbers: list[int | float] = []
        for part, whole in secret_parts(value):
            if isinstance(part, str):
                found.extend((form, whole) for form in encoded_forms(part))
            elif len(str(part)) >= MIN_NUMBER:  # short numbers are counts and indexes
                numbers.append(part)
                found.append((str(part), False))
        with self._lock:
            self._numbers.update(numbers)
            for text, whole in found:
                if len(text) >= MIN_SUBSTRING and text not in self._substrings:
                    self._substrings.add(text)
                    self._pattern = None  # rebuilt on the next redact
                elif whole and 0 < len(text) < MIN_SUBSTRING:
                    self._exact.add(text)

    @property
    def has_secrets(self) -> bool:
        return bool(self._substrings or self._exact or self._numbers)

    def mentions(self, obj: Any) -> bool:
        """Whether a JSON-like object holds a secret this keychain has handed out (what
        `redact` would mask): a task carrying one gets a process of its own."""
        return self.has_secrets and self.redact(obj) != obj

    def redact(self, obj: Any) -> Any:
        """A copy of a JSON-like object with every secret replaced by `"***"`."""
        if not self.has_secrets:
            return obj
        with self._lock:
            if self._pattern is None and self._substrings:
                ordered = sorted(self._substrings, key=len, reverse=True)
                self._pattern = re.compile("|".join(re.escape(s) for s in ordered))
            pattern, exact = self._pattern, frozenset(self._exact)
            numbers = frozenset(self._numbers)
        return _redact(obj, pattern, exact, numbers)


def _redact(
    obj: Any, pattern: re.Pattern[str] | None, exact: frozenset[str], numbers: frozenset[Any]
) -> Any:
    if isinstance(obj, str):
        if obj in exact:
            return MASK
        return pattern.sub(MASK, obj) if pattern is not None else obj
    if isinstance(obj, Mapping):
        return {
            _redact(k, pattern, exact, numbers): _redact(v, pattern, exact, numbers)
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [_redact(v, pattern, exact, numbers) for v in obj]
    if numbers and _is_number(obj) and obj in numbers:
        return MASK
    return obj


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# field names whose values are secret (lower-cased, `-` as `_`): exact names, and parts
SECRET_NAMES = frozenset({"key", "pass", "pin", "auth", "authorization", "cookie", "signature"})
SECRET_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "private_key",
    "privatekey",
    "api_key",
    "apikey",
    "access_key",
    "secret_key",
    "client_secret",
    "credential",
)
# fields that say where and who, never secret (a mapping with none of SECRET_NAMES/PARTS
# treats every other field as secret: an unknown shape is masked whole)
PLAIN_NAMES = frozenset(
    {
        "user", "username", "login", "host", "hostname", "port", "database", "dbname", "db",
        "schema", "name", "type", "kind", "region", "project", "project_id", "account",
        "sslmode", "driver", "scheme", "protocol", "path", "url", "uri", "dsn", "endpoint",
        "bucket", "catalog", "warehouse", "role", "client_id", "key_id", "access_key_id",
        "email", "tenant", "tenant_id", "auth_uri", "token_uri", "description",
    }
)  # fmt: skip


def is_secret_name(name: Any) -> bool:
    text = str(name).lower().replace("-", "_")
    if text in PLAIN_NAMES:
        return False
    return (
        text in SECRET_NAMES
        or any(part in text for part in SECRET_PARTS)
        or (text.endswith("_key") and not text.endswith("_id_key"))
    )


def secret_parts(value: Any) -> list[tuple[Any, bool]]:
    """The parts of a credential value that are secret, each with whether it is the whole
    value: a plain string is secret whole, except a URL, whose password alone is; in a
    mapping, the fields named like a secret (password, token, key, secret, private key...,
    at any depth) and the password of any URL inside; user, host, port, database names are
    not. A mapping with no secret-named field treats its fields as secret, but for the
    PLAIN_NAMES ones."""
    if isinstance(value, str):
        password = _url_password(value)
        return [(password, True)] if password else [(value, True)]
    if _is_number(value):
        return [(value, True)]
    if not isinstance(value, Mapping | list | tuple):
        return []
    named: list[tuple[Any, bool]] = []
    other: list[tuple[Any, bool]] = []
    users: list[str] = []
    passwords: list[str] = []

    def walk(item: Any, secret: bool, field: str | None) -> None:
        if isinstance(item, Mapping):
            for k, v in item.items():
                walk(v, secret or is_secret_name(k), str(k))
        elif isinstance(item, list | tuple):
            for v in item:
                walk(v, secret, field)
        elif isinstance(item, str) or _is_number(item):
            if secret:
                named.append((item, False))
                if isinstance(item, str) and field and "pass" in field.lower():
                    passwords.append(item)
                return
            password = _url_password(item) if isinstance(item, str) else None
            if password:
                named.append((password, False))
            elif field is None or str(field).lower().replace("-", "_") not in PLAIN_NAMES:
                other.append((item, False))
            if isinstance(item, str) and field and field.lower() in ("user", "username", "login"):
                users.append(item)

    walk(value, False, None)
    if not named:
        return other
    # `user:password` as HTTP basic auth sends it (its base64 is one of the encoded forms)
    named.extend((f"{u}:{p}", False) for u in users for p in passwords)
    return named


def encoded_forms(text: str) -> list[str]:
    """A secret as it may appear in what is written: plain, URL-encoded (path and form
    style), base64 (standard and URL-safe, with and without padding) and JSON-escaped."""
    import base64
    import json as json_module
    from urllib.parse import quote, quote_plus

    forms = [text]
    if len(text) < MIN_SUBSTRING:
        return forms
    raw = text.encode("utf-8", "surrogatepass")
    for encoded in (
        quote(text, safe=""),
        quote_plus(text),
        base64.b64encode(raw).decode("ascii"),
        base64.urlsafe_b64encode(raw).decode("ascii"),
        json_module.dumps(text)[1:-1],
        json_module.dumps(text, ensure_ascii=False)[1:-1],
    ):
        for form in (encoded, encoded.rstrip("=")):
            if form not in forms and len(form) >= MIN_SUBSTRING:
                forms.append(form)
    return forms


def _url_password(text: str) -> str | None:
    """The password inside a URL (`postgresql://user:pw@host/db`): error messages that quote
    only the password must not leak it either."""
    if "://" not in text or "@" not in text:
        return None
    try:
        return urlsplit(text).password
    except ValueError:
        return None
