"""The canonical playbook tree: what the `normalize` pass builds and every later stage reads.

Only canonical constructs exist here: legacy forms and sugar were rewritten by
`desugar` before the tree is built. Nodes are frozen slotted dataclasses with tuple children;
`span` (where the user wrote the construct, or the construct it was desugared from) is
excluded from equality. Arbitrary data (tool arguments, `args`, `set_ctx` values, workload)
stays as located YAML nodes (`YNode`), so every template keeps its position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from noetlc.compiler.ynodes import YMap, YNode
from noetlc.diagnostics.report import NO_SPAN, Span

Directive = Literal["continue", "retry", "jump", "break", "fail"]
RouterMode = Literal["exclusive", "inclusive"]
LoopMode = Literal["sequential", "parallel"]
FailureMode = Literal["fail_fast", "best_effort"]
JoinKind = Literal["all", "any", "each"]
Backoff = Literal["none", "linear", "exponential"]


def _span() -> Span:
    return field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Guard:
    """A `when` condition exactly as written: `"{{ x > 1 }}"`, `"x > 1"`, or `"true"`."""

    source: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Action:
    """The `then:` of a task policy rule."""

    do: Directive
    to: str | None = None  # jump target (a task of the same pipeline)
    attempts: int | None = None  # retry: total tries including the first
    backoff: Backoff = "none"
    delay: float = 0.0
    max_delay: float | None = None
    jitter: float = 0.0  # fraction of the delay, 0 = none
    # `delay`/`max_delay` written as templates: evaluated when the rule retries
    delay_template: YNode | None = None
    max_delay_template: YNode | None = None
    set_iter: YMap | None = None
    set_ctx: YMap | None = None
    span: Span = _span()
    to_span: Span = _span()  # where the jump target is written (else `span`)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of a task policy: a guard (None: `else`) and its action."""

    when: Guard | None  # None: the `else` rule
    action: Action
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Policy:
    """A task's policy: its rules in order, and what an unmatched outcome does."""

    rules: tuple[Rule, ...]
    # What happens when no rule matches and there is no else: "default" (ok continues, error
    # fails: an unmatched error is never swallowed) or "continue" (opt-in, `on_unmatched`).
    on_unmatched: Literal["default", "continue"] = "default"
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a step's pipeline: its name, tool kind, arguments and policy."""

    name: str
    kind: str
    args: YMap  # the tool's arguments (everything but name/kind/spec knobs)
    spec: YMap | None = None  # effective runtime knobs of this task, without `policy`
    policy: Policy | None = None
    span: Span = _span()
    name_span: Span = _span()  # the `name:` value (else the task's span)
    kind_span: Span = _span()  # the `kind:` value (else the task's span)
    # Corpus dialect: a task-level `set:` — writes evaluated against the task's outcome and
    # applied when it is ok, before the matching rule's own `set_ctx`/`set_iter` (which win).
    # Unprefixed keys write `iter` (the pipeline-local scope the next tasks read).
    set_ctx: YMap | None = None
    set_iter: YMap | None = None


@dataclass(frozen=True, slots=True)
class AdmitRule:
    """One rule of a step's `admit:` (None guard: else)."""

    when: Guard | None  # None: else
    allow: bool
    span: Span = _span()
    set_ctx: YMap | None = None  # written when the rule admits the step, before its loop


@dataclass(frozen=True, slots=True)
class Admit:
    """A step's admission rules, in order."""

    rules: tuple[AdmitRule, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Loop:
    """A step's loop: the items, the iterator name and how iterations run."""

    items: YNode  # the `in:` template or literal list, evaluated once at step entry
    iterator: str
    mode: LoopMode = "sequential"
    max_in_flight: int = 10
    failure_mode: FailureMode = "fail_fast"
    span: Span = _span()
    # `spec.stop_when`: checked after each iteration's result (and its ctx writes); when it
    # holds, the iterations in flight are cancelled and the loop ends (`loop.done`)
    stop_when: Guard | None = None
    # `max_in_flight` written as a template: evaluated when the loop starts (the net keeps
    # `max_in_flight`, the default, as its static bound)
    max_in_flight_from: YNode | None = None


@dataclass(frozen=True, slots=True)
class Arc:
    """One arc of a step's router: the target step, its guard and arguments."""

    step: str
    when: Guard | None = None  # None: "the step succeeded"
    args: YMap | None = None
    set_ctx: YMap | None = None  # corpus dialect: arc `set:` writes ctx when the arc fires
    # `spec: {stop: true}`: when it fires, no later arc of the router does (every arc of an
    # exclusive router stops; in an inclusive one it is a first-match arc)
    stop: bool = False
    span: Span = _span()
    target_span: Span = _span()  # the `step:` value naming the target (else the arc's span)


@dataclass(frozen=True, slots=True)
class Router:
    """A step's `next:`: how its arcs are chosen, and the arcs."""

    mode: RouterMode
    arcs: tuple[Arc, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Listener:
    """`eval_mode: on_event`: the token waits in the step for a matching event or a timeout."""

    timeout: float | None = None  # seconds until `timer.fired`
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the canonical tree."""

    name: str
    tasks: tuple[Task, ...]
    next: Router | None = None  # None: a final step
    admit: Admit | None = None
    loop: Loop | None = None
    join: JoinKind | None = None  # explicit `spec.join`; None = inferred
    listener: Listener | None = None
    set_ctx: YMap | None = None  # corpus dialect: step-level `set:`, applied on success
    spec: YMap | None = None  # non-control knobs (lifecycle, failure, ...) without admit/join
    desc: str | None = None
    span: Span = _span()
    name_span: Span = _span()  # the `step:` value (else the step's span)


@dataclass(frozen=True, slots=True)
class KeychainEntry:
    """One keychain declaration: name, kind and its other fields."""

    name: str
    kind: str
    fields: YMap
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Metadata:
    """The playbook's name, path and version."""

    name: str
    path: str | None = None
    version: str | None = None
    description: str | None = None
    extra: YMap | None = None  # labels and any other metadata keys, kept verbatim
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Playbook:
    """The canonical tree of a playbook: what the later passes read."""

    metadata: Metadata
    workflow: tuple[Step, ...]
    entry: str  # the entry step's name
    workload: YMap = field(default_factory=lambda: YMap(()))
    keychain: tuple[KeychainEntry, ...] = ()
    executor_spec: YMap | None = None  # the outermost spec layer
    workbook: tuple[Task, ...] = ()
    api_version: str = "noetl.io/v2"
    file: str = field(default="<memory>", compare=False)
    span: Span = _span()

    def step(self, name: str) -> Step | None:
        for s in self.workflow:
            if s.name == name:
                return s
        return None
