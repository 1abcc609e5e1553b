"""NOE5xx: static analysis (noetlc lint). The rules behind them live in `noetlc.analysis`."""

from noetlc.diagnostics.codes import CodeInfo, code

CODES: tuple[CodeInfo, ...] = (
    code(
        "NOE501",
        "unreachable-step",
        "warning",
        "a step no path from the entry step reaches",
        """
No chain of arcs leads from the entry step to this step (arcs whose guard can never hold do
not count), so it never runs. Usually a typo in a `next:` target, or a step left over after an
edit.

Example:

    workflow:
      - step: start
        tool: {kind: noop}
      - step: orphan        # nothing routes here
        tool: {kind: noop}
""",
        "route to the step from an earlier step, or delete it",
    ),
    code(
        "NOE502",
        "dead-arc",
        "warning",
        "an arc that can never fire",
        """
The arc's effective guard can never hold, for one of three reasons:

* its condition folds to false (`when: false`, `when: "{{ 1 > 2 }}"`);
* it tests an event the source step never emits on its boundary — `loop.done` on a step
  without a loop, `step.done` on a loop step (which ends with `loop.done`);
* in exclusive mode an earlier arc always fires for the same event (an arc without `when`,
  a true constant, or `event.name == 'step.done'`), so later arcs are shadowed.

Example:

    - step: start
      tool: {kind: noop}            # no loop: the step ends with step.done
      next:
        arcs:
          - step: report
            when: "{{ event.name == 'loop.done' }}"
""",
        "fix the condition, add the loop, or move the arc before the one that shadows it",
    ),
    code(
        "NOE503",
        "jump-cycle-without-exit",
        "warning",
        "a pipeline's jump cycle can only be left by an error",
        """
`do: jump` rules form a cycle among the step's tasks, and no task of the cycle can leave it
on success: every rule of the cycle jumps back (or its `else:` does), none breaks, fails or
continues past the cycle, and no unmatched outcome falls through. The step loops until a tool
errors, which is almost never the intent (pagination and polling need an exit condition).

Example:

    tool:
      - name: poll
        kind: http
        url: "{{ workload.url }}"
        spec:
          policy:
            rules:
              - else:
                  then: {do: jump, to: poll}
""",
        "add a rule that breaks or continues when the work is done (e.g. no next page)",
    ),
    code(
        "NOE504",
        "join-deadlock",
        "error",
        "an AND-join can wait forever",
        """
A step that joins the branches of a fork (an inferred AND-join, or `spec.join: all`) runs once
every branch has arrived or been proven dead. An arc that does not fire proves its branch dead
(dead-path elimination), so an exclusive split into a join is fine. What deadlocks is a branch
that arrives more often than the others — it loops back to itself or to the fork and also goes
on to the join — or a decision that fires a cycle's back arc (a decision that loops declares
nothing dead: the cycle decides again) and never the arc to the join. The execution ends as a
deadlock (NOE854); the counterexample path, with the workload values when they matter, shows
how to get there.

Example:

    - step: start
      tool: {kind: noop}
      set: {ctx.turns: 0}
      next:
        spec: {mode: inclusive}
        arcs: [{step: a}, {step: b}]
    - step: a
      tool: {kind: noop}
      next: join
    - step: b
      tool: {kind: noop}
      next:
        spec: {mode: inclusive}      # the first turn fires both arcs: b reaches join twice
        arcs:
          - {step: join}
          - {step: b, when: "{{ ctx.turns < 1 }}", set: {ctx.turns: "{{ ctx.turns + 1 }}"}}
    - step: join                     # an AND-join of a and b: a arrives once
      tool: {kind: noop}
""",
        "join the branches before looping back, or make the join a merge (`spec.join: any`)",
    ),
    code(
        "NOE505",
        "no-option-to-complete",
        "error",
        "from some reachable state no final step can be reached",
        """
The workflow net is not sound: some execution reaches a point from which it can never
complete, however the guards evaluate — a step cycle with no arc leaving it, or steps from
which no final step (a step without `next`) is reachable. Only a failure would end such an
execution. The counterexample path shows how to get there and the cycle.

Example:

    - step: start
      tool: {kind: noop}
      next: poll
    - step: poll
      tool: {kind: noop}
      next: poll                     # no arc ever leaves the cycle
""",
        "add a guarded arc that leaves the cycle (e.g. to a final step)",
    ),
    code(
        "NOE506",
        "unbounded-tokens",
        "warning",
        "tokens can multiply without bound",
        """
A cycle passes through an inclusive fork without passing through its join, so every turn of
the cycle leaves one more token behind: the number of steps in flight grows without bound.

Example:

    - step: start
      tool: {kind: noop}
      next:
        spec: {mode: inclusive}
        arcs:
          - {step: start, when: "{{ workload.again }}"}
          - {step: work}
    - step: work
      tool: {kind: noop}
""",
        "join the fork's branches before looping back, or make the fork exclusive",
    ),
    code(
        "NOE507",
        "parallel-ctx-conflict",
        "warning",
        "iterations of a parallel loop write the same ctx key",
        """
In a parallel loop every iteration runs the step's pipeline, so a `set_ctx` (or a `set:` of a
`ctx.` key) with a computed value is written concurrently by all iterations; which write wins
is undefined and the runtime rejects conflicting writes. Write per-iteration values with
`set_iter`, or accumulate with `append`, or run the loop sequentially.

Example:

    loop:
      in: "{{ workload.items }}"
      iterator: item
      spec: {mode: parallel}
    tool:
      - name: work
        kind: python
        code: "result = 1"
        spec:
          policy:
            rules:
              - else:
                  then: {do: continue, set_ctx: {last: "{{ outcome.result }}"}}
""",
        "use `set_ctx: {key: {append: ...}}`, `set_iter`, or `mode: sequential`",
    ),
    code(
        "NOE508",
        "unused-keychain-entry",
        "warning",
        "a keychain entry nothing uses",
        """
The playbook declares a credential in `keychain:` but no template reads `keychain.<name>` and
no tool argument or workload value names it, so the runtime resolves a secret for nothing.

Example:

    keychain:
      - {name: pg_main, kind: postgres_credential}
    workflow:
      - step: start
        tool: {kind: noop}
""",
        "remove the entry, or use it (`auth: pg_main`, `{{ keychain.pg_main }}`)",
    ),
    code(
        "NOE509",
        "analysis-incomplete",
        "warning",
        "the soundness check stopped at its state budget",
        """
After the structural reduction, the explicit state-space search of the remaining net explored
`--budget-states` states without finishing, so soundness (joins, completion, boundedness) is
only checked on the part explored: no other finding means "nothing found so far", never
"sound", and steps the search did not reach are not reported as never running (NOE511). Raise
the budget, or simplify the unstructured part of the workflow (forks whose branches do not
meet at one join).

Example:

    noetlc lint big.yaml --budget-states 1000000
""",
        "raise --budget-states",
    ),
    code(
        "NOE510",
        "static-cycle-guard",
        "warning",
        "a cycle's exits are decided by values that never change",
        """
Every arc that leaves the cycle is guarded, and every exit guard reads only `workload` or
literals. Those values are the same on every turn, so the cycle takes the same decision each
time: it is never entered again, or it is never left and runs until an execution budget
(NOE858) stops it.

Example:

    workflow:
      - step: spin
        tool: {kind: noop}
        next:
          arcs:
            - {step: end, when: "{{ workload.stop }}"}
            - {step: spin}
      - step: end
        tool: {kind: noop}
""",
        "make an exit guard read something the cycle changes (ctx, a step's result)",
    ),
    code(
        "NOE511",
        "step-never-runs",
        "warning",
        "a step no execution runs, although arcs lead to it",
        """
Arcs lead to this step, but no execution the analysis explores starts it: it waits behind a
join that never fires, or every arc to it has a guard that is false whenever its source
decides (two arcs testing the same workload input the opposite way, an exclusive arc shadowed
for every workload value). Steps no arc reaches at all are NOE501.

Example:

    workflow:
      - step: start
        tool: {kind: noop}
        next:
          arcs:
            - {step: a, when: "{{ workload.fast }}"}
      - step: a
        tool: {kind: noop}
        next:
          arcs:
            - {step: b, when: "{{ not workload.fast }}"}   # false whenever a runs
      - step: b
        tool: {kind: noop}
""",
        "check the guards on the way to the step (the message names the inputs), or delete it",
    ),
)
