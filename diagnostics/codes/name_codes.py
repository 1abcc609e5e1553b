"""NOE2xx: names, references and structure."""

from noetlc.diagnostics.codes import code

CODES = (
    code(
        "NOE201",
        "duplicate-step",
        "error",
        "two steps have the same name",
        """
Step names identify steps in arcs, in templates (`{{ fetch.rows }}`) and in events, so they
must be unique within a playbook. Both definitions are shown.

Example:

    workflow:
      - step: start
        tool: {kind: noop}
      - step: start
        tool: {kind: noop}
""",
        "rename one of the steps",
    ),
    code(
        "NOE202",
        "unknown-step",
        "error",
        "a reference to a step that does not exist",
        """
An arc (`next:`), the entry step (`executor.spec.entry_step`) or the final step names a step
that is not in the workflow.

Example:

    - step: start
      tool: {kind: noop}
      next: ned        # there is a step `end`, not `ned`
""",
        None,
    ),
    code(
        "NOE203",
        "bad-jump-target",
        "error",
        "a jump target is not a task of the same pipeline",
        """
`do: jump` moves to another task of the same step's `tool:` list. It cannot leave the step
(only arcs start steps) and it needs `to:`.

Example:

    tool:
      - name: fetch
        kind: http
        url: "{{ workload.url }}"
        spec:
          policy:
            rules:
              - else:
                  then: {do: jump, to: fetch_again}
""",
        None,
    ),
    code(
        "NOE204",
        "incomplete-loop",
        "error",
        "a loop needs `in:` and `iterator:`",
        """
A loop runs its step once per element of `in:` (a template or a list), binding the element
to `iter.<iterator>`. Both keys are required, and `in:` must be a YAML list or a string with a
`{{ ... }}` template (a number, a mapping or plain text cannot be iterated over).

Example:

    loop:
      in: "{{ workload.items }}"
""",
        'write `loop: {in: "{{ workload.items }}", iterator: item}`',
    ),
    code(
        "NOE205",
        "unknown-tool-kind",
        "error",
        "unknown tool kind",
        """
The task's `kind:` is not a built-in tool (noop, python, http, postgres, duckdb, sqlite,
shell, playbook, workbook, secrets, transfer, nats), nor a kind an installed plugin adds
(entry-point group `noetlc.tools`), nor one of the kinds known by name that need a plugin
(NOE607). The hint suggests the closest known kind; it also lists plugins that failed to load.

Example:

    tool: {kind: pyhton, code: "result = 1"}
""",
        None,
    ),
    code(
        "NOE206",
        "missing-tool",
        "error",
        "a step or task has no tool",
        """
Every step runs a pipeline of tool tasks, and every task says which tool it calls with
`kind:`. A step that only routes can use `tool: {kind: noop}`.

Example:

    - step: start
      next: end
""",
        None,
    ),
    code(
        "NOE207",
        "bad-workbook-reference",
        "error",
        "a workbook task reference is missing or unknown",
        """
`kind: workbook` runs a named task from the playbook's root `workbook:` list; `name:` must
name one of them, and every workbook task needs a name.

Example:

    workbook:
      - name: compute_flag
        kind: python
        code: "result = True"
    workflow:
      - step: start
        tool: {kind: workbook, name: compute_flags}
""",
        None,
    ),
    code(
        "NOE208",
        "reserved-name",
        "error",
        "a step or task name shadows a template namespace",
        """
Finished steps and tasks are bound by name in templates (`{{ fetch.rows }}`). A step named
like a namespace (`workload`, `ctx`, `iter`, `args`, `event`, `outcome`, `output`,
`keychain`, `vars`, `execution_id`, or anything starting with `_`) would hide it.

Example:

    - step: ctx
      tool: {kind: noop}
""",
        None,
    ),
    code(
        "NOE209",
        "implicit-entry",
        "warning",
        "no step is named `start`",
        """
The entry step is the one named `start` (or `executor.spec.entry_step`). Without either, the
first step is used, which silently changes when steps are reordered.

Example:

    workflow:
      - step: begin
        tool: {kind: noop}
""",
        "name the entry step `start`",
    ),
    code(
        "NOE210",
        "empty-workflow",
        "error",
        "the workflow has no steps",
        """
A playbook needs at least one step.

Example:

    workflow: []
""",
        None,
    ),
    code(
        "NOE211",
        "duplicate-task",
        "error",
        "two tasks of one pipeline have the same name",
        """
Task names are jump targets and are bound by name in later tasks' templates, so they must be
unique within a step's `tool:` list.

Example:

    tool:
      - {name: fetch, kind: noop}
      - {name: fetch, kind: noop}
""",
        "rename one of the tasks",
    ),
    code(
        "NOE212",
        "bad-loop-spec",
        "error",
        "an unsupported loop mode, bound or cursor",
        """
Collection loops (`in:`) run `sequential` (default) or `parallel` with `max_in_flight` (an
integer ≥ 1 or a template giving one, default 10) iterations at once. Cursor loops
(`cursor: {kind: postgres, auth, claim}`) need `spec.mode: cursor` and no `in:`; their only
driver is postgres, as in NoETL (docs/compatibility.md, "Cursor loops").

Example (`mode: cursor` over a collection):

    loop:
      in: "{{ workload.items }}"
      iterator: item
      spec: {mode: cursor}
""",
        None,
    ),
    code(
        "NOE213",
        "bad-retry-bound",
        "error",
        "retry attempts must be a literal integer",
        """
`attempts` bounds the total number of tries of a `do: retry` rule; it must be known at compile
time so the worst-case retry time can be computed.

Example:

    then: {do: retry, attempts: "{{ workload.retries }}"}
""",
        None,
    ),
    code(
        "NOE214",
        "unwritable-scope",
        "error",
        "a `set:` writes a read-only namespace",
        """
Only `ctx.` (execution scope) and `iter.` (iteration scope) can be written; `workload` is
immutable, and `args`, `event` and `outcome` describe what happened. A step's or an arc's
`set:` runs outside the loop's iterations, so it can only write `ctx.`.

Example:

    set:
      workload.page: 2
""",
        "write `ctx.page` instead",
    ),
    code(
        "NOE215",
        "rule-without-action",
        "error",
        "a policy or admission rule has no `then:`",
        """
Every rule of a task policy (`spec.policy.rules`) or of an admission policy
(`spec.policy.admit.rules`) says what happens when it matches: `then: {do: ...}` or
`then: {allow: ...}`. A rule without `then:` would match and do nothing, which is never what
was meant; the last rule is usually written `else: {then: {...}}`.

Example (the `then:` is missing):

    spec:
      policy:
        rules:
          - when: "{{ outcome.status == 'error' }}"
""",
        "add `then: {...}`",
    ),
)
