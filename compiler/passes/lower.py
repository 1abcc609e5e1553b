"""Pass `lower`: the net and the tree -> the control program and the pipeline programs.

Control program: one record per transition (`noetlc.ir.program.TransitionInfo`): the events
it is on, its guards (its own arc's, and for a dead arc the negated ones), `earlier`
(exclusive routing: a count into the decision's guards, so a router of n arcs lowers to O(n)
entries), `admit` (a transition entering a step), the places it consumes, its `args` and ctx
`writes`, the places it feeds live or dead, the loop it starts, whether it fails the
execution; the control VM loads these records into its step tables (vm/tables.py).
Pipeline program: one block of instructions per step: for each task `TASK` followed by its policy (`RULE expr -> label`, `ELSE`,
`UNMATCHED`) and the actions the rules jump to (`SET_ITER`, `SET_CTX_P`, then one of `CONTINUE`,
`RETRY`, `JUMP`, `BREAK`, `FAIL`), and `END`. Every instruction gets a position (file, line,
column, YAML path) in the debug map.
"""

from __future__ import annotations

from typing import Any

from noetlc.compiler import tree
from noetlc.compiler.lowered import Block, Instruction, LoweredPrograms
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.values import ValuePool
from noetlc.diagnostics.report import Span
from noetlc.expr.compile import ExpressionPool
from noetlc.ir.net import Net, Position, Transition
from noetlc.ir.opcodes import BY_MNEMONIC
from noetlc.ir.program import TransitionInfo


def run(unit: CompilationUnit) -> None:
    net, pool, values = unit.net, unit.pool, unit.values
    if unit.playbook is None or net is None or pool is None or values is None:
        return
    unit.programs = Lowerer(unit.playbook, net, pool, values).lower()


