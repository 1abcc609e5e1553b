"""The argument schema of every tool kind (pydantic), shared by the tools and the compiler.

The compiler's `tools` pass validates each task's arguments statically (a template string is
accepted wherever a value is expected: the pass ignores errors on values that are templates);
`registry.call_tool` validates the rendered arguments before running a tool. Spellings follow
the NoETL corpus, aliases included (`endpoint` = `url`, `command`/`sql` = `query`, `cmds` =
`commands`, `connection` = `auth`, `workload`/`input` = `args`...).

Requirements that pydantic cannot express on one field (one of several spellings, arguments
that exclude each other) raise `PydanticCustomError` with the types `missing_argument` and
`argument_conflict`, which the compiler maps to NOE602 and NOE605.

This module imports only pydantic: the compiler reads it without loading httpx or asyncpg.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

Scalar = str | int | float | bool | None


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


class PythonArgs(ToolArgs):
    code: str = Field(description="the code: defines `main(...)`, assigns `result` or returns")
    input: dict[str, Any] | None = Field(None, description="bound as locals (and `input_data`)")
    args: dict[str, Any] | None = Field(None, description="used when `input` is not given")
    libs: dict[str, str] | list[str] | None = Field(None, description="{alias: module} imports")
    auth: dict[str, Any] | str | None = Field(
        None, description="{alias: keychain entry}: resolved values bound as the local `auth`"
    )
    assert_: PythonAssert | None = Field(
        None, alias="assert", description="contract: `expects` inputs, `returns` result keys"
    )


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
    verify: bool = Field(True, description="verify TLS certificates")

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

SQL_SPELLINGS = "query command sql"


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


class PostgresArgs(_SqlArgs):
    params: list[Any] | None = Field(None, description="values for $1, $2, ...")
    auth: str | dict[str, Any] | None = Field(
        None,
        validation_alias=_one_of("auth connection dsn"),
        description="a keychain entry name, a postgresql:// DSN, or connection fields",
    )

    @model_validator(mode="after")
    def _check(self) -> PostgresArgs:
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

    @model_validator(mode="after")
    def _check(self) -> SqliteArgs:
        self._need_query("sqlite")
        return self


class DuckdbArgs(_SqlArgs):
    database: str = Field(
        ":memory:",
        validation_alias=_one_of("database path db file"),
        description="the database file, relative to the playbook's folder",
    )
    params: list[Any] | dict[str, Any] | None = Field(None, description="? or $name values")

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
    commands: list[str] | None = Field(
        None,
        validation_alias=_one_of("commands cmds"),
        description="command lines run one after another; the first failure stops",
    )
    env: dict[str, Scalar] | None = Field(None, description="added to the environment")
    cwd: str | None = Field(None, description="working directory, relative to the playbook")
    timeout: float | None = Field(None, description="seconds (the process group is killed)")

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
        None, validation_alias=_one_of("args workload input"), description="the child's workload"
    )
    return_step: str | None = Field(None, description="return this step's result instead")
    task: str | None = Field(None, description="a label (NoETL corpus); not used")

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


ARG_SCHEMAS: dict[str, type[ToolArgs]] = {
    "noop": NoopArgs,
    "python": PythonArgs,
    "http": HttpArgs,
    "postgres": PostgresArgs,
    "sqlite": SqliteArgs,
    "duckdb": DuckdbArgs,
    "shell": ShellArgs,
    "secrets": SecretsArgs,
    "playbook": PlaybookArgs,
    "workbook": WorkbookArgs,
}


def argument_names(kind: str) -> list[str]:
    """Every spelling a kind accepts (for "did you mean" hints and the docs)."""
    schema = ARG_SCHEMAS[kind]
    names: list[str] = []
    for name, info in schema.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names.extend(str(c) for c in alias.choices)
        else:
            names.append(info.alias or name)
    return names
