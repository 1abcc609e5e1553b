"""NOE6xx: tool kinds and tool arguments (the `tools` pass, `stdlib_tools/schemas.py`)."""

from noetlc.diagnostics.codes import code

CODES = (
    code(
        "NOE601",
        "unknown-tool-argument",
        "warning",
        "an argument the tool kind does not take: ignored, as NoETL ignores it",
        """
Each tool kind takes a set of arguments (`docs/tools.md` lists them, with the NoETL spellings
it accepts, such as `endpoint` for `url` or `command` for `query`). NoETL's tool models accept
extra keys and its executors read only their own, so a playbook may carry keys a kind does not
use (`timeout_seconds` on an http task, `exports` on a shell task): noetlc runs such a task as
NoETL does, without the key, and warns, because a misspelt argument is ignored the same way
(the call runs without it). Keys inside structured arguments (`timeout: {connect, read}`,
`assert: {expects, returns}`) are treated the same way. A misspelt tool *kind* is an error
(NOE205), and so is a required argument that is missing (NOE602).

Example (`header` instead of `headers`: the request is sent without the headers):

    - name: fetch
      kind: http
      url: "{{ workload.api }}/items"
      header: {Accept: application/json}
""",
        "check the spelling (the hint names the closest argument); remove the key to silence "
        "the warning; docs/tools.md lists every argument of every kind",
    ),
    code(
        "NOE602",
        "missing-tool-argument",
        "error",
        "a required tool argument is missing",
        """
The tool cannot run without this argument: `url` for http, `code` for python, `query` (or
`command`/`sql`) and `auth` for postgres, `query` for sqlite and duckdb, `command` (or `cmds`)
for shell, `path` for playbook. The diagnostic points at the task's `kind:`.

Example (a postgres task without its SQL):

    - name: save
      kind: postgres
      auth: pg_main
""",
        None,
    ),
    code(
        "NOE603",
        "wrong-tool-argument-type",
        "error",
        "a tool argument has the wrong type",
        """
The literal value written for the argument has a type the tool cannot use, or is not one of
its choices: a list where a mapping of query parameters is expected, a word where a number of
seconds is expected, an HTTP method that does not exist. Templates (`"{{ ... }}"`) are not
checked here: their value is known only when the task runs, where the same schema checks it.

Example:

    - name: fetch
      kind: http
      method: FETCH
      url: https://example.com
      timeout: soon
""",
        None,
    ),
    code(
        "NOE604",
        "sql-from-template",
        "warning",
        "SQL text is built from a template",
        """
The SQL of a postgres, sqlite or duckdb task contains `{{ ... }}`: the rendered values become
part of the SQL text. Data spliced into SQL breaks on quotes and is an injection risk (the
tools take parameters, never SQL built from data). Pass values as `params:`
(`$1, $2` for postgres, `?` for sqlite and duckdb); templates remain fine for identifiers you
control, such as a schema name from the workload. SQL that is exactly one template
(`query: "{{ workload.report_sql }}"`) is one value, not spliced text, and is not warned about.

Example:

    - name: save
      kind: postgres
      auth: pg_main
      command: "INSERT INTO users (name) VALUES ('{{ iter.user.name }}')"

Instead:

      command: "INSERT INTO users (name) VALUES ($1)"
      params: ["{{ iter.user.name }}"]
""",
        "pass the values as `params:` and use placeholders in the SQL",
    ),
    code(
        "NOE605",
        "conflicting-tool-arguments",
        "error",
        "two arguments that exclude each other",
        """
The task gives the same argument under two spellings (`url` and `endpoint`, `query` and
`command`), or two arguments that cannot be combined: only one request body (`json`, `data`,
`payload`, `body`, `form`) for http, `command` or `cmds` for shell.

Example:

    - name: fetch
      kind: http
      url: https://example.com/a
      endpoint: https://example.com/b
""",
        "keep one of them",
    ),
    code(
        "NOE606",
        "undeclared-keychain-entry",
        "warning",
        "a task uses a keychain entry the playbook does not declare",
        """
The playbook declares the credentials it needs under the root `keychain:`, and a task names
another one (`auth:` of postgres, http and python, `key:` of secrets). The keychain's providers
may still have a value for it, so this is a warning; usually it is a typo, which would otherwise
surface only at run time as NOE812. Playbooks without a `keychain:` section are not checked.

Example:

    keychain:
      - {name: pg_main, kind: postgres_credential}
    workflow:
      - step: start
        tool: {kind: postgres, auth: pg_mian, query: "SELECT 1"}
""",
        "declare the entry under `keychain:` or fix the name",
    ),
    code(
        "NOE620",
        "python-syntax-error",
        "error",
        "the code of a python task does not compile",
        """
The `code:` of a python task is compiled when the playbook is checked, so a syntax error is
found before anything runs. The code runs as a module (its `result`, or what its `main()`
returns, is the task's result), or as a function body when it has a top-level `return`. The
position is the offending line in the playbook. Code that is a template (`{{ ... }}`) is
rendered at run time and compiled then.

Example:

    tool:
      kind: python
      code: |
        result = {"n": 1
""",
        "fix the Python syntax at the line shown",
    ),
    code(
        "NOE607",
        "tool-kind-needs-plugin",
        "note",
        "a tool kind that needs a plugin which is not installed",
        """
NoETL has tool kinds that talk to cloud services or to NoETL's own stores (snowflake, ducklake,
gcs, container, rhai, subscription, mcp, artifact). They are known by name: the playbook checks, with this note naming the
plugin the kind needs, and a run fails that task with a `ToolUnavailable` error. A package
that registers the kind in the `noetlc.tools` entry-point group makes it a real tool (its
arguments are then checked, and workers run it); see docs/tools.md.

Example:

    - step: load
      tool: {kind: snowflake, auth: sf_main, command: "SELECT 1"}
""",
        "install a plugin package that provides the kind",
    ),
    code(
        "NOE608",
        "python-code-from-template",
        "warning",
        "python code contains templates",
        """
The `code` of a python task contains `{{ ... }}` (or `{% ... %}`). As NoETL does, the
templates are rendered into the code's text before it runs, over the same names as any other
template plus the task's own inputs. Rendered values become source code: a string value
needs quotes around it in the code, quotes inside it break the code, and a mapping becomes its
Python text. Values are safer as inputs, which the code reads as variables.

Example:

    - step: start
      tool:
        kind: python
        input: {count: "{{ workload.count }}"}
        code: |
          total = {{ count }} * 2
""",
        "pass the value through `input:` and use it as a variable",
    ),
    code(
        "NOE610",
        "child-playbook-waited-for",
        "warning",
        "a playbook task with `wait: true`: noetlc waits for the child, NoETL does not",
        """
`wait: true` is noetlc's own argument of the playbook tool; NoETL ignores it. There, a playbook
task without `return_step:` starts the child execution and returns at once with
`{execution_id, status: started}` (the parent goes on while the child runs, and a child that
fails does not fail the parent), and one with `return_step:` waits and gives the child's status
view (`completed`, `failed`, `variables`, ...). With `wait: true` noetlc waits for the child:
the task's result is the child's result (with `return_step:`, that step's result), and a child
that fails fails the task. The same file run on NoETL does neither.

Example:

    - step: run_child
      tool:
        kind: playbook
        path: children/load_users
        wait: true
""",
        "leave `wait:` out to run the child as NoETL does (add `return_step:` to wait for it); "
        "keep it only for playbooks that run on noetlc",
    ),
    code(
        "NOE609",
        "result-storage-choice",
        "note",
        "a step's result storage choice is not made per step",
        """
A step's `output:` (legacy `result:`) may say how NoETL stores its result: `store: {kind:
auto|memory|kv|object|...}` and `inline_max_bytes`. Here every result is kept whole, and one
over the payload limit (`executor.spec.policy.limits.max_payload_bytes`, 1 MiB by default) is
stored by reference in the execution's own store, which templates read transparently; so
`output_select` fields stay readable by name, and these storage keys change nothing.

Example:

    - step: generate
      tool: {kind: python, code: "result = {'count': 3, 'items': [1, 2, 3]}"}
      output:
        output_select: [count]
        store: {kind: auto}
""",
        "remove the storage keys, or keep them for NoETL",
    ),
)
