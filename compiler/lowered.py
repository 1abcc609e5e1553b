"""The lowered programs: the control program (one record per transition), the pipeline
programs (one block of instructions per step), the name and position tables and the
workbook's tasks.

`lower` builds them from the net and the tree; `assemble` writes them into the `.nbc` payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noetlc.ir.net import Position
from noetlc.ir.program import TransitionInfo

Instruction = list[Any]


@dataclass
class Block:
    """One block of generated instructions, with a debug position per instruction."""

    name: str
    code: list[Instruction] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)  # index into the position table


@dataclass
class LoweredPrograms:
    """The output of `lower`: name pool, positions, control records and pipeline blocks."""

    names: list[str]
    positions: list[Position]
    control: list[TransitionInfo]
    pipelines: list[Block]
    task_labels: dict[str, dict[str, int]]  # step -> task name -> pc of its TASK
    workbook: list[list[Any]] = field(default_factory=list)  # [name, kind, args value, spec value]
