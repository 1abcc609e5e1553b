"""The compiled program: one typed object, its `.nbc` encoding and its structural verifier.

`Program` is what the `assemble` pass builds and what every loader reads: the metadata, the
entry step, the workload defaults, keychain declarations, the executor spec, per-step facts,
the name, expression and value pools, places, joins, decisions, the control program (one
`TransitionInfo` record per transition) and the pipeline programs (instructions), the debug
map and the workbook.

* `payload`, `nbc` — the plain form (lists and maps) and the `.nbc` container (`ir/nbc.py`:
  magic, format version, compiler version, source and payload SHA-256, msgpack), each made
  once, when first asked for, and kept (`encode()` returns `nbc`). Stores keep these bytes.
* `decode(data)` — the container back into a `Program`: container checks (NOE701–703), the
  payload's shape (NOE704), then `verify()` (NOE704); it keeps `data` as its `nbc`. A program
  that decodes is well formed: every index a VM follows is in range.
* `position_of(step, task)` — where a step or task is written, through the debug map.
* `verify()` — structural rules (docs/bytecode.md, "Verification"): pipeline instructions
  per `ir/opcodes.py` (known opcode, operand count and types), transition records of the
  right shape, every pool index in range, every place, step, name and label referred to
  exists, each step has one pipeline block ending in `END`, a decision's guards are
  expressions and a transition's `earlier n` fits the decision at its input place.

The expression pool stores each expression's source text, mode and the SHA-256 of the code
the code generator made from it, never code: loading rebuilds the code from the source
(`noetlc.expr.loader`) and refuses an entry whose hash differs (NOE705).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from noetlc import FORMAT_VERSION, __version__
from noetlc.ir import nbc
from noetlc.ir.opcodes import BY_MNEMONIC, ProgramKind, shown, verify_code

EXPRESSION_KINDS = frozenset({"code", "const", "jinja_expression", "jinja_template"})
MODES = frozenset({"guard", "template"})
JOIN_KINDS = frozenset({"all", "any", "each"})
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

Instruction = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Metadata:
    """The playbook's name, path and version."""

    name: str
    path: str | None = None
    version: Any = None


@dataclass(frozen=True, slots=True)
class StepFacts:
    """What a VM needs about a step besides its programs: task names, loop, listener."""

    name: str
    tasks: tuple[str, ...]
    # iterator, mode, max_in_flight, failure_mode, stop_when, max_in_flight_from
    loop: dict[str, Any] | None = None
    listener: dict[str, Any] | None = None  # timeout


@dataclass(frozen=True, slots=True)
class Expression:
    """One pool entry: the source and mode, and for compiled kinds the SHA-256 of the code
    (or jinja text) the code generator made from them. `const` entries are data (`value`)."""

    kind: str
    source: str
    mode: str
    sha256: str | None = None
    value: Any = None
    where: str | None = None


@dataclass(frozen=True, slots=True)
class PlaceInfo:
    """One place of the net: id, kind, step and capacity."""

    id: str
    kind: str
    step: str | None
    capacity: int | None


@dataclass(frozen=True, slots=True)
class JoinInfo:
    """One join: the step, its kind, the fork and its branches."""

    step: str
    kind: str
    fork: str | None
    branches: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DecisionInfo:
    """One decision place and its guard list."""

    place: str
    guards: tuple[int, ...]  # expression indices, in rank order


@dataclass(frozen=True, slots=True)
class TransitionInfo:
    """One transition of the control program, as a record (like places, joins and
    decisions): what fires it, what it checks, what it takes and what it puts. The control
    VM loads each record once into its step tables (vm/tables.py); nothing is interpreted.

    Checked in this order when it fires: an `on` event arrived; every `guards` entry passes
    (an expression that must be true, or false when negated); exclusive routing: none of the
    first `earlier` guards of the decision at `consume[0]` is true. Then `admit` (a
    transition entering a step: 1 starts it, 0 skips it, None for others), `consume` the
    tokens, evaluate `args` (the new token's) and `writes` (ctx), put tokens into `produce`
    and dead tokens into `dead`, start the step's `loop` (items expression, slots in flight),
    and `fails_execution` with the step's error."""

    id: str
    kind: str
    step: str | None
    target: str | None
    on: tuple[str, ...]
    guards: tuple[tuple[int, bool], ...]  # (expression index, negated), in order
    earlier: int
    admit: int | None
    consume: tuple[str, ...]
    args: int | None
    writes: int | None
    produce: tuple[str, ...]
    dead: tuple[str, ...]
    loop: tuple[int | None, int] | None  # (items expression, slots)
    fails_execution: bool
    position: int


