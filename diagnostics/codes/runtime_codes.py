"""NOE8xx: runtime, databases and command lines."""

from noetlc.diagnostics.codes import code

CODES = (
    code(
        "NOE800",
        "usage-error",
        "error",
        "bad command-line arguments",
        """
The command line could not be understood: an unknown option, a missing argument, or a value
of the wrong form. The usage line printed above the message shows what is expected.

Example:

    noetlc check --format xml playbook.yaml
""",
        "run the command with --help",
    ),
    code(
        "NOE801",
        "unknown-code",
        "error",
        "unknown diagnostic code",
        """
`noetlc explain` was given a code that does not exist.

Example:

    noetlc explain NOE12345
""",
        "`noetlc explain` without arguments lists every code",
    ),
    code(
        "NOE802",
        "cannot-write",
        "error",
        "an output file cannot be written",
        """
The output path is in a directory that does not exist or is not writable.

Example:

    noetlc compile playbook.yaml -o /nonexistent/dir/out.nbc
""",
        "check the output path",
    ),
    code(
        "NOE803",
        "bad-store",
        "error",
        "the event store cannot be opened",
        """
`--db` names the event store: `sqlite:///path/to/file.db` or `memory:`. A missing file is
created, a missing folder is not (but for the default store's `.noetl/`): a mistyped path
stops here instead of creating folders. The URL is malformed, names an unsupported backend,
its folder does not exist, or the file cannot be opened.

Example:

    noetl-vm run playbook.yaml --db mysql://localhost/noetl
""",
        "use sqlite:///.noetl/noetl.db (the default) or memory:",
    ),
    code(
        "NOE804",
        "unknown-execution",
        "error",
        "no such execution in the event store",
        """
`noetl-vm status ID` and `noetl-vm events ID` look the execution up in the store named by
`--db` (default `sqlite:///.noetl/noetl.db`); it is not there.

Example:

    noetl-vm events 00000000-0000-0000-0000-000000000000
""",
        "`noetl-vm status` lists the executions the store has",
    ),
    code(
        "NOE805",
        "database-unreachable",
        "error",
        "the PostgreSQL server cannot be reached",
        """
Nothing answered at the host and port of the `--db` URL (connection refused, unknown host,
or no answer within the connect timeout), or the connection was lost and could not be
re-established. The URL itself is well formed.

Example:

    noetl-vm db upgrade --db postgresql://postgres@127.0.0.1:1/noetl
""",
        "check that PostgreSQL is running and that host and port in the URL are right",
    ),
    code(
        "NOE806",
        "bad-database-url",
        "error",
        "the PostgreSQL URL is malformed",
        """
A PostgreSQL URL has the form `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`, optionally
followed by `?schema=NAME` (the schema noetl's tables live in, default `public`) and
`connect_timeout=SECONDS`. This one cannot be parsed: a wrong scheme, a non-numeric port, an
invalid schema name or an unknown option.

Example:

    noetl-vm db upgrade --db postgresql://postgres@127.0.0.1:port/noetl
""",
        "use postgresql://USER@HOST:PORT/DATABASE[?schema=NAME]",
    ),
    code(
        "NOE807",
        "database-rejected",
        "error",
        "PostgreSQL rejected the connection or the statement",
        """
The server answered but refused: wrong user or password, a database that does not exist,
missing privileges, or too many connections. The message carries PostgreSQL's own reason.

Example:

    noetl-vm db upgrade --db postgresql://nobody@127.0.0.1:5432/no_such_database
""",
        "check the user, password and database name in the URL (`createdb` creates a database)",
    ),
    code(
        "NOE808",
        "schema-not-upgraded",
        "error",
        "the database schema is missing or older than this version of noetl",
        """
The database has not been initialised for noetl, or it lacks migrations this version needs.
`noetl-vm db upgrade --db URL` applies the missing migrations (it is idempotent and safe to
run while servers are running); `noetl-vm db status --db URL` lists them.

Example:

    noetl-vm db status --db postgresql://postgres@127.0.0.1:5432/fresh_database
""",
        "run `noetl-vm db upgrade --db URL`",
    ),
    code(
        "NOE809",
        "schema-too-new",
        "error",
        "the database schema is newer than this version of noetl",
        """
The database records migrations this version of noetl does not know: it was upgraded by a
newer release. Older releases do not write to a newer schema.

Example:

    noetl-vm db upgrade --db postgresql://postgres@127.0.0.1:5432/noetl   # with an old noetl
""",
        "upgrade noetl on this machine to the release that migrated the database",
    ),
    code(
        "NOE810",
        "migration-failed",
        "error",
        "a schema migration failed and was rolled back",
        """
A migration is applied in one transaction with its record in `schema_migrations`; it failed,
so nothing of it was applied. Usually the database user lacks the privilege to create tables
or functions in the schema, or an object of the same name already exists there.

Example:

    noetl-vm db upgrade --db postgresql://readonly_user@127.0.0.1:5432/noetl
""",
        "read PostgreSQL's message above; grant CREATE on the schema or use another schema",
    ),
    code(
        "NOE811",
        "migration-modified",
        "error",
        "an applied migration differs from the file this version ships",
        """
`schema_migrations` stores a checksum of every applied migration. The file shipped with this
version of noetl has different contents for the same version number: the schema in the
database may not be what this version expects. Migrations are never edited once released.

Example:

    noetl-vm db status --db postgresql://postgres@127.0.0.1:5432/noetl
""",
        "use the noetl release that created the database, or migrate into a fresh schema",
    ),
    code(
        "NOE812",
        "keychain-entry-missing",
        "error",
        "a keychain entry the playbook uses is not set",
        """
A tool names a credential (`auth: pg_main`, `kind: secrets` with `key: api_token`) or the
playbook declares it under the root `keychain:`, and no keychain provider has a value for it.
Providers are, in order: the environment variable `NOETL_KEYCHAIN_<NAME>` (the name upper-cased,
other characters replaced by `_`; a value starting with `{`, `[` or `"` is JSON), then the
keychain file (`--keychain FILE`, default `.noetl/keychain.yaml` when it exists), a YAML or
JSON mapping from entry names to values.

Example:

    keychain:
      - {name: pg_main, kind: postgres_credential}
    ...
      tool: {kind: postgres, auth: pg_main, query: "SELECT 1"}

    export NOETL_KEYCHAIN_PG_MAIN=postgresql://app:secret@127.0.0.1:5432/app
""",
        "set NOETL_KEYCHAIN_<NAME> or add the entry to the keychain file",
    ),
    code(
        "NOE813",
        "keychain-file-invalid",
        "error",
        "the keychain file cannot be read or is not a mapping",
        """
The keychain file (`--keychain FILE`, default `.noetl/keychain.yaml`) must be a YAML or JSON
mapping from entry names to values: a string (a DSN, a token) or a mapping of fields. The file
named does not exist, cannot be read, is not valid YAML, or holds something else than a mapping.

Example (a list instead of a mapping):

    - pg_main: postgresql://app:secret@127.0.0.1:5432/app
""",
        "write `name: value` pairs at the top level of the file",
    ),
    code(
        "NOE814",
        "store-unwritable",
        "error",
        "the SQLite store cannot be written now",
        """
SQLite lets one process write a store file at a time. A command waited for the write lock
and did not get it, or the file could not be written at all: another process has held the
lock past the wait (a `noetl-vm` stopped with Ctrl-Z or SIGSTOP, a debugger, a stuck
`sqlite3` shell inside a transaction), the disk is full, or the file or its folder is
read-only. Nothing that was committed is lost; what the command was writing was not
committed, and running the command again continues from the log (`noetl-vm resume` for an
execution that was running).

Example (a second process holds the write lock):

    sqlite3 .noetl/noetl.db 'BEGIN IMMEDIATE; SELECT 1;' & noetl-vm resume 2126…
""",
        "find the process that holds the file (`fuser FILE`), continue or end it, free disk "
        "space or fix the permissions, then run the command again",
    ),
    code(
        "NOE820",
        "missing-extra",
        "error",
        "the command needs an optional dependency that is not installed",
        """
`pip install noetlc` installs what the compiler, the checker and `noetl-vm run` need. Two
extras add the rest: `noetlc[service]` (fastapi, uvicorn, cryptography) for `noetl-vm serve`,
`noetl-vm catalog` and encrypted credentials; `noetlc[postgres]` (asyncpg) for distributed mode
(`server`, `worker`, `submit`, `db`, every `postgresql://` URL) and the postgres tool. The
message names the missing package and the extra that installs it; a task of the postgres tool
fails with a `ToolUnavailable` error naming the extra instead.

Example:

    pip install noetlc
    noetl-vm serve        # error[NOE820]: ... pip install 'noetlc[service]'
""",
        "install the extra the message names",
    ),
    code(
        "NOE830",
        "doubtful-option",
        "warning",
        "a command-line value is accepted but is probably not what was meant",
        """
The command goes on, but a value looks like a mistake: `--set KEY=VALUE` for a key the
playbook's `workload:` does not declare (often a typo), or a number that is not finite
(`--set n=1e999` is infinity).

Example:

    noetl-vm run playbook.yaml --set itmes=3    # the workload declares `items`
""",
        "check the spelling of the key against the playbook's `workload:`",
    ),
    code(
        "NOE831",
        "execution-owned",
        "error",
        "a live process runs the execution",
        """
An embedded execution is owned by the process that runs it (`noetl-vm run` or `resume`): the
event store records its pid and host and a heartbeat. `resume` takes an execution over only
when that process is gone (no such pid on this host, or no heartbeat for 15 seconds); running
it from two processes at once would run its tasks twice.

Example:

    noetl-vm run long.yaml &          # still running
    noetl-vm resume 6f1c              # error[NOE831]: ... running in process 4242 on host-a
""",
        "wait for it to end, or stop that process first (`noetl-vm cancel ID`)",
    ),
    code(
        "NOE832",
        "wait-timed-out",
        "error",
        "the execution did not end within the --timeout of submit --wait",
        """
`noetl-vm submit --wait --timeout S` stops waiting after S seconds. The execution itself goes
on (or waits for a server and a worker): `noetl-vm status ID --db URL` shows it later.

Example:

    noetl-vm submit playbook.yaml --db postgresql://... --wait --timeout 5
""",
        "are `noetl-vm server` and `noetl-vm worker` running on this database?",
    ),
    code(
        "NOE833",
        "ownership-lost",
        "error",
        "another process took the execution over while this one was not running",
        """
Every write of an embedded execution is fenced by its owner's lease: it commits only while
the store still names this process's lease. A process that was stopped (SIGSTOP, a suspended
laptop, a frozen VM) longer than the lease's TTL is dead to `noetl-vm resume`, which takes
the execution over. When the stopped process runs again, its next commit is refused: it
writes nothing more, asks its running tasks to stop and exits 4. The new owner finishes the
execution; no iteration is recorded twice. `NOETL_LEASE_TTL` sets the TTL (seconds, 15).

Example:

    noetl-vm run long.yaml &  kill -STOP %1    # stopped for longer than 15 s
    noetl-vm resume 6f1c                       # takes it over
    kill -CONT %1                              # error[NOE833]: ... was taken over ...
""",
        "nothing to do: the new owner finishes the execution (`noetl-vm status ID`)",
    ),
)
