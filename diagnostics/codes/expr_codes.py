"""NOE3xx: templates and expressions."""

from noetlc.diagnostics.codes import CodeInfo, code

CODES: tuple[CodeInfo, ...] = (
    code(
        "NOE301",
        "template-syntax",
        "error",
        "a template does not parse",
        """
Every `{{ … }}` in a playbook is a Jinja expression and every `when:` is one (with or without
the braces). This one is not valid Jinja: an unclosed brace or bracket, a dangling operator,
an unknown tag.

Example:

    when: "{{ outcome.status == 'error' and }}"
""",
        "check the braces and the expression inside `{{ … }}`",
    ),
)

CODES = (
    *CODES,
    code(
        "NOE302",
        "sandbox-violation",
        "error",
        "an expression reaches outside the sandbox",
        """
Templates may read data, never Python internals: attributes and keys starting with `_`,
methods and modules are out of reach, in compiled expressions and on the jinja2 path alike
(a mapping's read-only `get`, `keys`, `values` and `items` aside, as NoETL's templates call
them).
Non-deterministic filters and functions (`random`, `now()`, `uuid()`) are refused too: a
replay of the execution's log evaluates every guard again and must take the same branches;
pass such a value in through the workload or compute it in a python task (its result is
recorded in the log).

Example:

    input: {cls: "{{ workload.__class__ }}"}
    when: "{{ [true, false] | random }}"
""",
        "read the data you need through the playbook's namespaces",
    ),
    code(
        "NOE303",
        "slow-path-expression",
        "note",
        "an expression runs on jinja2's slow path",
        """
The expression is valid Jinja but outside the subset noetlc compiles to Python code (method
calls, `{% %}` blocks, filters outside the whitelist). It still works, through jinja2's
sandboxed environment, at about 10 µs per evaluation instead of ~0.1 µs. See
docs/expressions.md for the compiled subset.

Example:

    when: "{{ ctx.items.keys() | length > 0 }}"
""",
        "rewrite with the whitelisted filters (e.g. `ctx.items | length`)",
    ),
    code(
        "NOE304",
        "text-condition",
        "warning",
        "a condition is text with a template inside",
        """
A `when:` that is not one expression — some text around `{{ … }}` — renders to a string, and
a non-empty string is always true. This is usually a comparison written outside the braces.

Example:

    when: "{{ workload.environment }} == production"
""",
        "put the whole comparison inside the braces",
    ),
)

CODES = (
    *CODES,
    code(
        "NOE305",
        "undefined-name",
        "warning",
        "an expression reads a name nothing in the playbook defines",
        """
A bare name in an expression resolves at the scope root (the namespaces `workload`, `ctx`,
`iter`, `args`, `event`, `outcome`/`output`, …, and every step and task by name, bound to its
result), then as a key of `args`, `ctx`, `iter` and `workload`. This name is none of those:
no step, task, loop iterator, workload key, `set_ctx`/`set_iter` key or arc argument has it.
It is undefined — falsy, rendered as `''` — unless the request's workload happens to supply
it. Names written under `| default(...)` or `is defined` are not reported.

Example (the threshold lives in `workload`, and `spec` is not a namespace):

    workload: {threshold: 30}
    ...
        when: "{{ fetch_weather.max_temp > spec.threshold }}"
""",
        "use a namespace (`workload.x`, `ctx.x`, `iter.x`) or a step name; "
        "add `| default(...)` if the value is optional",
    ),
    code(
        "NOE306",
        "generic-result-name",
        "error",
        "`task.result` / `step.data`: a result read through a generic name",
        """
Older NoETL texts read the current task's or step's result as `{{ task.result }}` or
`{{ step.data }}`. Results are read by the name of the step or task that produced it:
`{{ fetch }}` is the result of the step (or task) `fetch`, and `{{ fetch.data }}` is the `data`
key of that result (an HTTP response's body, say). No step or task of this playbook is named
`task` or `step`, so the expression would read nothing: it is refused rather than left to
render as empty.

Example:

    - step: fetch
      tool: {kind: http, url: "https://example.com/items"}
      next:
        arcs:
          - step: save
            args: {items: "{{ step.data }}"}      # write "{{ fetch.data }}"
""",
        "write the name of the step or task whose result you mean: `{{ fetch }}`, "
        "`{{ fetch.data }}`",
    ),
    code(
        "NOE310",
        "expression-runtime-error",
        "error",
        "an expression failed when it was evaluated",
        """
The expression compiled, but evaluating it raised an error: arithmetic on an undefined
value, a comparison between incompatible types, a filter given the wrong input, a sandbox
refusal of a dynamic key, printing an object that is not data (`{{ range }}`: its text
would be a memory address). The message names the expression and where it was written.

Example (`ctx.count` is undefined, and undefined values cannot be added to):

    noetlc expr "{{ ctx.count + 1 }}" --vars '{"ctx": {}}'
""",
        "use `| default(...)` for values that may be missing",
    ),
    code(
        "NOE311",
        "expression-limit",
        "error",
        "an expression went over a resource limit",
        """
Evaluating the expression would have built a value or done work beyond the limits every
evaluation has: integers of at most 14,000 bits (about 4,200 digits; `3 ** 14000` is
refused before it is computed), strings and sequences of at most 1,000,000 characters or items
(from `~`, `+`, `*`, `%`-formatting, `join`, `replace`, padding filters such as `center`,
the text a `{% for %}` renders), at most 8,000,000 units built by one evaluation in all (a
character is one, an item of a list or mapping four), at most 100,000 elements per `range`, and at most 2,000,000 steps for the
`{% %}` templates of one evaluation, and of all those one event of the execution causes.
The guard or task that evaluated it fails; the process and other executions go on.

Example:

    noetlc expr "{{ (10 ** 9999) ** 9999 > 1 }}"
""",
        "compute large values in a python task, or bound the input the expression works on",
    ),
)
