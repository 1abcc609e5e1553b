"""The argument schema of every tool kind (pydantic), shared by the tools and the compiler.

The compiler's `tools` pass validates each task's arguments statically (a template string is
accepted wherever a value is expected: the pass ignores errors on values that are templates);
`registry.call_tool` validates the rendered arguments before running a tool. Spellings follow
the NoETL corpus, aliases included (`endpoint` = `url`, `command`/`sql` = `query`, `cmds` =
`commands`, `connection` = `auth`, `workload`/`input` = `args`...).

Requirements that pydantic cannot express on one field (one of several spellings, arguments
that exclude each other) raise `PydanticCustomError` with the types `missing_argument` and
`argument_conflict`, which the compiler maps to NOE602 and NOE605.

This module imports only pydantic: the compiler reads it without loading httpx or asyncpg. The
kinds table (`kinds.py`) names these classes and imports this module the first time a schema
is read, so a runtime that validates no arguments never loads pydantic.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from noetlc.stdlib_tools.sql_spellings import SQL_SPELLINGS

Scalar = str | int | float | bool | None


# What a model's validators refuse, for the pydantic-free fast path of the compiler
# (`noetlc.stdlib_tools.shape_check`): ("given", fields) at least one is given and not null,
# ("exclusive", fields) at most one is. Declared next to the validators it describes; a model
# with validators and no `shape_rules` always goes to pydantic.
ShapeRules = tuple[tuple[str, tuple[str, ...]], ...]


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PluginNeededArgs(ToolArgs):
    """A kind known by name only: its arguments are the plugin's to check."""

    model_config = ConfigDict(extra="allow")


def _one_of(spelling: str) -> AliasChoices:
    names = spelling.split()
    return AliasChoices(*names)


def _missing(kind: str, field: str, spellings: str) -> PydanticCustomError:
    return PydanticCustomError(
        "missing_argument",
        "the {kind} tool needs `{field}:`{others}",
        {"kind": kind, "field": field, "others": spellings},
    )


def _conflict(kind: str, names: list[str]) -> PydanticCustomError:
    return PydanticCustomError(
        "argument_conflict",
        "the {kind} tool takes only one of {names}",
        {"kind": kind, "names": ", ".join(f"`{n}`" for n in names)},
    )


# --------------------------------------------------------------------------- noop / python


class NoopArgs(ToolArgs):
    # noop tasks carry labels and messages (`message: "{{ n }} items"`): other keys are allowed
    model_config = ConfigDict(extra="allow")

    input: Any = Field(None, description="returned as the result (pass-through)")
    result: Any = Field(None, description="returned as the result (wins over `input`)")


class PythonAssert(ToolArgs):
    expects: list[str] = Field(default_factory=list, description="input names that must be set")
    returns: list[str] = Field(default_factory=list, description="keys the result must have")


class ScriptSource(ToolArgs):
    model_config = ConfigDict(extra="allow")  # a reader's own fields (auth, bucket, headers)

    type: Literal["file", "http", "https", "gcs", "s3", "inline"] = Field(
        description="where the script is read from: a file (relative to the playbook's folder), "
        "an http(s) URL, inline `code`; gcs and s3 need a plugin"
    )
    code: str | None = Field(None, description="the script itself (`type: inline`)")


class ScriptRef(ToolArgs):
    uri: str | None = Field(None, description="the file path or URL of the script")
    source: ScriptSource = Field(description="`{type: file|http|inline|gcs|s3, ...}`")


class ScriptJob(ToolArgs):
    """NoETL's Kubernetes job settings (noetl/tools/script/__init__.py); here the script runs
    as a local process, so only `env`, `timeout` and `install_dependencies` mean something."""

    model_config = ConfigDict(extra="allow")  # image, namespace, resources, backoffLimit...

    env: dict[str, Any] | None = Field(None, description="environment variables of the script")
    timeout: float = Field(600.0, gt=0, description="seconds before the script is killed")
    install_dependencies: list[str] | None = Field(
        None, description="pip packages NoETL installs first; here they must be installed"
    )


class ScriptArgs(ToolArgs):
    script: ScriptRef = Field(description="`{uri, source: {type: file|http|inline|gcs|s3}}`")
    args: dict[str, Any] | None = Field(
        None, description="passed to the script as JSON, its first command-line argument"
    )
    job: ScriptJob | None = Field(None, description="NoETL's job settings (`env`, `timeout`)")


class LibImport(ToolArgs):
    from_: str = Field(alias="from", description="the module (`from X import Y`)")
    import_: str = Field(alias="import", description="the name imported from it")


