"""Tool kinds as records: one `ToolKind` per kind, from which every list of kinds is derived.

A record says everything the rest of the code base needs to know about a kind: its argument
schema (the compiler's `tools` pass and `registry.call_tool` validate against it), the module
whose `run(args, spec, context, keychain)` executes it, the arguments that name keychain
entries (the compiler's NOE606 check), the arguments that hold SQL text (the NOE604 check), and
whether it runs inline (no I/O: runtimes run a pipeline of inline kinds in their event loop)
or in the pool of threads and workers.

Three sources, looked up in this order:

1. the built-in kinds (`BUILTIN`);
2. installed plugins: every entry point of the group `noetlc.tools` (`importlib.metadata`)
   loads to a `ToolKind` (or a callable returning one); they are discovered once, the first
   time a kind is not built in, so a playbook of built-in kinds never scans the installed
   distributions;
3. the kinds NoETL has that need a cloud service this package does not talk to
   (`NEEDS_PLUGIN`): known by name, so the compiler can say which plugin they need (a note,
   NOE607) and a run fails that task with a `ToolUnavailable` error, while a misspelt kind
   stays an error (NOE205, with "did you mean").

A plugin cannot replace a built-in kind (the built-in wins, and `plugin_problems()` says so).

This module imports neither pydantic nor the schemas: a built-in record names its schema
(`schema="PythonArgs"`, a class of `noetlc.stdlib_tools.schemas`) and `ToolKind.schema`
imports it the first time it is read, when arguments are validated (the compiler's `tools`
pass, `registry.call_tool` before a tool runs). So a runtime whose tasks are all `noop` (or
VM-answered) never loads pydantic, and the inline/executor/credential facts cost nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from noetlc.stdlib_tools.sql_spellings import SQL_SPELLINGS

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from noetlc.stdlib_tools.schemas import ToolArgs

ENTRY_POINT_GROUP = "noetlc.tools"
_STD = "noetlc.stdlib_tools."
_SCHEMAS = "noetlc.stdlib_tools.schemas"


class ToolKind:
    """What the compiler and the runtimes know about one tool kind (immutable).

    `schema` is the argument model (a `ToolArgs` subclass), or the name of a class in
    `noetlc.stdlib_tools.schemas` (built-in records: imported on first use)."""

    __slots__ = (
        "_schema",
        "_schema_name",
        "credentials",
        "inline",
        "isolated",
        "module",
        "name",
        "origin",
        "plain_args",
        "plugin",
        "sql",
        "summary",
    )

    _schema: type[ToolArgs] | None
    _schema_name: str | None
    name: str
    module: str | None
    """Dotted module with `run(args, spec, context, keychain) -> outcome`; None for the kinds
    the pipeline VM answers itself (`noop`, `workbook`) and for kinds that need a plugin."""
    summary: str
    credentials: tuple[str, ...]
    """Arguments whose literal value names a keychain entry (a mapping value: its values)."""
    sql: tuple[str, ...]
    """Arguments that hold SQL text (templates spliced into them are NOE604)."""
    inline: bool
    """No I/O: a pipeline made only of inline kinds runs in the runtime's event loop."""
    plugin: str | None
    """Set on a kind that is known by name only: the plugin it needs and the service it uses."""
    origin: str
    """`noetlc` for built-in kinds, else the distribution that registered the kind."""
    isolated: bool
    """A plugin asks that its calls run like python and shell tasks where task code is kept
    away from the service (`isolation.configure("process")`, or the task's `spec.isolation:
    subprocess`): in a warm runner process with a clean environment and the task limits,
    given only the keychain entries its `credentials` arguments name (stdlib_tools/
    tool_exec.py)."""
    plain_args: bool
    """The executor reads its arguments only through attributes, `model_dump` and `model_extra`:
    arguments the generated table accepts reach it as `shape_check.Args` objects, without
    pydantic (see `build_args`)."""

    def __init__(
        self,
        name: str,
        schema: type[ToolArgs] | str,
        module: str | None,
        summary: str = "",
        credentials: tuple[str, ...] = (),
        sql: tuple[str, ...] = (),
        inline: bool = False,
        plugin: str | None = None,
        origin: str = "noetlc",
        plain_args: bool = False,
        isolated: bool = False,
    ) -> None:
        values = {
            "name": name,
            "_schema": None if isinstance(schema, str) else schema,
            "_schema_name": schema if isinstance(schema, str) else None,
            "module": module,
            "summary": summary,
            "credentials": tuple(credentials),
            "sql": tuple(sql),
            "inline": inline,
            "plugin": plugin,
            "origin": origin,
            "plain_args": plain_args,
            "isolated": isolated,
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ToolKind is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ToolKind is immutable: cannot delete {name!r}")

    def __repr__(self) -> str:
        return f"ToolKind(name={self.name!r}, module={self.module!r}, origin={self.origin!r})"

    @property
    def schema(self) -> type[ToolArgs]:
        """The argument model; a built-in record's is imported here, the first time."""
        schema = self._schema
        if schema is None:
            from importlib import import_module

            schema = getattr(import_module(_SCHEMAS), str(self._schema_name))
            object.__setattr__(self, "_schema", schema)
        return schema

    def args_fit(self, args: Any) -> bool:
        """True when `args` (plain data) certainly validate against the schema, decided
        without pydantic from the generated table (`shape_check`); False: ask the schema."""
        name = self._schema_name
        if name is None:
            return False  # a plugin's model: only pydantic knows it
        from noetlc.stdlib_tools.args_table import MODELS
        from noetlc.stdlib_tools.shape_check import fits

        return fits(MODELS, name, args)

    def build_args(self, args: Any) -> Any:
        """The validated arguments without pydantic (a `shape_check.Args`), for a kind whose
        executor takes them (`plain_args`) and arguments the table accepts as they are; None
        otherwise (validate with `schema`)."""
        name = self._schema_name
        if name is None or not self.plain_args:
            return None
        from noetlc.stdlib_tools.args_table import MODELS
        from noetlc.stdlib_tools.shape_check import build

        return build(MODELS, name, args)

    @property
    def available(self) -> bool:
        return self.plugin is None

    def with_origin(self, origin: str) -> None:
        """Name the distribution that registered a plugin's record (set once, on discovery)."""
        object.__setattr__(self, "origin", origin)


def argument_names(schema: type[ToolArgs]) -> list[str]:
    """Every spelling a schema accepts (for "did you mean" hints and the docs)."""
    from pydantic import AliasChoices

    names: list[str] = []
    for name, info in schema.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names.extend(str(c) for c in alias.choices)
        else:
            names.append(info.alias or name)
    return names


def _builtin(*kinds: ToolKind) -> dict[str, ToolKind]:
    return {k.name: k for k in kinds}


_SQL = tuple(SQL_SPELLINGS.split())

BUILTIN: dict[str, ToolKind] = _builtin(
    ToolKind("noop", "NoopArgs", None, "returns `result` (else `input`)", inline=True),
    ToolKind(
        "python",
        "PythonArgs",
        _STD + "python_tool",
        "runs Python code, in process or in a child process",
        credentials=("auth",),
        plain_args=True,
    ),
    ToolKind("http", "HttpArgs", _STD + "http_tool", "one HTTP request", ("auth",)),
    ToolKind(
        "postgres",
        "PostgresArgs",
        _STD + "postgres_tool",
        "SQL with parameters (asyncpg)",
        credentials=("auth", "connection", "dsn", "credential"),
        sql=_SQL,
    ),
    ToolKind(
        "sqlite",
        "SqliteArgs",
        _STD + "sqlite_tool",
        "SQL with parameters on a file (sqlite3)",
        sql=_SQL,
    ),
    ToolKind(
        "duckdb",
        "DuckdbArgs",
        _STD + "duckdb_tool",
        "SQL with parameters (optional `duckdb` package)",
        sql=_SQL,
    ),
    ToolKind(
        "shell",
        "ShellArgs",
        _STD + "shell_tool",
        "a command line, an argument vector, or several command lines",
    ),
    ToolKind(
        "secrets",
        "SecretsArgs",
        _STD + "secrets_tool",
        "reads a keychain entry",
        credentials=("key", "secret", "entry"),
    ),
    ToolKind(
        "script",
        "ScriptArgs",
        _STD + "script_tool",
        "runs a Python script as a program, its `args` as JSON (NoETL: a Kubernetes job)",
    ),
    ToolKind(
        "playbook",
        "PlaybookArgs",
        _STD + "playbook_tool",
        "runs another playbook as a child execution",
    ),
    ToolKind(
        "workbook",
        "WorkbookArgs",
        None,
        "runs a task of the root `workbook:` (done by the pipeline VM)",
    ),
    ToolKind(
        "transfer",
        "TransferArgs",
        _STD + "transfer_tool",
        "batched copy between postgres, duckdb, sqlite and http",
    ),
    ToolKind(
        "nats",
        "NatsArgs",
        _STD + "nats_tool",
        "NATS publish, request and JetStream key/value (nats-py)",
        credentials=("auth",),
    ),
)


# kind -> the service it needs (the kinds NoETL has that reach a cloud service)
NEEDS_PLUGIN: dict[str, str] = {
    "snowflake": "Snowflake",
    "ducklake": "DuckLake catalogs on object storage",
    "gcs": "Google Cloud Storage",
    "container": "a container runtime (Kubernetes jobs)",
    "rhai": "the Rhai script engine",
    "subscription": "NoETL's event subscriptions",
    "mcp": "Model Context Protocol servers",
    "artifact": "NoETL's artifact store of externalized results (`_ref`)",
    # further kinds of NoETL's `ToolSpec` (noetl/core/dsl/engine/models/tools.py)
    "snowflake_transfer": "Snowflake",
    "agent": "an AI agent runtime (ADK, LangChain or a NoETL agent catalog)",
    "gateway": "NoETL's gateway service",
}


def _needs_plugin(name: str) -> ToolKind:
    return ToolKind(
        name,
        "PluginNeededArgs",
        None,
        f"needs {NEEDS_PLUGIN[name]}",
        plugin=f"a package that registers the `{name}` kind in the `{ENTRY_POINT_GROUP}` "
        f"entry-point group (it needs {NEEDS_PLUGIN[name]})",
    )


_lock = threading.Lock()
_plugins: dict[str, ToolKind] | None = None
_problems: list[str] = []


def plugins_loaded() -> bool:
    """Whether this process has looked up installed tool plugins (a compile that did
    depends on more than its source and the compiler: the compile cache does not keep it)."""
    return _plugins is not None


def _load_plugins() -> dict[str, ToolKind]:
    global _plugins
    with _lock:
        if _plugins is not None:
            return _plugins
        from importlib import metadata  # only when a kind is not built in (cold start)

        found: dict[str, ToolKind] = {}
        problems: list[str] = []
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            where = f"entry point `{ep.name} = {ep.value}`"
            try:
                record = _as_record(ep.load(), ep)
            except Exception as exc:  # a broken plugin must not break the compiler
                problems.append(f"{where} cannot be loaded: {type(exc).__name__}: {exc}")
                continue
            if record is None:
                problems.append(f"{where} is not a ToolKind (nor a callable returning one)")
            elif record.name in BUILTIN:
                problems.append(f"{where} redefines the built-in kind `{record.name}`: ignored")
            elif record.name in found:
                problems.append(f"{where} defines `{record.name}` a second time: ignored")
            else:
                found[record.name] = record
        _problems[:] = problems
        _plugins = found
        return found


def _as_record(value: Any, ep: EntryPoint) -> ToolKind | None:
    if callable(value) and not isinstance(value, ToolKind | type):
        value = value()
    if not isinstance(value, ToolKind):
        return None
    dist = getattr(ep, "dist", None)
    origin = getattr(dist, "name", None) or ep.value.split(":", 1)[0]
    if value.origin == "noetlc":
        value.with_origin(str(origin))
    return value


def reload_plugins() -> None:
    """Forget the discovered plugins (tests, and after installing a package in-process)."""
    global _plugins
    with _lock:
        _plugins = None
        _problems.clear()


def plugin_problems() -> list[str]:
    """Entry points of `noetlc.tools` that could not be used, and why."""
    _load_plugins()
    return list(_problems)


def lookup(name: str) -> ToolKind | None:
    """The record of a kind: built in, from a plugin, or known by name only; None if unknown."""
    record = BUILTIN.get(name)
    if record is not None:
        return record
    record = _load_plugins().get(name)
    if record is not None:
        return record
    if name in NEEDS_PLUGIN:
        return _needs_plugin(name)
    return None


def all_kinds() -> dict[str, ToolKind]:
    """Every kind this installation can run, built-in kinds first, then plugins."""
    return {**BUILTIN, **_load_plugins()}


def kind_names(*, with_plugin_needed: bool = True) -> list[str]:
    """The names of every known kind (for "did you mean" and listings)."""
    names = list(all_kinds())
    if with_plugin_needed:
        names.extend(n for n in NEEDS_PLUGIN if n not in names)
    return names


def schema_of(name: str) -> type[ToolArgs] | None:
    record = lookup(name)
    return record.schema if record is not None else None


def inline_kinds() -> frozenset[str]:
    return frozenset(name for name, record in all_kinds().items() if record.inline)


def runner(record: ToolKind) -> Callable[..., dict[str, Any]] | None:
    """The executor of a kind (its module imported on first use), None for VM-answered kinds."""
    if record.module is None:
        return None
    from importlib import import_module

    run: Callable[..., dict[str, Any]] = import_module(record.module).run
    return run