class Lowerer:
    def __init__(
        self, playbook: tree.Playbook, net: Net, pool: ExpressionPool, values: ValuePool
    ) -> None:
        self.playbook = playbook
        self.net = net
        self.pool = pool
        self.values = values
        self.names: list[str] = []
        self._name_index: dict[str, int] = {}
        self.positions: list[Position] = []
        self.steps = {s.name: s for s in playbook.workflow}
        self._position_index: dict[Position, int] = {}
        self._last_position: Position | None = None
        self._last_position_index = 0

    def name(self, text: str) -> int:
        index = self._name_index.get(text)
        if index is None:
            index = len(self.names)
            self.names.append(text)
            self._name_index[text] = index
        return index

    def position(self, pos: Position) -> int:
        if pos is self._last_position:  # consecutive instructions share one (hashing is slow)
            return self._last_position_index
        index = self._position_index.get(pos)
        if index is None:
            index = len(self.positions)
            self.positions.append(pos)
            self._position_index[pos] = index
        self._last_position, self._last_position_index = pos, index
        return index

    def emit(self, block: Block, mnemonic: str, pos: Position, *operands: Any) -> int:
        block.code.append([BY_MNEMONIC[mnemonic].code, *operands])
        block.positions.append(self.position(pos))
        return len(block.code) - 1

    def lower(self) -> LoweredPrograms:
        control = [self.transition(t) for t in self.net.transitions]
        pipelines = []
        labels: dict[str, dict[str, int]] = {}
        for index, step in enumerate(self.playbook.workflow):
            block, task_labels = self.pipeline(index, step)
            pipelines.append(block)
            labels[step.name] = task_labels
        workbook = [
            [
                task.name,
                task.kind,
                self.values.add(task.args, ("workbook", task.name, "args")),
                self.values.add(task.spec, ("workbook", task.name, "spec"))
                if task.spec is not None
                else None,
            ]
            for task in self.playbook.workbook
        ]
        return LoweredPrograms(self.names, self.positions, control, pipelines, labels, workbook)

    # ------------------------------------------------------------------ control

    def transition(self, t: Transition) -> TransitionInfo:
        guards: list[tuple[int, bool]] = []
        if t.guard.expr is not None and t.kind != "dead":
            guards.append((t.guard.expr, False))
        guards.extend((negated, True) for negated in t.guard.negated)
        admit = None
        if t.kind in ("start", "admit", "skip") and t.consume[:1] == (f"{t.step}.entry",):
            admit = 0 if t.kind == "skip" else 1
        # a skipped step's outgoing paths are dead (dead-path elimination)
        dead = t.kind == "dead" or (t.kind == "end" and t.consume[0].endswith(".skipped"))
        produce = tuple(p for p in t.produce if not dead or p == "execution.sink")
        dead_places = tuple(p for p in t.produce if dead and p != "execution.sink")
        step = self.steps.get(t.step) if t.step else None
        loop_spec = step.loop if step is not None and step.listener is None else None
        loop = None
        if t.kind in ("start", "admit") and step is not None and loop_spec is not None:
            items = self.pool.by_path.get(("workflow", step.name, "loop"))
            loop = (items, loop_spec.max_in_flight if loop_spec.mode == "parallel" else 1)
        return TransitionInfo(
            id=t.id,
            kind=t.kind,
            step=t.step,
            target=t.target,
            on=tuple(t.events),
            guards=tuple(guards),
            earlier=t.guard.earlier or 0,
            admit=admit,
            consume=tuple(t.consume),
            args=t.args,
            writes=t.writes,
            produce=produce,
            dead=dead_places,
            loop=loop,
            fails_execution=t.kind == "unhandled",
            position=self.position(t.pos),
        )

    # ------------------------------------------------------------------ pipelines

    def pipeline(self, index: int, step: tree.Step) -> tuple[Block, dict[str, int]]:
        block = Block(step.name)
        base = f"workflow[{index}].tool"
        jumps: list[tuple[Instruction, str]] = []  # JUMP instructions to patch with task pcs
        labels: dict[str, int] = {}
        for t_index, task in enumerate(step.tasks):
            tpath = ("workflow", step.name, "tasks", task.name)
            pos = _pos(task.span, f"{base}[{t_index}]")
            args = self.values.add(task.args, (*tpath, "args"))
            spec = self.values.add(task.spec, (*tpath, "spec")) if task.spec is not None else None
            labels[task.name] = self.emit(
                block, "TASK", pos, self.name(task.name), self.name(task.kind), args, spec
            )
            if task.set_iter is not None:
                self.emit(
                    block, "OK_SET_ITER", pos, self.values.add(task.set_iter, (*tpath, "set_iter"))
                )
            if task.set_ctx is not None:
                self.emit(
                    block, "OK_SET_CTX", pos, self.values.add(task.set_ctx, (*tpath, "set_ctx"))
                )
            rules = task.policy.rules if task.policy else ()
            dispatch: list[tuple[Instruction, tree.Rule, int]] = []
            for r_index, rule in enumerate(rules):
                rpos = _pos(rule.span, f"{base}[{t_index}].spec.policy.rules[{r_index}]")
                if rule.when is None:
                    pc = self.emit(block, "ELSE", rpos, None)
                else:
                    expr = self.pool.by_path.get((*tpath, "rules", r_index, "when"))
                    pc = self.emit(block, "RULE", rpos, expr, None)
                dispatch.append((block.code[pc], rule, r_index))
                if rule.when is None:
                    break
            else:
                mode = (
                    1 if task.policy is not None and task.policy.on_unmatched == "continue" else 0
                )
                self.emit(block, "UNMATCHED", pos, mode)
            for instruction, rule, r_index in dispatch:
                action = rule.action
                apos = _pos(action.span, f"{base}[{t_index}].spec.policy.rules[{r_index}].then")
                instruction[-1] = len(block.code)  # the rule's label: its action
                if action.set_iter is not None:
                    self.emit(
                        block,
                        "SET_ITER",
                        apos,
                        self.values.add(action.set_iter, (*tpath, "rules", r_index, "set_iter")),
                    )
                if action.set_ctx is not None:
                    self.emit(
                        block,
                        "SET_CTX_P",
                        apos,
                        self.values.add(action.set_ctx, (*tpath, "rules", r_index, "set_ctx")),
                    )
                if action.do == "retry":
                    if action.delay_template is not None or action.max_delay_template is not None:
                        where = (*tpath, "rules", r_index)
                        self.emit(
                            block,
                            "RETRY_DELAYS",
                            apos,
                            None
                            if action.delay_template is None
                            else self.values.add(action.delay_template, (*where, "delay")),
                            None
                            if action.max_delay_template is None
                            else self.values.add(action.max_delay_template, (*where, "max_delay")),
                        )
                    self.emit(
                        block,
                        "RETRY",
                        apos,
                        action.attempts or 1,
                        self.name(action.backoff),
                        action.delay,
                        action.max_delay,
                        action.jitter,
                    )
                elif action.do == "jump":
                    pc = self.emit(block, "JUMP", apos, None)
                    jumps.append((block.code[pc], action.to or ""))
                elif action.do == "break":
                    self.emit(block, "BREAK", apos)
                elif action.do == "fail":
                    self.emit(block, "FAIL", apos)
                else:
                    self.emit(block, "CONTINUE", apos)
        self.emit(block, "END", _pos(step.span, f"workflow[{index}]"))
        for instruction, target in jumps:
            instruction[-1] = labels.get(target, 0)
        if step.set_ctx is not None:
            # step-level `set` (corpus dialect): ctx writes when the pipeline succeeded
            end = block.code.pop()
            end_pos = block.positions.pop()
            self.emit(
                block,
                "SET_CTX_P",
                _pos(step.set_ctx.span, f"workflow[{index}].set"),
                self.values.add(step.set_ctx, ("workflow", step.name, "set_ctx")),
            )
            block.code.append(end)
            block.positions.append(end_pos)
        return block, labels


def _pos(span: Span, path: str) -> Position:
    return Position(span.file, span.line, span.column, path)
