"""Pass `normalize`: the canonical document (YMap) -> the canonical tree (`compiler/tree.py`).

Shapes are unified here: task list shapes, `next` shorthands, spec layering,
and the real corpus's dialect aliases, which are accepted as written:
tool arguments under `spec:`, `then.set`/`else.set` with `ctx.`/`iter.` keys, rule `else`
without `then`, arc `set:`, step-level `set:` and `input:`, `when: true`,
`executor.spec.entry_step`. Legacy constructs were rewritten by `desugar` before this pass; any
left over (when the document skipped desugaring) are ignored here, never guessed at.
Structural problems the tree cannot represent are reported (NOE2xx) and the offending part is
left out, so one run reports everything.
"""

from __future__ import annotations

from pathlib import PurePath

from noetlc.compiler import tree
from noetlc.compiler.desugar.common import rewrite_node
from noetlc.compiler.shapes import (
    SPEC_TOOL_ARGUMENTS,
    TASK_META_KEYS,
    arc_target,
    loop_items_form,
    routes,
    rule_parts,
    task_slots,
)
from noetlc.compiler.shapes import text as _text
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter

# Keys of each spec layer that the layer itself consumes; they are not inherited by tasks
# (`policy` never is: step and loop policies are not task policies: they hold admission and failure settings).
EXECUTOR_CONTROL_KEYS = ("entry_step", "final_step", "policy")
STEP_CONTROL_KEYS = ("join", "policy")
LOOP_CONTROL_KEYS = ("mode", "max_in_flight", "policy", "stop_when")
DEFAULT_RETRY_ATTEMPTS = 3
DEFAULT_JITTER_FRACTION = 0.1
# a retry with `backoff: linear|exponential` and no `delay:` starts from 1 s, and one without a
# backoff does not wait (noetl/noetl `noetl/worker/task_sequence_executor.py`: `ControlAction.delay`
# defaults to 1.0, `_calculate_delay` waits 0 for `backoff: none`)
DEFAULT_RETRY_DELAY = 1.0


def run(unit: CompilationUnit) -> None:
    doc = unit.canonical if unit.canonical is not None else unit.document
    if doc is None:
        return
    unit.playbook = Normalizer(unit.file, unit.reporter).playbook(doc)


def deep_merge(outer: YMap | None, inner: YMap | None) -> YMap | None:
    """Spec layering: maps deep-merge with the inner layer winning; lists and scalars replace."""
    if outer is None:
        return inner
    if inner is None:
        return outer
    items = list(outer.items)
    for key, value in inner.items:
        for i, (k, v) in enumerate(items):
            if k.value == key.value:
                merged = (
                    deep_merge(v, value)
                    if isinstance(v, YMap) and isinstance(value, YMap)
                    else value
                )
                items[i] = (key, merged if merged is not None else value)
                break
        else:
            items.append((key, value))
    return YMap(tuple(items), inner.span)


