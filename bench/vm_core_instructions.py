"""The in-memory control VM row's parts, run K times in one process, for instruction counts.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python -m bench.vm_core_instructions MODE K

MODE: `vm` (the control VM fed by the driver, `drive`), `floor` (the token game fed by the
same driver, `driven_token_game`), `bare` (the token game without events, `token_game`),
`driver` (the driver alone, `Harness`). Each runs as many firings as the VM fires on
`decisions(2000)` (6,006). The difference of callgrind's `Collected` between K = 2 and
K = 12, divided by 10, is one run's instructions (setup, imports and compilation cancel
out). docs/performance.md, "Control VM in memory: a fair floor".
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from noetlc.bench.generators import decisions
from noetlc.bench.test_bench_vm_core import (
    Harness,
    compiled,
    drive,
    driven_token_game,
    token_game,
)
from noetlc.vm.loaded_program import LoadedProgram


def main(argv: list[str]) -> int:
    mode, times = argv[0], int(argv[1])
    program = LoadedProgram(compiled(decisions(2_000)))
    fired = drive(program).firings
    rounds = fired // 3
    run: Callable[[], object] = {
        "vm": lambda: drive(program),
        "floor": lambda: driven_token_game(rounds),
        "bare": lambda: token_game(rounds),
        "driver": lambda: driven_token_game(rounds, Harness),
    }[mode]
    for _ in range(times):
        run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