@dataclass(frozen=True, slots=True)
class PipelineBlock:
    """The pipeline program of one step."""

    step: str
    code: tuple[Instruction, ...]
    positions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DebugPosition:
    """A source position of the debug map."""

    file: str
    line: int
    column: int
    path: str


@dataclass(frozen=True, slots=True)
class WorkbookTask:
    """One workbook task: name, kind and its arguments' value index."""

    name: str
    kind: str
    args: int
    spec: int | None


@dataclass(frozen=True, eq=False)
class Program:
    """A verified program: everything a VM needs to run a playbook.

    Readers use the typed fields. The two other forms are derived from them once, lazily,
    and kept on the object (`functools.cached_property`, as vyper's `CompilerData` does):
    `payload` (plain lists and maps, what msgpack writes) and `nbc` (the container bytes).
    A program read by `decode` keeps the bytes and the payload it was read from, so a store
    keeps exactly those bytes without encoding them again."""

    metadata: Metadata
    entry: str
    workload: dict[str, Any]
    keychain: tuple[dict[str, Any], ...]
    executor_spec: dict[str, Any] | None
    steps: tuple[StepFacts, ...]
    names: tuple[str, ...]
    expressions: tuple[Expression, ...]
    values: tuple[Any, ...]
    places: tuple[PlaceInfo, ...]
    joins: tuple[JoinInfo, ...]
    decisions: tuple[DecisionInfo, ...]
    control: tuple[TransitionInfo, ...]
    pipelines: tuple[PipelineBlock, ...]
    positions: tuple[DebugPosition, ...]
    workbook: tuple[WorkbookTask, ...]
    source_sha256: str = ""
    compiler: str = __version__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Program):
            return NotImplemented
        return self.payload == other.payload

    __hash__ = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ lookups

    def position_of(self, step: str, task: str | None = None) -> DebugPosition | None:
        """Where `step` (or its task `task`) is written in the YAML: the debug position of the
        task's `TASK` instruction, else of the step's pipeline `END` (the step itself); None
        for a step the program does not have. A task the step does not have gives the step."""
        found = self._positions_by_step.get(step)
        if found is None:
            return None
        at_step, at_task = found
        index = at_task.get(task, at_step) if task is not None else at_step
        return self.positions[index] if 0 <= index < len(self.positions) else None

    @cached_property
    def _positions_by_step(self) -> dict[str, tuple[int, dict[str, int]]]:
        out: dict[str, tuple[int, dict[str, int]]] = {}
        for block in self.pipelines:
            tasks: dict[str, int] = {}
            end = -1
            for instruction, position in zip(block.code, block.positions):
                if instruction[0] == _TASK:
                    tasks.setdefault(self.names[instruction[1]], position)
                elif instruction[0] == _END:
                    end = position
            out[block.step] = (end, tasks)
        return out

    def with_executor_spec(self, spec: dict[str, Any] | None) -> Program:
        """The same program with another executor spec (`--budget` writes its budgets there):
        a new object, whose payload and bytes are made again when asked for."""
        return replace(self, executor_spec=spec)

    # ------------------------------------------------------------------ encoding

    def to_payload(self) -> dict[str, Any]:
        """The msgpack payload (`payload`)."""
        return self.payload

    @cached_property
    def payload(self) -> dict[str, Any]:
        """The msgpack payload (lists only, maps in a fixed order: deterministic bytes); made
        once, when first asked for (encoding, `dis`, the graph)."""
        return {
            "metadata": {
                "name": self.metadata.name,
                "path": self.metadata.path,
                "version": self.metadata.version,
            },
            "entry": self.entry,
            "workload": self.workload,
            "keychain": list(self.keychain),
            "executor_spec": self.executor_spec,
            "steps": [_step_data(s) for s in self.steps],
            "names": list(self.names),
            "expressions": [_expression_data(e) for e in self.expressions],
            "values": list(self.values),
            "places": [[p.id, p.kind, p.step, p.capacity] for p in self.places],
            "joins": [[j.step, j.kind, j.fork, list(j.branches)] for j in self.joins],
            "decisions": [[d.place, list(d.guards)] for d in self.decisions],
            "control": [_transition_data(t) for t in self.control],
            "pipelines": [
                [b.step, [list(i) for i in b.code], list(b.positions)] for b in self.pipelines
            ],
            "positions": [[p.file, p.line, p.column, p.path] for p in self.positions],
            "workbook": [[w.name, w.kind, w.args, w.spec] for w in self.workbook],
        }

    @cached_property
    def nbc(self) -> bytes:
        """The `.nbc` bytes (what files and stores keep): encoded once, when first asked for;
        for a decoded program, the bytes it was decoded from."""
        return nbc.encode(
            self.payload,
            format_version=FORMAT_VERSION,
            compiler_version=self.compiler,
            source_sha256=self.source_sha256,
        )

    def encode(self) -> bytes:
        """The `.nbc` bytes (`nbc`)."""
        return self.nbc

    @classmethod
    def decode(cls, data: bytes) -> Program:
        """Read and verify untrusted bytes; every failure is a `BytecodeError` (NOE70x)."""
        data = bytes(data)
        header, payload = nbc.decode(data, format_version=FORMAT_VERSION)
        program = cls.from_payload(
            payload,
            source_sha256=str(header.get("source_sha256") or ""),
            compiler=str(header.get("compiler") or ""),
        )
        program.check()
        program.check_pool()
        program.__dict__["nbc"] = data  # what it was read from: never encoded again
        return program

    def check_pool(self) -> None:
        """Every expression rebuilt from its source and its code hash compared (NOE705): a
        program from outside is refused before anything is stored or run. Compiling is cached
        per process, so the VM's own load of the pool costs nothing more."""
        from noetlc.expr.loader import PoolMismatch, load_expression  # the compiler: lazily

        try:
            for i, e in enumerate(self.expressions):
                load_expression(i, e.kind, e.source, e.mode, e.sha256, e.value, e.where)
        except PoolMismatch as exc:
            raise nbc.BytecodeError(
                "NOE705",
                f"the expression pool does not match its sources: {exc}",
                "recompile the playbook with the installed noetlc; never edit compiled bytecode",
            ) from None

    @classmethod
    def from_payload(
        cls, payload: dict[str, Any], *, source_sha256: str = "", compiler: str = __version__
    ) -> Program:
        """A payload (decoded msgpack) as a `Program`; a payload of the wrong shape is a
        `BytecodeError` NOE704. Does not run `verify()`: `decode` and `check` do."""
        try:
            program = _from_payload(cls, payload, source_sha256, compiler)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise invalid([f"malformed payload ({type(exc).__name__}: {exc})"]) from None
        except RecursionError:
            raise invalid(["malformed payload (a value is nested too deeply)"]) from None
        program.__dict__["payload"] = payload  # what it was read from: not rebuilt
        return program

    def check(self) -> None:
        """`verify()`, raising `BytecodeError` NOE704 with the first problems found."""
        try:
            problems = self.verify()
        except (TypeError, ValueError, KeyError, IndexError) as exc:  # operands of odd types
            problems = [f"malformed program ({type(exc).__name__}: {exc})"]
        except RecursionError:  # a value nested deeper than any compiler writes
            problems = ["malformed program (a value is nested too deeply)"]
        if problems:
            raise invalid(problems)

    # ------------------------------------------------------------------ verification

    def verify(self) -> list[str]:
        """Structural problems (empty when the program is well formed)."""
        problems: list[str] = []
        add = problems.append
        steps = {s.name for s in self.steps}
        if len(steps) != len(self.steps):
            add("duplicate step facts")
        if self.entry not in steps:
            add(f"entry step {self.entry!r} is not a step")
        for s in self.steps:
            add_all(problems, _step_problems(s))
        if not all(isinstance(n, str) for n in self.names):
            add("the name pool holds a non-string")
        for i, e in enumerate(self.expressions):
            add_all(problems, _expression_problems(i, e))
        n_expr, n_value, n_name, n_pos = (
            len(self.expressions),
            len(self.values),
            len(self.names),
            len(self.positions),
        )
        for s in self.steps:
            for key in ("stop_when", "max_in_flight_from"):
                index = (s.loop or {}).get(key)
                if index is not None and not (type(index) is int and 0 <= index < n_expr):
                    add(f"step {s.name!r}: loop {key} {shown(index)} is not an expression index")
        for i, value in enumerate(self.values):
            for ref in _expression_refs(value):
                if not (type(ref) is int and 0 <= ref < n_expr):
                    add(f"value v{i} refers to expression {shown(ref)}, out of range")
        places: dict[str, PlaceInfo] = {}
        for p in self.places:
            if p.id in places:
                add(f"duplicate place {p.id}")
            places[p.id] = p
            if p.step is not None and p.step not in steps:
                add(f"place {p.id} belongs to unknown step {p.step}")
        joined: set[str] = set()
        for j in self.joins:
            if j.step not in steps or j.kind not in JOIN_KINDS:
                add(f"join at {j.step!r} ({j.kind!r}): unknown step or kind")
            if j.step in joined or len(set(j.branches)) != len(j.branches):
                add(f"join at {j.step!r}: a second join of the step, or a branch named twice")
            joined.add(j.step)
            if (j.fork is not None and j.fork not in steps) or not set(j.branches) <= steps:
                add(f"join at {j.step}: fork or branches name unknown steps")
        decisions: dict[str, int] = {}
        for d in self.decisions:
            if d.place in decisions or d.place not in places:
                add(f"decision at {d.place!r}: duplicate or unknown place")
            decisions[d.place] = len(d.guards)
            if not all(type(g) is int and 0 <= g < n_expr for g in d.guards):
                add(f"decision at {d.place}: a guard is not an expression index")
        pools = {"expr": n_expr, "value": n_value, "name": n_name}
        ids: set[str] = set()
        for t in self.control:
            if t.id in ids:
                add(f"duplicate transition {t.id}")
            ids.add(t.id)
            add_all(problems, _transition_problems(t, steps, places, decisions, pools, n_pos))
        pipelines: set[str] = set()
        for pb in self.pipelines:
            where = f"pipeline {pb.step}"
            if pb.step not in steps or pb.step in pipelines:
                add(f"{where}: unknown or duplicate step")
            pipelines.add(pb.step)
            block_pools = {**pools, "label": len(pb.code)}
            add_all(
                problems,
                _block_problems(where, pb.code, pb.positions, "pipeline", block_pools, n_pos),
            )
            if not pb.code or pb.code[-1][:1] != (_END,):
                add(f"{where}: does not end with END")
        if pipelines != steps:
            add("every step needs exactly one pipeline block")
        if not all(type(p.line) is int and type(p.column) is int for p in self.positions):
            add("a debug position's line or column is not an integer")
        for w in self.workbook:
            if not (type(w.args) is int and 0 <= w.args < n_value) or not (
                w.spec is None or (type(w.spec) is int and 0 <= w.spec < n_value)
            ):
                add(f"workbook task {w.name}: value index out of range")
        return problems


