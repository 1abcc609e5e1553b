"""NOE4xx: legacy forms rewritten into canonical form (warnings), and what cannot be."""

from noetlc.diagnostics.codes import CodeInfo, code

_MIGRATE = "run `noetlc migrate FILE -i` to rewrite the file in canonical form"


def _legacy(number: str, name: str, title: str, example: str) -> CodeInfo:
    return code(
        number,
        name,
        "warning",
        title,
        f"""
This is a legacy form of the NoETL language. noetlc rewrites it into the canonical form
before compiling, so it runs, but tools that only know the canonical form will
not understand the file. `noetlc migrate` prints the canonical version; docs/migration.md has
a before/after example for every form.

Example:

{example}
""",
        _MIGRATE,
    )


def _migrate_only(number: str, name: str, title: str, example: str) -> CodeInfo:
    return code(
        number,
        name,
        "warning",
        title,
        f"""
This is a legacy form of the NoETL language that only `noetlc migrate` rewrites: `noetlc check`
rejects it in a file (an error whose hint says to run `migrate`), and `noetlc migrate` rewrites
it into the canonical form, reporting this warning for every place it rewrote.
docs/migration.md shows the rewrite.

Example:

{example}
""",
        _MIGRATE,
    )


CODES: tuple[CodeInfo, ...] = (
    _legacy(
        "NOE401",
        "named-key-task",
        "named-key task",
        '    tool:\n      - fetch: {kind: http, url: "..."}',
    ),
    _legacy(
        "NOE402",
        "root-identity",
        "root `name:`/`path:`",
        "    name: my_playbook\n    path: examples/my_playbook",
    ),
    _legacy(
        "NOE403",
        "step-when",
        "step-level `when:`",
        '    - step: notify\n      when: "{{ workload.enabled }}"',
    ),
    _legacy(
        "NOE404",
        "legacy-loop-keys",
        "legacy loop keys",
        '    loop: {collection: "{{ workload.items }}", element: item, mode: parallel}',
    ),
    _legacy(
        "NOE405",
        "legacy-retry",
        "`retry:` block",
        "    retry: {max_attempts: 3, initial_delay: 1, backoff_multiplier: 2}",
    ),
    _legacy("NOE406", "vars-block", "step `vars:` block", '    vars: {user_id: "{{ result.id }}"}'),
    _legacy(
        "NOE407",
        "sink-block",
        "step `sink:` block",
        '    sink: {kind: postgres, command: "INSERT ..."}',
    ),
    _legacy(
        "NOE408",
        "case-block",
        "step-level `case:`",
        "    case:\n      - when: \"{{ event.name == 'call.done' }}\"\n        then:\n          - next: [{step: end}]",
    ),
    _legacy(
        "NOE409",
        "routing-only-step",
        "a step without a tool",
        '    - step: decide\n      case:\n        - when: "{{ workload.go }}"\n          then: [{step: go}]',
    ),
    code(
        "NOE410",
        "not-desugarable",
        "error",
        "a legacy construct has no canonical rewrite",
        """
A few legacy `case`/`retry` actions have no canonical meaning: `catch`/`finally` inside `case`,
tool calls or `result:` in a rule that runs after the step ended (`step.exit`) or after a
failed call, tasks in a rule that also retries or skips the call, a `sink` or task without a
tool `kind:`, a `collect` without `into:`, anything but `set` at `step.enter`. They are reported
instead of being guessed at; docs/migration.md shows how to write each with canonical tasks
and policy rules (in a `call.done` rule, `result`, `sink` and named tasks are rewritten).

Example (a loop's `step.exit` runs after all iterations: no task can set the result there):

    loop: {in: "{{ workload.items }}", iterator: item}
    case:
      - when: "{{ event.name == 'step.exit' }}"
        then:
          - result: {from: ctx.items}
""",
        "write the behaviour with task policy rules (`do: jump`, `set_iter`, `set_ctx`)",
    ),
    _legacy(
        "NOE412",
        "legacy-event-names",
        "legacy event names in arc guards",
        "    next:\n      arcs:\n        - step: done\n          when: \"{{ event.name == 'call.done' }}\"",
    ),
    _migrate_only(
        "NOE413",
        "legacy-eval",
        "task `eval:` rules",
        "    eval:\n      - expr: \"{{ outcome.status == 'error' }}\"\n        do: retry\n        attempts: 3",
    ),
    _migrate_only(
        "NOE414",
        "root-vars",
        "root-level `vars:`",
        "    vars:\n      current_page: 1\n    workflow: ...",
    ),
    _migrate_only(
        "NOE415",
        "case-pipe",
        "`pipe:` in a `case` rule",
        '    then:\n      - pipe:\n          - fetch: {tool: {kind: http, url: "..."}}',
    ),
    _migrate_only(
        "NOE416",
        "next-entry-then",
        "`next` entries with `when`/`then`",
        '    next:\n      - when: "{{ workload.go }}"\n        then: [{step: go}]',
    ),
    _migrate_only(
        "NOE417",
        "root-tracing",
        "root-level `tracing:` (removed by `migrate`)",
        "    tracing:\n      enabled: true\n      otlp_endpoint: http://collector:4318",
    ),
    _legacy(
        "NOE419",
        "incoming-result",
        "a bare `result` in a step's tools (the incoming step's result)",
        '    - step: end\n      tool:\n        kind: python\n        input: {data: "{{ result }}"}',
    ),
    _legacy(
        "NOE420",
        "legacy-result-key",
        "`<step>.result` read through a result without a `result` key (the `case:` form)",
        "    - step: check\n      tool:\n        kind: python\n"
        '        args: {rows: "{{ validate.data.result.command_0.rows }}"}',
    ),
    _migrate_only(
        "NOE418",
        "tool-as-kind",
        "`tool: KIND` (or `type: KIND`) with the arguments on the step or a workbook entry",
        "    - step: load\n      tool: postgres\n      auth: pg_main\n      command: SELECT 1",
    ),
    code(
        "NOE411",
        "malformed-sugar",
        "error",
        "a `choose`/`while`/`until` block is malformed",
        """
The authoring sugar blocks need their parts: `choose:` a list of `{when, then: [tasks]}`
branches (and optionally `{else: [tasks]}`), `while:`/`until:` a condition and `do: [tasks]`.
See docs/sugar.md.

Example:

    tool:
      - while: "{{ iter.has_more }}"
""",
        "see docs/sugar.md for the syntax",
    ),
)
