"""NOE870–NOE883: the HTTP service (`noetl-vm serve`) and its catalog and credential store."""

from noetlc.diagnostics.codes import code

CODES = (
    code(
        "NOE870",
        "api-unauthorized",
        "error",
        "the request has no valid bearer token",
        """
The service was started with a token (`--token` or `NOETL_API_TOKEN`), and every route but
`/api/health` needs it: `Authorization: Bearer TOKEN` (or `x-session-token: TOKEN`). The reply
is 401.

Example:

    curl http://127.0.0.1:8082/api/executions          # no Authorization header
""",
        "send `Authorization: Bearer TOKEN` with the service's token",
    ),
    code(
        "NOE871",
        "api-not-found",
        "error",
        "no such execution, catalog entry, credential or route",
        """
The id or path in the request names nothing the service knows (404): an execution id that
is not in the store, a catalog path or version never registered, a credential name or id
that was deleted, or a route the API does not have.

Example:

    curl -X POST http://127.0.0.1:8082/api/catalog/resource -d '{"path": "nope"}'
""",
        "list what exists: GET /api/executions, POST /api/catalog/list, GET /api/credentials",
    ),
    code(
        "NOE872",
        "api-bad-request",
        "error",
        "the request does not have the fields or values the route needs",
        """
A body that is not JSON, a missing required field, a value of the wrong type or out of range
(422, with the field's location), or a request the state of the execution does not allow
(400, 409: a signal to an execution that already ended).

Example:

    curl -X POST http://127.0.0.1:8082/api/execute -d '{}'     # neither path nor catalog_id
""",
        "docs/api.md shows each route's fields; the OpenAPI schema is at /openapi.json",
    ),
    code(
        "NOE873",
        "playbook-refused",
        "error",
        "the catalog refused a playbook that does not compile",
        """
Registering a playbook compiles it first; a playbook with errors is not stored. The 422 reply
lists every diagnostic with its code, line and column (`diagnostics`), as `noetlc check`
prints them. Content that is not YAML is refused the same way.

Example:

    workflow:
      - step: start
        next: nowhere        # NOE206 at 5:5: step `start` has no `tool:`
""",
        "run `noetlc check FILE` and fix the errors it reports",
    ),
    code(
        "NOE874",
        "credential-key-missing",
        "error",
        "no credential key: the service will not store credentials in plain text",
        """
Credentials are encrypted at rest with AES-GCM under a 32-byte key given as base64 or 64 hex
digits, in the environment variable `NOETL_CREDENTIAL_KEY` or a file named by
`--credential-key-file`; without either, `noetl-vm serve` creates `credential.key` (0600)
beside its store on the first start. A key that does not parse stops `serve` (exit 2); a
stored credential that the key does not open is refused (409, or the task's error), naming
where the key came from.

Example:

    export NOETL_CREDENTIAL_KEY=$(python -c "import base64,os;print(base64.b64encode(os.urandom(32)).decode())")
    noetl-vm serve
""",
        "set NOETL_CREDENTIAL_KEY or pass --credential-key-file FILE",
    ),
    code(
        "NOE875",
        "serve-needs-token",
        "error",
        "the service will not listen beyond loopback without a token",
        """
`noetl-vm serve --host` other than 127.0.0.1, ::1 or localhost exposes the API to the
network; it then needs a bearer token (`--token` or `NOETL_API_TOKEN`).

Example:

    noetl-vm serve --host 0.0.0.0
""",
        "pass --token TOKEN (or set NOETL_API_TOKEN)",
    ),
    code(
        "NOE876",
        "credential-values-refused",
        "error",
        "this service does not return credential values",
        """
The service was not started with `--credential-values` (the default):
`GET /api/credentials/NAME?include_data=true` is refused (403). Executions still read the
values through the keychain.

Example:

    noetl-vm serve
    curl 'http://127.0.0.1:8082/api/credentials/pg_local?include_data=true'
""",
        "read the credential through a playbook's keychain, or start with --credential-values",
    ),
    code(
        "NOE877",
        "api-foreign-origin",
        "error",
        "a Host name the service does not serve, or a change requested by another site's page",
        """
The service answers only the Host names it serves: the loopback names (localhost, 127.0.0.1,
::1) and those given with `--allowed-host`. A web page that points its own DNS name at
127.0.0.1 (DNS rebinding) sends its own name as Host: 421. A request that changes something
(POST, PUT, PATCH, DELETE) with an `Origin` header of a host the service does not serve — a
page of another site posting through the operator's browser, even as text/plain — is 403.

Example:

    curl -H 'Host: attacker.example' http://127.0.0.1:8082/api/credentials
""",
        "start `noetl-vm serve --allowed-host NAME` for a name it should serve",
    ),
    code(
        "NOE878",
        "api-over-limit",
        "error",
        "the request or a part of it is over one of the service's limits",
        """
Every request is bounded: the body (`--max-body-bytes`, 16 MiB), a registered document
(`--max-yaml-bytes`, 4 MiB; `--max-yaml-depth`, 64 levels), an execution's workload
(`--max-workload-bytes`, 1 MiB) and list pages (`--max-page-size`, 500). The reply is 413.

Example:

    curl -X POST http://127.0.0.1:8082/api/catalog/register -d @fifty-megabytes.json
""",
        "send less (large data by reference), or raise the limit with its `--max-...` flag",
    ),
    code(
        "NOE879",
        "api-invalid-text",
        "error",
        "NUL, a lone surrogate or a non-finite number where the service stores text and JSON",
        """
Paths, ids, query parameters and JSON bodies are stored and sent back as UTF-8 JSON: a NUL
character (`\\u0000`, `%00`), a lone UTF-16 surrogate (`\\ud800`), or `NaN`/`Infinity`
(which JSON does not have) cannot be, so the request is refused with 400 before anything is
stored. A registered YAML document is checked the same way after reading (`"\\uD800"`,
`"\\0"`, `.inf`).

Example:

    curl -X POST http://127.0.0.1:8082/api/execute -d '{"path": "p", "workload": {"n": Infinity}}'
""",
        "send UTF-8 text without NUL characters or lone surrogates, and finite numbers",
    ),
    code(
        "NOE880",
        "serve-cannot-listen",
        "error",
        "`noetl-vm serve` cannot listen on the address and port",
        """
The port is in use (often by another `noetl-vm serve`), needs privileges (below 1024), or the
address is not one of this machine's. `serve` exits 5 without starting.

Example:

    noetl-vm serve --port 8082 &
    noetl-vm serve --port 8082
""",
        "pick another --port (or --host), or stop the process that holds it",
    ),
    code(
        "NOE881",
        "serve-store-in-use",
        "error",
        "another `noetl-vm serve` already serves this SQLite store",
        """
An embedded service runs executions in its own process: two on one SQLite file would both
resume the same executions. The second is refused (exit 5) and names the first one's pid. A
PostgreSQL store is meant to be shared by several `serve` processes and is not locked.

Example:

    noetl-vm serve --db sqlite:///work.db --port 8082 &
    noetl-vm serve --db sqlite:///work.db --port 8083
""",
        "use the running service, stop it first, or give this one another --db",
    ),
    code(
        "NOE882",
        "serve-weak-token",
        "error",
        "the API token is blank, too short or not printable",
        """
A bearer token is the only thing between the network and the API: blank tokens (`--token " "`)
and tokens shorter than 16 characters are refused (exit 2), as are tokens with control
characters. Give it in `NOETL_API_TOKEN` or a file (`--token-file FILE`): `--token T` works but
shows T to anyone who lists processes.

Example:

    NOETL_API_TOKEN=abc noetl-vm serve
""",
        'make one with `python -c "import secrets;print(secrets.token_urlsafe(32))"`',
    ),
    code(
        "NOE883",
        "api-query-refused",
        "error",
        "the SQL of `POST /api/query` is not a read-only query that finishes in time",
        """
`noetl query` (and `POST /api/query`) runs SQL against the service's own store in a read-only
transaction (PostgreSQL) or a read-only connection (SQLite) with a statement timeout: a
statement that writes, fails or runs past the timeout is refused with 400 and the database's
message.

Example:

    noetl query "DELETE FROM noetl_events"
""",
        "send one read-only SELECT; narrow it with WHERE and LIMIT",
    ),
)