# ---------------------------------------------------------------------------- helpers

_TASK = BY_MNEMONIC["TASK"].code
_END = BY_MNEMONIC["END"].code
MAX_PROBLEMS = 5


def invalid(problems: list[str]) -> nbc.BytecodeError:
    shown = "; ".join(problems[:MAX_PROBLEMS])
    more = f" (and {len(problems) - MAX_PROBLEMS} more)" if len(problems) > MAX_PROBLEMS else ""
    return nbc.BytecodeError(
        "NOE704",
        f"the bytecode does not verify: {shown}{more}",
        "recompile the playbook with `noetlc compile`; a file that still fails was not made by noetlc",
    )


def add_all(problems: list[str], found: list[str]) -> None:
    if found:
        problems.extend(found)


def code_sha256(text: str) -> str:
    """The hash stored per compiled expression: of its generated code (or jinja text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _expression_problems(index: int, e: Expression) -> list[str]:
    where = f"expression e{index}"
    if e.kind not in EXPRESSION_KINDS or e.mode not in MODES or not isinstance(e.source, str):
        return [f"{where}: unknown kind or mode, or a non-text source"]
    if e.kind != "const" and not (isinstance(e.sha256, str) and _HEX64.match(e.sha256)):
        return [f"{where}: no code hash"]
    return []


_LOOP_MODES = frozenset({"sequential", "parallel"})
_FAILURE_MODES = frozenset({"fail_fast", "best_effort"})


def _step_problems(s: StepFacts) -> list[str]:
    """A step's loop and listener facts: the keys and types the VMs read."""
    problems: list[str] = []
    loop = s.loop
    if loop is not None and not (
        isinstance(loop.get("iterator"), str)
        and loop.get("mode") in _LOOP_MODES
        and type(loop.get("max_in_flight")) is int
        and loop["max_in_flight"] >= 1
        and loop.get("failure_mode") in _FAILURE_MODES
    ):
        problems.append(f"step {s.name}: malformed loop facts")
    listener = s.listener
    if listener is not None:
        timeout = listener.get("timeout")
        if not (
            timeout is None
            or (type(timeout) in (int, float) and math.isfinite(timeout) and timeout >= 0)
        ):
            problems.append(f"step {s.name}: malformed listener timeout")
    return problems


