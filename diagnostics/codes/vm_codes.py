"""NOE850–NOE859: what an execution reports when it ends badly (the VMs and `noetl-vm`)."""

from noetlc.diagnostics.codes import code

CODES = (
    code(
        "NOE850",
        "vm-internal-error",
        "error",
        "the control VM hit an internal error",
        """
The control VM never raises: an unexpected error inside it fails the execution with this code
and the exception's text, so the event log stays consistent and `noetl-vm replay` can show
where it happened. It is a bug in noetl; please report it with the playbook.

Example:

    noetl-vm run playbook.yaml    # error[NOE850]: KeyError: ...
""",
        "please report it with the playbook and `noetl-vm events ID --json`",
    ),
    code(
        "NOE852",
        "no-admission-rule",
        "error",
        "no admission rule of a step fired",
        """
A step's `spec.policy.admit.rules` neither allowed nor skipped the arriving token. The
compiler adds an allowing default rule, so this only happens with hand-made bytecode.

Example:

    spec: {policy: {admit: {rules: [{when: "{{ false }}", allow: true}]}}}
""",
        "add a final rule without `when`",
    ),
    code(
        "NOE853",
        "unhandled-step-failure",
        "error",
        "a step failed and no arc handles the failure",
        """
A step ended with `step.failed` (its pipeline failed, or a loop iteration failed under
`fail_fast`) and none of its arcs listens to the failure, so the execution fails. The
message is the step's error; the location is the failing step's YAML line.

Example:

    - step: fetch
      tool: {kind: python, code: "raise ValueError('boom')"}
      next:
        arcs:
          - step: cleanup
            when: "{{ event.name == 'step.failed' }}"   # handles it
""",
        "route the failure with an arc whose `when` tests `event.name == 'step.failed'`",
    ),
    code(
        "NOE854",
        "join-deadlock",
        "error",
        "a join waits for a branch that can never arrive",
        """
An AND-join holds tokens from some branches of its fork while the execution has nothing
left to run: the missing branch will never arrive (for example it was routed around the
join). `noetlc lint` finds such nets before they run.

Example:

    spec: {join: all}   # on a step reached from an exclusive split
""",
        "use `spec.join: any` or route every branch of the fork to the join",
    ),
    code(
        "NOE855",
        "execution-cancelled",
        "error",
        "the execution was cancelled",
        """
`noetl-vm cancel ID` was requested. No new step or iteration starts, running tasks are
asked to stop, and the execution ends with status `cancelled` (exit status 3).

Example:

    noetl-vm cancel 6f1c...
""",
        None,
    ),
    code(
        "NOE856",
        "execution-ended",
        "error",
        "the execution already ended",
        """
`resume` and `signal` need a running execution; this one already ended (completed, failed
or cancelled). `noetl-vm status ID` shows its summary.

Example:

    noetl-vm resume 6f1c...
""",
        "`noetl-vm status ID` shows how it ended",
    ),
    code(
        "NOE857",
        "execution-without-program",
        "error",
        "the execution was recorded without its program",
        """
A store written by an older noetlc keeps no copy of the compiled program, so the execution
cannot be replayed or resumed. Run the playbook again.

Example:

    noetl-vm replay 6f1c...
""",
        "run the playbook again",
    ),
    code(
        "NOE858",
        "budget-exceeded",
        "error",
        "the execution, or one run of a step's tasks, went over its budget",
        """
Every execution has budgets, so a cycle that never ends or a runaway loop stops instead of
filling memory and disks: events 250,000, step runs 25,000, loop iterations 100,000, ctx size
50,000,000 characters and items (0 means no limit). The error names the budget and carries
the counts. One run of a step's tasks (its jumps and retries) is bounded too: 1,000,000
instructions and 10,000 tool calls. Across child executions (`kind: playbook`), the root's
`child_depth` (32) and `child_executions` (2,000) bound its whole tree: a call past one fails
its step with this code. Raise a budget in the playbook or on the command line.

Example:

    executor:
      spec:
        budgets: {step_runs: 100000}

    noetl-vm run playbook.yaml --budget step_runs=100000
""",
        "raise the budget (`executor.spec.budgets`, `--budget NAME=N`), or give the cycle an "
        "exit that its turns change",
    ),
    code(
        "NOE859",
        "step-deadline",
        "error",
        "a step of the control VM ran past the server's deadline",
        """
A server runs each step of an execution's control VM (a batch of its input events, or the
replay that rebuilds it) under a deadline (30 s by default): a guard or template that takes
that long would stop the server from renewing its leases and advancing every other
execution. Past the deadline the execution is failed, once, with this code; the server and
every other execution go on, and no other server takes the execution over.

Example (a template loop near the expression step budget, evaluated on every turn):

    when: "{% for i in range(100000) %}{% for j in range(19) %}{% endfor %}{% endfor %}x"
""",
        "simplify the guards of the steps it was deciding, or compute in a task",
    ),
)
