"""The surface schema: every shape a playbook may be written in, as pydantic models.

This is the boundary: it accepts the canonical language, every legacy form NoETL playbooks were
written in (which `desugar` rewrites) and the real corpus's dialect, and it is what `noetlc schema`
exports as JSON Schema for editors. Structural objects (root, step, loop, router, arc, policy,
rule) are closed: an unknown key is an error. Tool tasks are open, since each tool kind has its
own arguments (checked per kind by the `tools` pass).

Templated values (`"{{ ... }}"`) may appear wherever data is expected, so data-bearing fields are
typed `Any`; fields that steer the compiler (names, modes, directives) are typed strictly.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Template = str  # a string that may contain {{ ... }}
Condition = str | bool  # `when`: an expression with or without braces, or a YAML boolean


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


# --------------------------------------------------------------------------- task policy


class Then(Closed):
    do: Literal["continue", "retry", "jump", "break", "fail"] = Field(
        description="the directive: continue (next task), retry, jump (to a task), break, fail"
    )
    to: str | None = Field(None, description="jump target: a task name of the same pipeline")
    attempts: int | Template | None = Field(None, description="retry: total tries")
    backoff: Literal["none", "linear", "exponential", "fixed"] | None = None
    delay: float | Template | None = Field(None, description="retry: seconds before the next try")
    max_delay: float | Template | None = Field(None, description="retry: the longest wait")
    jitter: bool | float | None = None
    set_iter: dict[str, Any] | None = None
    set_ctx: dict[str, Any] | None = None
    set: dict[str, Any] | None = Field(
        None, description="corpus dialect: {ctx.x: ..., iter.y: ...} (= set_ctx / set_iter)"
    )


class ElseBranch(Closed):
    then: Then


class PolicyRule(Closed):
    when: Condition | None = None
    then: Then | None = None
    else_: ElseBranch | Then | None = Field(None, alias="else")


class TaskPolicy(Open):
    """`task.spec.policy`: outcome rules (worker side)."""

    rules: list[PolicyRule] | None = None
    on_unmatched: Literal["continue", "fail", "default"] | None = None
    mode: str | None = None


class TaskSpec(Open):
    policy: TaskPolicy | None = None
    timeout: float | dict[str, Any] | str | None = Field(
        None, description='seconds, a duration ("30s", "5m"), or per phase'
    )
    isolation: Literal["inprocess", "subprocess"] | None = None


class Task(Open):
    """One tool call. Tool arguments are open; `tools` checks them per kind."""

    name: str | None = None
    kind: str | None = Field(None, description="tool kind: noop, python, http, postgres, ...")
    spec: TaskSpec | None = None
    set: dict[str, Any] | None = Field(
        None, description="corpus dialect: {ctx.x: ..., iter.y: ...} written when the task is ok"
    )
    retry: Any = Field(None, description="legacy: rewritten into spec.policy rules")


# --------------------------------------------------------------------------- admission


class AdmitThen(Closed):
    allow: bool
    set_ctx: dict[str, Any] | None = Field(
        None, description="ctx writes when the step is admitted: once per step run, before its loop"
    )


class AdmitElse(Closed):
    then: AdmitThen


class AdmitRule(Closed):
    when: Condition | None = None
    then: AdmitThen | None = None
    else_: AdmitElse | None = Field(None, alias="else")


class Admit(Closed):
    mode: Literal["exclusive", "inclusive"] | None = None
    rules: list[AdmitRule]


class FailurePolicy(Open):
    mode: Literal["fail_fast", "best_effort"] | None = None


class StepPolicy(Open):
    admit: Admit | None = None
    failure: FailurePolicy | None = None


class StepSpec(Open):
    policy: StepPolicy | None = None
    join: Literal["all", "any", "each"] | None = None
    timeout: float | dict[str, Any] | str | None = Field(
        None,
        description='seconds or a duration ("300s") until timer.fired (listener steps); '
        "a task timeout layer otherwise",
    )


# --------------------------------------------------------------------------- loops


class LoopSpec(Open):
    mode: Literal["sequential", "parallel", "cursor"] | None = None
    max_in_flight: int | Template | None = None
    policy: dict[str, Any] | None = None


class Loop(Closed):
    in_: Any = Field(None, alias="in", description="the items: a template or a literal list")
    iterator: str | None = None
    spec: LoopSpec | None = None
    # legacy (older NoETL engines): rewritten by desugar
    mode: Literal["sequential", "parallel", "async"] | None = None
    element: str | None = None
    collection: Any = None
    concurrency: int | Template | None = Field(None, description="legacy: `spec.max_in_flight`")
    cursor: dict[str, Any] | None = Field(None, description="corpus dialect: a claim cursor")


# --------------------------------------------------------------------------- routing


class ArcSpec(Open):
    stop: bool | None = Field(
        None, description="when the arc fires, no later arc of the router does (first match)"
    )


class Arc(Closed):
    step: str
    when: Condition | None = None
    args: dict[str, Any] | None = None
    set: dict[str, Any] | None = Field(None, description="corpus dialect: ctx writes on firing")
    spec: ArcSpec | None = None


class RouterSpec(Open):
    mode: Literal["exclusive", "inclusive"] | None = None
    policy: dict[str, Any] | None = None


class Router(Closed):
    spec: RouterSpec | None = None
    arcs: list[Arc]


NextEntry = str | Arc
Next = Annotated[str | list[NextEntry] | Router, Field(description="routing after the step")]


# --------------------------------------------------------------------------- legacy case


class CaseRule(Open):
    """Legacy step-level `case` rule (specs 000/002/003); `desugar` rewrites it."""

    when: Condition | None = None
    then: Any = None
    else_: Any = Field(None, alias="else")


# --------------------------------------------------------------------------- steps


class StepOutput(Closed):
    """How the step's result is kept (NoETL's `output:`, legacy `result:`): the whole result
    is kept, so the `output_select` fields are readable by name; results over the payload
    limit are stored by reference whatever `store` says (NOE609 notes it)."""

    output_select: list[str] | None = Field(
        None, description="fields later steps read by name (`{{ step.field }}`)"
    )
    store: dict[str, Any] | None = Field(None, description="NoETL's storage tier choice")
    inline_max_bytes: int | None = Field(None, description="NoETL's inline size limit")


class Step(Closed):
    step: str = Field(description="the step's unique name; `start` is the entry")
    desc: str | None = None
    description: str | None = None
    spec: StepSpec | None = None
    loop: Loop | None = None
    tool: Task | list[Task] | None = None
    next: Next | None = None
    # corpus dialect (accepted as is)
    set: dict[str, Any] | None = None
    input: dict[str, Any] | None = None
    output: StepOutput | None = None
    result: StepOutput | None = Field(None, description="legacy spelling of `output:`")
    # listener steps
    eval_mode: Literal["on_entry", "on_event"] | None = None
    # legacy (rewritten by desugar)
    when: Condition | None = None
    case: list[CaseRule] | None = None
    case_mode: Literal["exclusive", "inclusive"] | None = None
    branch_order: Any = None
    priority: Any = None
    next_policy: Any = None
    retry: Any = None
    vars: dict[str, Any] | None = None
    set_ctx: dict[str, Any] | None = Field(None, description="legacy: ctx writes, like `vars:`")
    sink: Any = None
    args: dict[str, Any] | None = None
    command: Any = None


# every key a step may have (its tool's arguments are not among them)
STEP_KEYS = frozenset(f.alias or name for name, f in Step.model_fields.items())


# --------------------------------------------------------------------------- root


class Metadata(Open):
    name: str | None = None
    path: str | None = None
    version: str | int | float | None = None
    description: str | None = None
    labels: dict[str, Any] | None = None


class KeychainEntry(Open):
    name: str
    kind: str | None = None


class Budgets(Closed):
    """Per-execution budgets (0: no limit); the defaults are in docs/runtime.md."""

    events: Annotated[int, Field(ge=0)] | None = None
    step_runs: Annotated[int, Field(ge=0)] | None = None
    loop_iterations: Annotated[int, Field(ge=0)] | None = None
    ctx_size: Annotated[int, Field(ge=0)] | None = None
    child_depth: Annotated[int, Field(ge=0)] | None = None
    child_executions: Annotated[int, Field(ge=0)] | None = None
    result_bytes: Annotated[int, Field(ge=0)] | None = None
    stored_bytes: Annotated[int, Field(ge=0)] | None = None


class ExecutorSpec(Open):
    entry_step: str | None = None
    final_step: str | None = None
    policy: dict[str, Any] | None = None
    budgets: Budgets | None = Field(
        None,
        description="per-execution budgets: events, step_runs, loop_iterations, ctx_size,"
        " child_depth, child_executions, result_bytes, stored_bytes",
    )


class Executor(Open):
    spec: ExecutorSpec | None = None


class Playbook(Closed):
    """A NoETL playbook (canonical v10, legacy v2 and corpus dialect forms)."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        title="NoETL playbook",
        json_schema_extra={"$id": "https://noetl.io/schemas/playbook.json"},
    )

    apiVersion: str | None = None
    kind: Literal["Playbook", "playbook"] | None = None
    metadata: Metadata | None = None
    keychain: list[KeychainEntry] | None = None
    executor: Executor | None = None
    workload: dict[str, Any] | None = None
    workflow: list[Step]
    workbook: list[Task] | None = None
    # legacy root keys (an older NoETL form), rewritten into metadata by desugar
    name: str | None = None
    path: str | None = None
    # corpus dialect: an informational `spec:` block at the root (kept, not interpreted)
    spec: dict[str, Any] | None = None