class Normalizer:
    def __init__(self, file: str, reporter: Reporter) -> None:
        self.file = file
        self.reporter = reporter

    # ------------------------------------------------------------------ root

    def playbook(self, doc: YMap) -> tree.Playbook | None:
        executor = _map(doc.get("executor"))
        executor_spec = _map(executor.get("spec")) if executor else None
        steps = self.workflow(doc.get("workflow"), executor_spec)
        if steps is None:
            return None
        workbook = tuple(
            t
            for i, node in enumerate(_seq_items(doc.get("workbook")))
            if (t := self.task(node, i, f"workbook_{i}", None, None, workbook=True)) is not None
        )
        entry = self.entry(steps, executor_spec, doc)
        api = doc.get("apiVersion")
        return tree.Playbook(
            metadata=self.metadata(doc),
            workflow=steps,
            entry=entry,
            workload=_map(doc.get("workload")) or YMap((), doc.span),
            keychain=self.keychain(doc.get("keychain")),
            executor_spec=executor_spec,
            workbook=workbook,
            api_version=str(api.value) if isinstance(api, YScalar) else "noetl.io/v2",
            file=self.file,
            span=doc.span,
        )

    def metadata(self, doc: YMap) -> tree.Metadata:
        meta = _map(doc.get("metadata")) or YMap((), doc.span)
        name = _text(meta.get("name")) or _text(doc.get("name")) or PurePath(self.file).stem
        path = _text(meta.get("path")) or _text(doc.get("path"))
        version = meta.get("version")
        extra = meta.without("name", "path", "version", "description")
        return tree.Metadata(
            name=name,
            path=path,
            version=str(version.value)
            if isinstance(version, YScalar) and version.value is not None
            else None,
            description=_text(meta.get("description")),
            extra=extra if extra.items else None,
            span=meta.span,
        )

    def keychain(self, node: YNode | None) -> tuple[tree.KeychainEntry, ...]:
        out = []
        for item in _seq_items(node):
            if isinstance(item, YMap) and _text(item.get("name")):
                out.append(
                    tree.KeychainEntry(
                        name=_text(item.get("name")) or "",
                        kind=_text(item.get("kind")) or "secret",
                        fields=item.without("name", "kind"),
                        span=item.span,
                    )
                )
        return tuple(out)

    def entry(self, steps: tuple[tree.Step, ...], executor_spec: YMap | None, doc: YMap) -> str:
        names = [s.name for s in steps]
        if "start" in names:
            return "start"
        declared = executor_spec.get("entry_step") if executor_spec else None
        if isinstance(declared, YScalar) and isinstance(declared.value, str):
            return declared.value  # resolve checks that it exists
        if steps:
            self.reporter.report(
                "NOE209",
                f"no step is named `start`; the first step `{steps[0].name}` is the entry",
                steps[0].span,
            )
            return steps[0].name
        return "start"

    # ------------------------------------------------------------------ steps

    def workflow(
        self, node: YNode | None, executor_spec: YMap | None
    ) -> tuple[tree.Step, ...] | None:
        if not isinstance(node, YSeq):
            return None  # the schema pass reported it
        if not node.items:
            self.reporter.report("NOE210", "the workflow has no steps", node.span)
        steps = []
        for item in node.items:
            if isinstance(item, YMap):
                step = self.step(item, executor_spec)
                if step is not None:
                    steps.append(step)
        return tuple(steps)

    def step(self, node: YMap, executor_spec: YMap | None) -> tree.Step | None:
        name = _text(node.get("step"))
        if not name:
            return None
        spec = _map(node.get("spec"))
        policy = _map(spec.get("policy")) if spec else None
        loop_node = _map(node.get("loop"))
        loop_spec = _map(loop_node.get("spec")) if loop_node else None
        # Each layer's own control keys steer that layer and are not task knobs.
        task_layer = deep_merge(
            deep_merge(
                executor_spec.without(*EXECUTOR_CONTROL_KEYS) if executor_spec else None,
                spec.without(*STEP_CONTROL_KEYS) if spec else None,
            ),
            loop_spec.without(*LOOP_CONTROL_KEYS) if loop_spec else None,
        )
        tasks = self.tasks(node, name, task_layer)
        join = _text(spec.get("join")) if spec else None
        listener = None
        eval_mode = _text(node.get("eval_mode"))
        if eval_mode == "on_event":
            timeout = spec.get("timeout") if spec else None
            mode_key = node.key_node("eval_mode")
            listener = tree.Listener(
                timeout=float(timeout.value)
                if isinstance(timeout, YScalar)
                and isinstance(timeout.value, int | float)
                and not isinstance(timeout.value, bool)
                else None,
                span=mode_key.span if mode_key is not None else node.span,
            )
        kept_spec = None
        if spec is not None:
            kept = spec.without("join")
            if policy is not None:
                rest = policy.without("admit")
                kept = kept.with_item("policy", rest) if rest.items else kept.without("policy")
            kept_spec = kept if kept.items else None
        desc = _text(node.get("desc")) or _text(node.get("description"))
        name_node = node.get("step")
        return tree.Step(
            name=name,
            tasks=tasks,
            next=self.router(node.get("next"), name),
            admit=self.admit(_map(policy.get("admit")) if policy else None),
            loop=self.loop(loop_node, policy, executor_spec) if loop_node else None,
            join=join if join in ("all", "any", "each") else None,  # type: ignore[arg-type]
            listener=listener,
            set_ctx=self.prefixed_writes(
                _map(node.get("set")), where="step `set:`", iter_allowed=False
            )[0],
            spec=kept_spec,
            desc=desc,
            span=node.span,
            name_span=name_node.span if name_node is not None else node.span,
        )

    def admit(self, node: YMap | None) -> tree.Admit | None:
        if node is None:
            return None
        rules = []
        for item in _seq_items(node.get("rules")):
            if not isinstance(item, YMap):
                continue
            when_node, then, is_else = rule_parts(item)
            if then is None:
                self._rule_without_action(item, "an admission")
                continue
            when = None if is_else else self.guard(when_node)
            allow = then.get("allow")
            rules.append(
                tree.AdmitRule(
                    when=when,
                    allow=bool(allow.value) if isinstance(allow, YScalar) else True,
                    span=item.span,
                    set_ctx=_map(then.get("set_ctx")),
                )
            )
        return tree.Admit(rules=tuple(rules), span=node.span)

    def loop(
        self, node: YMap, step_policy: YMap | None, executor_spec: YMap | None
    ) -> tree.Loop | None:
        items = node.get("in")
        iterator = _text(node.get("iterator"))
        ok = True
        if "cursor" in node:
            return None  # a cursor the `cursor_loop` rewrite refused: it reported why
        form = loop_items_form(items)
        if form == "missing":
            self.reporter.report(
                "NOE204", "the loop has no `in:` (the items to iterate over)", node.span
            )
            ok = False
        elif form == "invalid":
            assert items is not None
            self.reporter.report(
                "NOE204",
                f"the loop's `in:` must be a list or a template that yields one, not "
                f"{_show(items)}",
                items.span,
                hint='write the items as a YAML list, or as a template: `in: "{{ workload.items }}"`',
            )
            ok = False
        if not iterator:
            self.reporter.report(
                "NOE204", "the loop has no `iterator:` (the name of the current item)", node.span
            )
            ok = False
        spec = _map(node.get("spec"))
        mode = _text(spec.get("mode")) if spec else None
        if mode not in (None, "sequential", "parallel"):
            where = spec.get("mode") if spec else None
            self.reporter.report(
                "NOE212",
                "`mode: cursor` needs a `loop.cursor` source, not `in:`"
                if mode == "cursor"
                else f"loop mode `{mode}` is not supported",
                where.span if where is not None else node.span,
                hint="a cursor loop claims rows: `cursor: {kind: postgres, auth: <credential>, "
                "claim: <SQL>}` instead of `in:`; a collection loop is `mode: sequential` or "
                "`mode: parallel`"
                if mode == "cursor"
                else "use `mode: sequential` or `mode: parallel`",
            )
            ok = False
        if not ok or items is None or not iterator:
            return None
        max_in_flight = 10
        max_in_flight_from: YNode | None = None
        raw = spec.get("max_in_flight") if spec else None
        if (
            isinstance(raw, YScalar)
            and isinstance(raw.value, int)
            and not isinstance(raw.value, bool)
        ):
            if raw.value < 1:
                self.reporter.report("NOE212", "`max_in_flight` must be at least 1", raw.span)
            max_in_flight = max(1, raw.value)
        elif isinstance(raw, YScalar) and isinstance(raw.value, str) and "{{" in raw.value:
            max_in_flight_from = raw  # evaluated when the loop starts
        elif raw is not None:
            self.reporter.report(
                "NOE212",
                "`max_in_flight` must be a positive integer or a template that gives one",
                raw.span,
            )
        # `policy.failure.mode`: the loop's own spec, else the step's, else the executor's.
        failure_mode = None
        for layer_policy in (
            _map(spec.get("policy")) if spec else None,
            step_policy,
            _map(executor_spec.get("policy")) if executor_spec else None,
        ):
            failure = _map(layer_policy.get("failure")) if layer_policy else None
            failure_mode = _text(failure.get("mode")) if failure else None
            if failure_mode is not None:
                break
        return tree.Loop(
            items=items,
            iterator=iterator,
            mode="parallel" if mode == "parallel" else "sequential",
            max_in_flight=max_in_flight,
            failure_mode="best_effort" if failure_mode == "best_effort" else "fail_fast",
            span=node.span,
            stop_when=self.guard(spec.get("stop_when")) if spec else None,
            max_in_flight_from=max_in_flight_from,
        )

    # ------------------------------------------------------------------ tasks

    def tasks(self, step: YMap, step_name: str, outer_spec: YMap | None) -> tuple[tree.Task, ...]:
        step_input = _map(step.get("input"))
        nodes = task_slots(step, step_name)
        if not nodes:
            if "tool" not in step:
                self.reporter.report(
                    "NOE206", f"step `{step_name}` has no `tool:`", step.span,
                    hint="every step runs a tool; use `tool: {kind: noop}` for a step that only routes "
                    "(`noetlc migrate FILE -i` rewrites every such step)",
                )  # fmt: skip
            return ()
        out = []
        for i, (node, default_name) in enumerate(nodes):
            task = self.task(node, i, default_name, outer_spec, step_input if i == 0 else None)
            if task is not None:
                out.append(task)
        return tuple(out)

    def task(
        self,
        node: YNode,
        index: int,
        default_name: str,
        outer_spec: YMap | None,
        step_input: YMap | None,
        *,
        workbook: bool = False,
    ) -> tree.Task | None:
        if not isinstance(node, YMap):
            return None
        nested = node.get("tool")
        if workbook and isinstance(nested, YMap) and "kind" not in node:
            # Corpus workbook entries wrap the call: `{name, tool: {kind, ...}, assert: ...}`.
            node = YMap(
                tuple((k, v) for k, v in node.items if k.value == "name") + nested.items, node.span
            )
        kind = _text(node.get("kind"))
        # `kind: workbook` names the workbook task it runs with `name:` (corpus) or `task:`;
        # the step's task itself then gets the default name.
        workbook_ref = kind == "workbook" and "task" not in node
        name = (None if workbook_ref else _text(node.get("name"))) or default_name
        if workbook and not _text(node.get("name")):
            self.reporter.report("NOE207", "a workbook task needs a `name:`", node.span)
        if not kind:
            self.reporter.report(
                "NOE206", f"task `{name}` has no `kind:`", node.span,
                hint="set the tool kind, e.g. `kind: python`; `noetlc schema` lists them",
            )  # fmt: skip
            return None
        spec = _map(node.get("spec"))
        args_items = [
            (k, v)
            for k, v in node.items
            if k.value not in TASK_META_KEYS or (workbook_ref and k.value == "name")
        ]
        if spec is not None:
            lifted = [(k, v) for k, v in spec.items if k.value in SPEC_TOOL_ARGUMENTS]
            present = {k.value for k, _ in args_items}
            args_items.extend((k, v) for k, v in lifted if k.value not in present)
            spec = spec.without(*SPEC_TOOL_ARGUMENTS)
        if step_input is not None:
            # step-level `input:` is the first task's input; keys the task also sets in its
            # own (often empty) `input:` mapping are overridden by the step's
            own = next((i for i, (k, _) in enumerate(args_items) if k.value == "input"), None)
            if own is None:
                args_items.append((YScalar("input", step_input.span), step_input))
            elif isinstance(args_items[own][1], YMap):
                key, mine = args_items[own]
                merged = deep_merge(mine, step_input)  # type: ignore[arg-type]
                args_items[own] = (key, merged if merged is not None else step_input)
        policy_node = _map(spec.get("policy")) if spec else None
        effective = deep_merge(outer_spec, spec.without("policy") if spec else None)
        if effective is not None:
            effective = effective.without("policy")
            # The step/loop layers' policies are not task policies.
        name_node = None if workbook_ref else node.get("name")
        kind_node = node.get("kind")
        # A task's own `set:` hands values to the next tasks of its pipeline (the corpus reads
        # them back as bare names), so unprefixed keys are pipeline-local: `iter`. In it
        # `output` is the task's result (`{{ output }}` hands the whole result on: NoETL's
        # test playbooks read `fetch_result.data` as the http body, `t_result.count` as a
        # python result's key), not the outcome the task's policy rules see.
        own_set = _map(node.get("set"))
        if own_set is not None:
            own_set = _map(rewrite_node(own_set, {"output": "outcome.result"}, {}))
        set_ctx, set_iter = self.prefixed_writes(own_set, where="task `set:`", unprefixed="iter")
        return tree.Task(
            name=name,
            kind=kind,
            args=YMap(tuple(args_items), node.span),
            spec=effective if effective is not None and effective.items else None,
            policy=self.policy(policy_node),
            span=node.span,
            name_span=name_node.span if name_node is not None else node.span,
            kind_span=kind_node.span if kind_node is not None else node.span,
            set_ctx=set_ctx,
            set_iter=set_iter,
        )

    def policy(self, node: YMap | None) -> tree.Policy | None:
        if node is None:
            return None
        rules = []
        for item in _seq_items(node.get("rules")):
            if not isinstance(item, YMap):
                continue
            when_node, then, is_else = rule_parts(item)
            if then is None:
                self._rule_without_action(item, "a policy")
                continue
            when = None if is_else else self.guard(when_node)
            action = self.action(then)
            if action is not None:
                rules.append(tree.Rule(when=when, action=action, span=item.span))
        unmatched = _text(node.get("on_unmatched"))
        return tree.Policy(
            rules=tuple(rules),
            on_unmatched="continue" if unmatched == "continue" else "default",
            span=node.span,
        )

    def _rule_without_action(self, item: YMap, what: str) -> None:
        self.reporter.report(
            "NOE215",
            f"{what} rule has no `then:`, so it does nothing",
            item.items[0][0].span if item.items else item.span,
            hint="add `then: {...}`, or write the last rule as `else: {then: {...}}`",
        )

    def action(self, then: YMap) -> tree.Action | None:
        do = _text(then.get("do"))
        if do not in ("continue", "retry", "jump", "break", "fail"):
            return None  # the schema pass reported it
        set_ctx, set_iter = self.prefixed_writes(_map(then.get("set")), where="`set:`")
        set_ctx = _concat(_map(then.get("set_ctx")), set_ctx)
        set_iter = _concat(_map(then.get("set_iter")), set_iter)
        attempts = _number(then.get("attempts"))
        raw_attempts = then.get("attempts")
        if raw_attempts is not None and (
            attempts is None or attempts < 1 or attempts != int(attempts)
        ):
            self.reporter.report(
                "NOE213",
                f"`attempts` must be a literal integer of at least 1, not {_show(raw_attempts)}",
                raw_attempts.span,
            )
            attempts = None
        if do == "retry" and attempts is None:
            attempts = DEFAULT_RETRY_ATTEMPTS
        backoff = _text(then.get("backoff")) or "none"
        jitter_node = then.get("jitter")
        jitter = 0.0
        if isinstance(jitter_node, YScalar):
            if jitter_node.value is True:
                jitter = DEFAULT_JITTER_FRACTION
            elif isinstance(jitter_node.value, int | float) and not isinstance(
                jitter_node.value, bool
            ):
                jitter = float(jitter_node.value)
        delay = _number(then.get("delay"))
        to_node = then.get("to")
        max_delay = _number(then.get("max_delay"))
        delay_template = _templated(then.get("delay"))
        max_delay_template = _templated(then.get("max_delay"))
        return tree.Action(
            do=do,  # type: ignore[arg-type]
            to=_text(then.get("to")),
            attempts=int(attempts) if attempts is not None else None,
            backoff="none" if backoff == "fixed" else backoff,  # type: ignore[arg-type]
            delay=float(delay) if delay is not None else _default_delay(backoff),
            max_delay=float(max_delay) if max_delay is not None else None,
            jitter=jitter,
            delay_template=delay_template,
            max_delay_template=max_delay_template,
            set_iter=set_iter,
            set_ctx=set_ctx,
            span=then.span,
            to_span=to_node.span if to_node is not None else then.span,
        )

    def prefixed_writes(
        self,
        node: YMap | None,
        *,
        where: str,
        iter_allowed: bool = True,
        unprefixed: str = "ctx",
    ) -> tuple[YMap | None, YMap | None]:
        """Dialect `set: {ctx.x: v, iter.y: w, z: u}` -> (ctx writes, iter writes).

        A key without a scope prefix writes the `unprefixed` scope. Steps and arcs run outside
        any iteration's pipeline, so their `set:` may only write `ctx`.
        """
        if node is None:
            return None, None
        ctx: list[tuple[YScalar, YNode]] = []
        it: list[tuple[YScalar, YNode]] = []
        for key, value in _scoped_items(node):
            text = str(key.value)
            scope, _, rest = text.partition(".")
            if rest and scope == "ctx":
                ctx.append((YScalar(rest, key.span), value))
            elif rest and scope == "iter" and iter_allowed:
                it.append((YScalar(rest, key.span), value))
            elif rest and scope == "iter":
                self.reporter.report(
                    "NOE214",
                    f"{where} cannot write `{text}`: it runs outside the loop's iterations",
                    key.span,
                    hint="write `iter.` values in a task policy (`set_iter`), or use `ctx.`",
                )
            elif rest and scope in ("workload", "args", "event", "outcome", "output"):
                self.reporter.report(
                    "NOE214",
                    f"{where} cannot write `{text}`: only `ctx.` and `iter.` are writable",
                    key.span,
                )
            else:
                (it if unprefixed == "iter" else ctx).append((key, value))
        return (
            YMap(tuple(ctx), node.span) if ctx else None,
            YMap(tuple(it), node.span) if it else None,
        )

    # ------------------------------------------------------------------ routing

    def router(self, node: YNode | None, step_name: str) -> tree.Router | None:
        written = routes(node)
        if written.node is None or written.form == "none":
            return None
        arcs = tuple(a for item in written.entries if (a := self.arc(item)) is not None)
        inclusive = written.mode == "inclusive"
        if written.form == "list" and len(arcs) > 1 and all(a.when is None for a in arcs):
            # a list of targets without conditions is a parallel fork: every target starts
            inclusive = True
        return tree.Router("inclusive" if inclusive else "exclusive", arcs, written.node.span)

    def arc(self, node: YNode) -> tree.Arc | None:
        found = arc_target(node)
        if found is None:
            return None
        target, target_node = found
        if not isinstance(node, YMap):
            return tree.Arc(step=target, span=node.span, target_span=node.span)
        set_ctx, _ = self.prefixed_writes(
            _map(node.get("set")), where="arc `set:`", iter_allowed=False
        )
        spec = _map(node.get("spec"))
        stop = spec.get("stop") if spec else None
        return tree.Arc(
            step=target,
            when=self.guard(node.get("when")),
            args=_map(node.get("args")),
            set_ctx=set_ctx,
            stop=isinstance(stop, YScalar) and stop.value is True,
            span=node.span,
            target_span=target_node.span,
        )

    def guard(self, node: YNode | None) -> tree.Guard | None:
        if node is None:
            return None
        if isinstance(node, YScalar):
            value = node.value
            if isinstance(value, bool):
                return tree.Guard("true" if value else "false", node.span)
            if value is None:
                return None
            return tree.Guard(str(value), node.span)
        self.reporter.report("NOE103", "a `when:` condition must be a string", node.span)
        return None


