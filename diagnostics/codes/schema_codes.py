"""NOE1xx: the surface schema."""

from noetlc.diagnostics.codes import code

CODES = (
    code(
        "NOE101",
        "unknown-key",
        "error",
        "unknown key",
        """
The key is not part of the structure it appears in. Steps, loops, routers, arcs, policies and
rules have a fixed set of keys; a misspelt key would otherwise be silently ignored. Tool tasks
accept their kind's arguments, which the tool check validates separately. Inside a policy
rule's `then:` an unknown key is reported as a warning and ignored, as NoETL's engine ignores
it there (its rule actions accept extra keys).

Example (`nxt` instead of `next`):

    - step: start
      tool: {kind: noop}
      nxt: end
""",
        "check the spelling; `noetlc schema` prints every allowed key",
    ),
    code(
        "NOE102",
        "missing-key",
        "error",
        "a required key is missing",
        """
The structure needs this key. A playbook needs `workflow:`, every step needs `step:` (its
name), a router needs `arcs:`, an arc needs `step:`, an admission policy needs `rules:`.

Example (an arc without its target):

    next:
      arcs:
        - when: "{{ start.ok }}"
""",
        None,
    ),
    code(
        "NOE103",
        "wrong-type",
        "error",
        "a value has the wrong type",
        """
The value is of a different type than this key takes: a list where a mapping is expected, a
string where a number is expected, and so on.

Example (`workflow` must be a list of steps):

    workflow:
      step: start
""",
        None,
    ),
    code(
        "NOE104",
        "invalid-value",
        "error",
        "a value is not one of the allowed choices",
        """
This key takes one of a fixed set of words, for example `next.spec.mode` is `exclusive` or
`inclusive`, a policy directive `do:` is `continue`, `retry`, `jump`, `break` or `fail`.

Example:

    then: {do: restart}
""",
        None,
    ),
    code(
        "NOE105",
        "rejected-legacy-key",
        "error",
        "a legacy key that is no longer supported",
        """
Some forms of older NoETL dialects are not part of the canonical language and `check` rejects
them: root-level `vars:`, task `eval:`, `pipe:`, `next` entries with `then:`/`else:` and
`tool: KIND` with the arguments on the step are rewritten by `noetlc migrate FILE -i` (the hint
says so); `expr:` and step `type:` have no rewrite. The hint says what to write instead.

Example:

    - step: start
      type: python
      code: "result = 1"
""",
        None,
    ),
    code(
        "NOE106",
        "unsupported-construct",
        "error",
        "a NoETL construct noetlc does not implement",
        """
The NoETL specifications define a few settings that noetlc does not implement. They are
refused rather than accepted and ignored, so a playbook never runs differently from what it
says: a `case` rule's own `retry:` (re-running a whole chain) or `spec:` (`cache`); a per-`next`
`policy` other than `end_step`, `priority` or `spec` (a delayed transition); `tool.spec.async:
true`; a step's `spec.on_error` other than `fail`. The hint says how to write the behaviour
with what is supported; docs/compatibility.md lists every construct.

Example:

    case:
      - when: "{{ event.name == 'call.done' }}"
        retry: {scope: chain, max_attempts: 3}
        then:
          - save: {tool: {kind: postgres, command: "..."}}
""",
        None,
    ),
)