def _block_problems(
    where: str,
    code: tuple[Instruction, ...],
    positions: tuple[int, ...],
    kind: ProgramKind,
    pools: dict[str, int],
    n_positions: int,
) -> list[str]:
    problems = [f"{where}: {p}" for p in verify_code(code, kind, pools)]
    if len(positions) != len(code) or not all(
        type(p) is int and 0 <= p < n_positions for p in positions
    ):
        problems.append(f"{where}: positions do not match the instructions")
    return problems


def _expression_refs(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        if len(value) == 1 and "$e" in value:
            yield value["$e"]
            return
        for v in value.values():
            yield from _expression_refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _expression_refs(v)


def _transition_problems(
    t: TransitionInfo,
    steps: set[str],
    places: dict[str, PlaceInfo],
    decisions: dict[str, int],
    pools: dict[str, int],
    n_positions: int,
) -> list[str]:
    """A transition record's references: steps, places, expression and value indices, the
    decision its `earlier` counts into, its debug position."""
    where = f"transition {t.id}"
    problems: list[str] = []
    add = problems.append
    if (t.step is not None and t.step not in steps) or (
        t.target is not None and t.target not in steps
    ):
        add(f"{where}: unknown step or target")
    for place in (*t.consume, *t.produce, *t.dead):
        if place not in places:
            add(f"{where}: unknown place {shown(place)}")
    n_expr, n_value = pools["expr"], pools["value"]
    for expr, negated in t.guards:
        if not (type(expr) is int and 0 <= expr < n_expr) or type(negated) is not bool:
            add(f"{where}: guard {shown(expr)} is not an expression index")
    if type(t.earlier) is not int or t.earlier < 0:
        add(f"{where}: earlier {shown(t.earlier)} is not a count")
    elif t.earlier and not (t.consume and t.earlier <= decisions.get(t.consume[0], 0)):
        add(f"{where}: earlier {t.earlier} does not fit its decision")
    if t.admit not in (None, 0, 1) or type(t.admit) is bool:
        add(f"{where}: admit {shown(t.admit)} is not 0, 1 or absent")
    for name, index in (("args", t.args), ("writes", t.writes)):
        if index is not None and not (type(index) is int and 0 <= index < n_value):
            add(f"{where}: {name} {shown(index)} is not a value index")
    if t.loop is not None:
        items, slots = t.loop
        if (items is not None and not (type(items) is int and 0 <= items < n_expr)) or (
            type(slots) is not int
        ):
            add(f"{where}: loop items or slots out of range")
    if type(t.fails_execution) is not bool:
        add(f"{where}: fails_execution is not a boolean")
    if not (type(t.position) is int and 0 <= t.position < n_positions):
        add(f"{where}: position {shown(t.position)} out of range")
    return problems


def _transition_data(t: TransitionInfo) -> list[Any]:
    return [
        t.id,
        t.kind,
        t.step,
        t.target,
        list(t.on),
        [[expr, negated] for expr, negated in t.guards],
        t.earlier,
        t.admit,
        list(t.consume),
        t.args,
        t.writes,
        list(t.produce),
        list(t.dead),
        None if t.loop is None else list(t.loop),
        t.fails_execution,
        t.position,
    ]


def _transition(entry: Any) -> TransitionInfo:
    (
        tid,
        kind,
        step,
        target,
        on,
        guards,
        earlier,
        admit,
        consume,
        args,
        writes,
        produce,
        dead,
        loop,
        fails,
        position,
    ) = entry
    if loop is not None:
        items, slots = loop
        loop = (items, slots)
    return TransitionInfo(
        _str(tid),
        _str(kind),
        _opt_str(step),
        _opt_str(target),
        tuple(map(_str, on)),
        tuple((expr, negated) for expr, negated in guards),
        earlier,
        admit,
        tuple(map(_str, consume)),
        args,
        writes,
        tuple(map(_str, produce)),
        tuple(map(_str, dead)),
        loop,
        fails,
        position,
    )


def _step_data(s: StepFacts) -> dict[str, Any]:
    info: dict[str, Any] = {"name": s.name, "tasks": list(s.tasks)}
    if s.loop is not None:
        info["loop"] = s.loop
    if s.listener is not None:
        info["listener"] = s.listener
    return info


def _expression_data(e: Expression) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": e.kind, "source": e.source, "mode": e.mode}
    if e.where is not None:
        entry["where"] = e.where
    if e.kind == "const":
        entry["value"] = e.value
    else:
        entry["sha256"] = e.sha256
    return entry


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _instructions(code: Any) -> tuple[Instruction, ...]:
    out = tuple(tuple(i) for i in code)
    if not all(isinstance(i, tuple) for i in out):
        raise TypeError("an instruction is not a list")
    return out


def _ints(values: Any) -> tuple[int, ...]:
    return tuple(values)


def _from_payload(
    cls: type[Program], payload: dict[str, Any], source_sha256: str, compiler: str
) -> Program:
    meta = payload["metadata"]
    steps = []
    for info in payload["steps"]:
        loop, listener = info.get("loop"), info.get("listener")
        if not (loop is None or isinstance(loop, dict)) or not (
            listener is None or isinstance(listener, dict)
        ):
            raise TypeError("step loop/listener facts must be maps")
        steps.append(StepFacts(_str(info["name"]), tuple(map(_str, info["tasks"])), loop, listener))
    expressions = []
    for e in payload["expressions"]:
        expressions.append(
            Expression(
                kind=_str(e["kind"]),
                source=_str(e["source"]),
                mode=_str(e["mode"]),
                sha256=_opt_str(e.get("sha256")),
                value=e.get("value"),
                where=_opt_str(e.get("where")),
            )
        )
    workload = payload["workload"] or {}
    spec = payload.get("executor_spec")
    if not isinstance(workload, dict) or not (spec is None or isinstance(spec, dict)):
        raise TypeError("workload and executor_spec must be maps")
    keychain = tuple(payload.get("keychain") or ())
    if not all(isinstance(k, dict) for k in keychain):
        raise TypeError("keychain entries must be maps")
    return cls(
        metadata=Metadata(_str(meta["name"]), _opt_str(meta.get("path")), meta.get("version")),
        entry=_str(payload["entry"]),
        workload=workload,
        keychain=keychain,
        executor_spec=spec,
        steps=tuple(steps),
        names=tuple(payload["names"]),
        expressions=tuple(expressions),
        values=tuple(payload["values"]),
        places=tuple(
            PlaceInfo(_str(pid), _str(kind), _opt_str(step), cap)
            for pid, kind, step, cap in payload["places"]
        ),
        joins=tuple(
            JoinInfo(_str(step), _str(kind), _opt_str(fork), tuple(map(_str, branches)))
            for step, kind, fork, branches in payload["joins"]
        ),
        decisions=tuple(
            DecisionInfo(_str(place), _ints(guards)) for place, guards in payload["decisions"]
        ),
        control=tuple(_transition(entry) for entry in payload["control"]),
        pipelines=tuple(
            PipelineBlock(_str(step), _instructions(code), _ints(positions))
            for step, code, positions in payload["pipelines"]
        ),
        positions=tuple(
            DebugPosition(_str(file), line, column, _str(path))
            for file, line, column, path in payload["positions"]
        ),
        workbook=tuple(
            WorkbookTask(_str(name), _str(kind), args, spec)
            for name, kind, args, spec in payload.get("workbook", [])
        ),
        source_sha256=source_sha256,
        compiler=compiler,
    )
