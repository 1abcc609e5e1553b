"""NOE870–NOE879: the HTTP service (`noetl-vm serve`) and its catalog and credential store."""

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
`--credential-key-file`. `noetl-vm serve` does not start without a usable key.

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
The service was started with `--no-credential-values`: `GET /api/credentials/NAME?include_data=true`
is refused (403). Executions still read the values through the keychain.

Example:

    noetl-vm serve --no-credential-values
    curl 'http://127.0.0.1:8082/api/credentials/pg_local?include_data=true'
""",
        "read the credential through a playbook's keychain, or restart without the flag",
    ),
)