class PythonArgs(ToolArgs):
    script: ScriptRef | None = Field(None, description="the code, read at run time")
    code: str | None = Field(
        None,
        validate_default=True,
        description="the code: defines `main(...)`, assigns `result` or returns",
    )
    input: dict[str, Any] | None = Field(None, description="bound as locals (and `input_data`)")
    args: dict[str, Any] | None = Field(None, description="used when `input` is not given")
    libs: dict[str, str | LibImport] | list[str] | None = Field(
        None, description="{alias: module} or {alias: {from: module, import: name}} imports"
    )
    auth: dict[str, Any] | str | None = Field(
        None, description="{alias: keychain entry}: resolved values bound as the local `auth`"
    )
    assert_: PythonAssert | None = Field(
        None, alias="assert", description="contract: `expects` inputs, `returns` result keys"
    )

    shape_rules: ClassVar[ShapeRules] = (
        ("given", ("code", "script")),
        ("exclusive", ("code", "script")),
    )

    @field_validator("code")
    @classmethod
    def _code_or_script(cls, value: str | None, info: ValidationInfo) -> str | None:
        # a field validator (not a model one): it reports even when other arguments are wrong
        if value is None and info.data.get("script") is None:
            raise _missing("python", "code", " (or `script:`)")
        return value

    @model_validator(mode="after")
    def _check(self) -> PythonArgs:
        if self.code is not None and self.script is not None:
            raise _conflict("python", ["code", "script"])
        return self


# --------------------------------------------------------------------------- http

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


class HttpTimeout(ToolArgs):
    connect: float | None = None
    read: float | None = None
    write: float | None = None
    pool: float | None = None


class HttpArgs(ToolArgs):
    method: HttpMethod = "GET"
    url: str | None = Field(None, validation_alias=_one_of("url endpoint"))
    headers: dict[str, Scalar] | None = None
    params: dict[str, Any] | None = Field(None, description="query string parameters")
    json_body: Any = Field(None, alias="json", description="a JSON request body")
    data: Any = Field(
        None, description="NoETL style: query parameters for GET/HEAD/DELETE, else a JSON body"
    )
    payload: Any = Field(None, description="the same as `data`")
    body: str | dict[str, Any] | list[Any] | None = Field(
        None, description="raw text body (a mapping or list is sent as JSON)"
    )
    form: dict[str, Scalar] | None = Field(None, description="form-encoded body")
    timeout: float | HttpTimeout | None = Field(None, description="seconds, or per phase")
    auth: str | dict[str, Any] | None = Field(
        None,
        description="a keychain entry: a bearer token, {token}, {username, password} or {headers}",
    )
    follow_redirects: bool = True
    verify: bool = Field(
        True,
        validation_alias=_one_of("verify verify_ssl"),
        description="verify TLS certificates",
    )

    shape_rules: ClassVar[ShapeRules] = (
        ("given", ("url",)),
        ("exclusive", ("json_body", "data", "payload", "body", "form")),
    )

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check(self) -> HttpArgs:
        if self.url is None:
            raise _missing("http", "url", " (or `endpoint:`)")
        given = [
            name
            for name, value in (
                ("json", self.json_body),
                ("data", self.data),
                ("payload", self.payload),
                ("body", self.body),
                ("form", self.form),
            )
            if value is not None
        ]
        if len(given) > 1:
            raise _conflict("http", given)
        return self


# --------------------------------------------------------------------------- SQL tools


class _SqlArgs(ToolArgs):
    query: str | None = Field(
        None,
        validation_alias=_one_of(SQL_SPELLINGS),
        description="the SQL (`command:` and `sql:` are the same); several statements run in one "
        "transaction and the last one's rows are the result",
    )
    timeout: float | None = Field(None, description="seconds")

    def _need_query(self, kind: str) -> None:
        if self.query is None:
            raise _missing(kind, "query", " (or `command:` / `sql:`)")


class PgPool(ToolArgs):
    name: str | None = Field(None, description="tasks naming the same pool share it")
    max_size: int | None = Field(None, description="connections at most (default 4)")
    min_size: int | None = Field(None, description="connections kept open")
    timeout: float | None = Field(None, description="seconds to wait for a connection")
    max_waiting: int | None = Field(None, description="accepted; asyncpg queues without limit")


