"""The compilation unit: the state one playbook accumulates as it goes through the passes.

Each pass's output is one typed field, filled in pipeline order; a field stays None when its
pass did not run (the pipeline stopped earlier, or `--until` ended it) or found the input
unusable. A pass reads the fields of the passes before it and writes only its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from noetlc.diagnostics.report import Reporter

if TYPE_CHECKING:  # each pass imports what it builds; the unit itself stays cheap to import
    from noetlc.compiler.lowered import LoweredPrograms
    from noetlc.compiler.tree import Playbook
    from noetlc.compiler.values import ValuePool
    from noetlc.compiler.ynodes import YMap
    from noetlc.expr.compile import ExpressionPool
    from noetlc.ir.net import Net
    from noetlc.ir.program import Program


@dataclass
class CompilationUnit:
    """One compilation: the source, the outputs of each pass, the diagnostics."""

    file: str
    source: str
    reporter: Reporter = field(default_factory=Reporter)
    options: dict[str, Any] = field(default_factory=dict)
    # load: the located YAML document as written
    document: YMap | None = None
    # desugar: the same document in canonical form (`noetlc migrate` prints it)
    canonical: YMap | None = None
    # normalize: the canonical tree
    playbook: Playbook | None = None
    # expressions: every guard and template of the tree, compiled
    pool: ExpressionPool | None = None
    # net: the colored Petri net and the value pool its transitions refer to
    net: Net | None = None
    values: ValuePool | None = None
    # lower: the control and pipeline programs
    programs: LoweredPrograms | None = None
    # assemble: the verified program object (its payload and `.nbc` bytes are made from it
    # when first asked for, and kept on it)
    program: Program | None = None
    passes_run: list[str] = field(default_factory=list)

    @property
    def payload(self) -> dict[str, Any] | None:
        """The program's payload (plain data), None before `assemble`."""
        return None if self.program is None else self.program.payload

    @property
    def nbc(self) -> bytes | None:
        """The program's `.nbc` bytes, None before `assemble`."""
        return None if self.program is None else self.program.nbc