# --------------------------------------------------------------------------- helpers


def _scoped_items(node: YMap) -> list[tuple[YScalar, YNode]]:
    """`{ctx: {x: 1}, iter: {y: 2}}` (a scope written as a mapping) as `ctx.x`, `iter.y` keys."""
    out: list[tuple[YScalar, YNode]] = []
    for key, value in node.items:
        if key.value in ("ctx", "iter") and isinstance(value, YMap):
            out.extend((YScalar(f"{key.value}.{k.value}", k.span), v) for k, v in value.items)
        else:
            out.append((key, value))
    return out


def _map(node: YNode | None) -> YMap | None:
    return node if isinstance(node, YMap) else None


def _seq_items(node: YNode | None) -> tuple[YNode, ...]:
    return node.items if isinstance(node, YSeq) else ()


def _number(node: YNode | None) -> float | None:
    if (
        isinstance(node, YScalar)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return float(node.value)
    return None


def _templated(node: YNode | None) -> YNode | None:
    """A retry delay written as a template (`"{{ _err.retry_after | default(2) }}"`): NoETL
    renders the policy's `then` before reading its numbers (noetl/worker/task_sequence_executor.py),
    so it is evaluated when the rule retries (`RETRY_DELAYS`), never read as 0 s."""
    if isinstance(node, YScalar) and isinstance(node.value, str) and "{{" in node.value:
        return node
    return None


def _concat(first: YMap | None, second: YMap | None) -> YMap | None:
    if first is None:
        return second
    if second is None:
        return first
    return YMap(first.items + second.items, first.span)


def _show(node: YNode) -> str:
    if isinstance(node, YScalar):
        return repr(node.value)
    return "a mapping" if isinstance(node, YMap) else "a list"


def _default_delay(backoff: str) -> float:
    """The delay of a retry rule that writes none (see DEFAULT_RETRY_DELAY)."""
    return DEFAULT_RETRY_DELAY if backoff in ("linear", "exponential") else 0.0