class PostgresArgs(_SqlArgs):
    params: list[Any] | None = Field(None, description="values for $1, $2, ...")
    auth: str | dict[str, Any] | None = Field(
        None,
        validation_alias=_one_of("auth connection dsn credential"),
        description="a keychain entry name, a postgresql:// DSN, or connection fields",
    )
    pool: PgPool | None = Field(None, description="the connection pool's settings")
    script: ScriptRef | None = Field(None, description="the SQL, read at run time")
    connect_with: dict[str, Any] | None = Field(
        None,
        validation_alias=_one_of("with"),
        description="connection fields over `auth:`'s (`db_name`, `db_host`, `db_user`, ...)",
    )

    shape_rules: ClassVar[ShapeRules] = (
        ("exclusive", ("query", "script")),
        ("given", ("query", "script")),
        ("given", ("auth",)),
    )

    @model_validator(mode="after")
    def _check(self) -> PostgresArgs:
        if self.script is not None and self.query is not None:
            raise _conflict("postgres", ["query", "script"])
        if self.script is None:
            self._need_query("postgres")
        if self.auth is None:
            raise _missing("postgres", "auth", " (a keychain entry or a DSN; or `connection:`)")
        return self


class SqliteArgs(_SqlArgs):
    database: str = Field(
        ":memory:",
        validation_alias=_one_of("database path db file"),
        description="the database file, relative to the playbook's folder",
    )
    params: list[Any] | dict[str, Any] | None = Field(None, description="? or :name values")

    shape_rules: ClassVar[ShapeRules] = (("given", ("query",)),)

    @model_validator(mode="after")
    def _check(self) -> SqliteArgs:
        self._need_query("sqlite")
        return self


class DuckdbArgs(_SqlArgs):
    query: str | None = Field(
        None,
        validation_alias=_one_of(SQL_SPELLINGS + " commands"),
        description="the SQL (`command:`, `commands:` and `sql:` are the same); several "
        "statements run in one transaction and the last one's rows are the result",
    )
    auth: dict[str, Any] | str | None = Field(
        None,
        description="{secret name: {tool: postgres|hmac, key: keychain entry, scope}}: each "
        "becomes a DuckDB secret of that name before the SQL runs",
    )
    database: str = Field(
        ":memory:",
        validation_alias=_one_of("database path db file"),
        description="the database file, relative to the playbook's folder",
    )
    params: list[Any] | dict[str, Any] | None = Field(None, description="? or $name values")

    shape_rules: ClassVar[ShapeRules] = (("given", ("query",)),)

    @model_validator(mode="after")
    def _check(self) -> DuckdbArgs:
        self._need_query("duckdb")
        return self


# --------------------------------------------------------------------------- shell


class ShellArgs(ToolArgs):
    command: str | list[str] | None = Field(
        None,
        validation_alias=_one_of("command cmd"),
        description="a shell command line, or an argument vector run without a shell",
    )
    commands: list[str] | str | None = Field(
        None,
        validation_alias=_one_of("commands cmds"),
        description="command lines run one after another; the first failure stops (one "
        "string: one script)",
    )
    env: dict[str, Scalar] | None = Field(None, description="added to the environment")
    cwd: str | None = Field(None, description="working directory, relative to the playbook")
    timeout: float | None = Field(None, description="seconds (the process group is killed)")

    shape_rules: ClassVar[ShapeRules] = (
        ("given", ("command", "commands")),
        ("exclusive", ("command", "commands")),
    )

    @model_validator(mode="after")
    def _check(self) -> ShellArgs:
        if self.command is None and self.commands is None:
            raise _missing("shell", "command", " (or `cmds:` / `commands:`)")
        if self.command is not None and self.commands is not None:
            raise _conflict("shell", ["command", "cmds"])
        return self


# --------------------------------------------------------------------------- secrets / playbook


class SecretsArgs(ToolArgs):
    key: str | None = Field(
        None,
        validation_alias=_one_of("key secret entry"),
        description="the keychain entry (default: the task's own name, as the corpus writes it)",
    )
    provider: Literal["env", "keychain"] | None = Field(
        None, description="`env`: the plain environment variable named `key` comes first"
    )


class PlaybookArgs(ToolArgs):
    path: str | None = Field(
        None,
        validation_alias=_one_of("path playbook"),
        description="a playbook file (relative to this playbook's folder) or a catalog path",
    )
    args: dict[str, Any] | None = Field(
        None,
        validation_alias=_one_of("args workload input payload"),
        description="the child's workload",
    )
    timeout: float | str | None = Field(
        None,
        description="seconds (or `30s`, `5m`) to wait for a `return_step` child (default 300)",
    )
    return_step: str | None = Field(
        None, description="wait for the child and give its status view (NoETL's)"
    )
    task: str | None = Field(None, description="a label (NoETL corpus); not used")
    wait: bool | None = Field(
        None,
        description="noetlc's: wait for the child and give its result; its failure fails the call",
    )

    shape_rules: ClassVar[ShapeRules] = (("given", ("path",)),)

    @model_validator(mode="after")
    def _check(self) -> PlaybookArgs:
        if self.path is None:
            raise _missing("playbook", "path", " (or `playbook:`)")
        return self


