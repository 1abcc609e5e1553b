"""The token system as a Promela model, for SPIN (`noetlc graph --format promela`).

The model is the one the soundness check explores (`model.py`: each step's complete outcomes,
guards as nondeterministic choices, live and dead tokens, dead-path elimination as the control
VM does it) before any reduction, written so that SPIN's own search decides it:

* `m[slot]` counts the tokens of a (place, colour); a step's outcome is one `atomic` option of
  the main loop, a join firing (per choice of colours) another; dead tokens are passed on at
  once inside the same atomic step (`settle`), merges count their dead arrivals, `any` joins
  let their first live token in;
* when no option is executable (SPIN's `timeout`), the execution is over: one `assert` per
  join branch place says no live token waits there (a failure of one is a deadlock at that
  join, the message names it), unless the execution failed;
* each outcome starts with a statement labelled by its step, so SPIN's "unreached in proctype"
  report names the steps no execution runs;
* a place holding more than `CAP` tokens stops the execution (`capped`): the model is finite,
  and SPIN's verdict is then bounded (the comment at the top says so).
"""

from __future__ import annotations

from noetlc.analysis.context import LintContext
from noetlc.analysis.model import CONTINUE, DEAD, LIVE, System, build

CAP = 3


def export(ctx: LintContext) -> str:
    return _Writer(build(ctx)).text()


class _Writer:
    def __init__(self, system: System) -> None:
        self.s = system
        self.lines: list[str] = []
        self.labels: dict[int, str] = {}  # line number (1-based) -> step

    def emit(self, line: str, step: str | None = None) -> None:
        self.lines.append(line)
        if step is not None:
            self.labels[len(self.lines)] = step

    def text(self) -> str:
        s = self.s
        slots = 2 * len(s.places)
        self.emit("/* noetlc: the token system of the playbook (docs/lint.md, SPIN) */")
        self.emit(f"/* a place holding more than {CAP} tokens stops an execution (capped) */")
        for i, place in enumerate(s.places):
            self.emit(f"#define P_{i} {2 * i} /* {place} */")
        self.emit(f"byte m[{slots}];")
        self.emit("bool failed; bool capped;")
        self._settle()
        self.emit("active proctype net() {")
        self.emit(f"  m[{2 * s.initial + LIVE}] = 1;")
        self.emit("  do")
        for node, outcomes in sorted(s.outcomes.items()):
            step = s.step_of.get(node, s.places[node])
            for o in outcomes:
                self.emit(f"  :: atomic {{ m[{2 * node + LIVE}] > 0 -> m[{2 * node + LIVE}]--;")
                self.emit(f'       printf("ran {step}\\n");', step)
                if o.end != CONTINUE:
                    self.emit("       failed = true }; break")
                    continue
                for slot, count in o.prods:
                    self.emit(f"       m[{slot}] = m[{slot}] + {count};")
                    self._reset_counter(slot)
                self.emit("       settle() }")
        for rule in s.joins.values():
            self._join(rule.branches, rule.target)
        over = " || ".join(f"m[{i}] > {CAP}" for i in range(slots))
        self.emit(f"  :: atomic {{ ({over}) -> capped = true }}; break")
        self.emit("  :: timeout -> break")
        self.emit("  od;")
        for rule in s.joins.values():
            step = s.step_of.get(rule.target, s.places[rule.target])
            for b in rule.branches:
                self.emit(
                    f"  assert(failed || capped || m[{2 * b + LIVE}] == 0); "
                    f"/* deadlock at join {step} */"
                )
        self.emit("}")
        return "\n".join(self.lines) + "\n"

    def _reset_counter(self, slot: int) -> None:
        counter = self.s.counter.get(slot // 2)
        if slot % 2 == LIVE and counter is not None:
            self.emit(f"       m[{2 * counter + DEAD}] = 0;")

    def _join(self, branches: tuple[int, ...], target: int) -> None:
        combos: list[list[int]] = [[]]
        for b in branches:
            combos = [[*c, 2 * b + color] for c in combos for color in (LIVE, DEAD)]
        for chosen in combos:
            live = any(slot % 2 == LIVE for slot in chosen)
            guard = " && ".join(f"m[{slot}] > 0" for slot in chosen)
            out = 2 * target + (LIVE if live else DEAD)
            takes = " ".join(f"m[{slot}]--;" for slot in chosen)
            self.emit(f"  :: atomic {{ {guard} -> {takes} m[{out}]++;")
            if live:
                self._reset_counter(out)
            self.emit("       settle() }")

    def _settle(self) -> None:
        """Dead tokens pass steps at once, merges count, `any` joins let a live token in."""
        s = self.s
        self.emit("inline settle() {")
        self.emit("  do")
        for branch, target in sorted(s.any_branch.items()):
            flag = 2 * s.ran_flag[target] + DEAD
            self.emit(
                f"  :: m[{2 * branch + LIVE}] > 0 && m[{flag}] == 0 -> "
                f"m[{2 * branch + LIVE}]--; m[{flag}] = 1; m[{2 * target + LIVE}]++"
            )
            self.emit(
                f"  :: m[{2 * branch + LIVE}] > 0 && m[{flag}] > 0 -> m[{2 * branch + LIVE}]--"
            )
            self.emit(f"  :: m[{2 * branch + DEAD}] > 0 -> m[{2 * branch + DEAD}]--")
        for node in sorted(s.outcomes):
            slot = 2 * node + DEAD
            effects = " ".join(f"m[{p}] = m[{p}] + {c};" for p, c in s.dead_rules.get(node, ()))
            counter = s.counter.get(node)
            if counter is None:
                self.emit(f"  :: m[{slot}] > 0 -> m[{slot}]--; {effects}")
                continue
            count = 2 * counter + DEAD
            need = s.alternatives[node]
            self.emit(f"  :: m[{slot}] > 0 -> m[{slot}]--; m[{count}]++;")
            self.emit(
                f"     if :: m[{count}] >= {need} -> m[{count}] = 0; {effects} :: else -> skip fi"
            )
        self.emit("  :: else -> break")
        self.emit("  od")
        self.emit("}")