class WorkbookArgs(ToolArgs):
    name: str | None = Field(None, description="the root `workbook:` task to run")
    task: str | None = Field(None, description="the same as `name`")
    input: dict[str, Any] | None = Field(None, description="merged over the task's own input")
    args: dict[str, Any] | None = Field(None, description="used when `input` is not given")


# --------------------------------------------------------------------------- transfer

EndpointType = Literal["postgres", "sqlite", "duckdb", "http", "snowflake"]


class TransferEndpoint(ToolArgs):
    type: EndpointType = Field(
        validation_alias=_one_of("type tool"),
        description="postgres, sqlite, duckdb or http (snowflake: plugin)",
    )
    auth: str | dict[str, Any] | None = Field(
        None,
        validation_alias=_one_of("auth connection dsn credential"),
        description="postgres: a keychain entry, DSN or fields; http: as the http tool's",
    )
    query: str | None = Field(
        None, validation_alias=_one_of(SQL_SPELLINGS), description="source: the rows to copy"
    )
    params: list[Any] | dict[str, Any] | None = Field(
        None, description="SQL parameters; for http: query string parameters"
    )
    table: str | None = Field(None, description="target: the table rows are written to")
    database: str | None = Field(
        None,
        validation_alias=_one_of("database path db file"),
        description="sqlite and duckdb: the database file, relative to the playbook's folder",
    )
    url: str | None = Field(None, validation_alias=_one_of("url endpoint"))
    method: str | None = Field(None, description="http: default GET (source), POST (target)")
    headers: dict[str, Scalar] | None = None
    data_path: str | None = Field(
        None,
        validation_alias=_one_of("data_path path_in_response result_path"),
        description="http source: dotted path of the list of rows in the JSON answer",
    )
    mapping: dict[str, str] | None = Field(
        None, description="target: {target column: source field (dotted path)}"
    )
    key: list[str] | str | None = Field(
        None,
        validation_alias=_one_of("key conflict_columns upsert_key"),
        description="target: the columns of `mode: upsert`'s conflict",
    )
    timeout: float | None = Field(None, description="seconds per statement or request")


class TransferArgs(ToolArgs):
    source: TransferEndpoint
    target: TransferEndpoint
    mode: Literal["append", "replace", "upsert"] = Field(
        "append", description="replace empties the target table first; upsert needs `key`"
    )
    chunk_size: int = Field(
        1000,
        ge=1,
        validation_alias=_one_of("chunk_size batch_size"),
        description="rows per batch (one statement or request each)",
    )
    mapping: dict[str, str] | None = Field(None, description="the same as `target.mapping`")


# --------------------------------------------------------------------------- nats

NatsOperation = Literal["publish", "request", "kv_put", "kv_get", "kv_delete", "kv_keys"]


class NatsArgs(ToolArgs):
    operation: NatsOperation = Field(
        "publish", validation_alias=_one_of("operation op action"), description="what to do"
    )
    auth: str | dict[str, Any] | None = Field(
        None,
        validation_alias=_one_of("auth credential connection"),
        description="a keychain entry: a nats:// URL, or {url|servers, user, password, token}",
    )
    url: str | list[str] | None = Field(
        None,
        validation_alias=_one_of("url servers server"),
        description="the server (default nats://127.0.0.1:4222)",
    )
    subject: str | None = Field(None, description="publish and request: the subject")
    data: Any = Field(
        None,
        validation_alias=_one_of("data payload message body"),
        description="publish and request: the message (a mapping or list is sent as JSON)",
    )
    headers: dict[str, str] | None = Field(None, description="publish and request")
    bucket: str | None = Field(None, description="key/value: the bucket (created by kv_put)")
    key: str | None = Field(None, description="key/value: the key")
    value: Any = Field(None, description="kv_put: the value (a mapping or list as JSON)")
    ttl: float | None = Field(None, description="kv_put creating the bucket: max age, seconds")
    timeout: float | None = Field(None, description="seconds (request: default 5)")

    @model_validator(mode="after")
    def _check(self) -> NatsArgs:
        if self.operation in ("publish", "request") and self.subject is None:
            raise _missing("nats", "subject", f" (for `operation: {self.operation}`)")
        if self.operation.startswith("kv_"):
            if self.bucket is None:
                raise _missing("nats", "bucket", f" (for `operation: {self.operation}`)")
            if self.key is None and self.operation != "kv_keys":
                raise _missing("nats", "key", f" (for `operation: {self.operation}`)")
        return self
