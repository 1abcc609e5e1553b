"""The compilation unit: the state one playbook accumulates as it goes through the passes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noetlc.compiler.tree import Playbook
from noetlc.compiler.ynodes import YMap
from noetlc.diagnostics.report import Reporter


@dataclass
class CompilationUnit:
    file: str
    source: str
    reporter: Reporter = field(default_factory=Reporter)
    options: dict[str, Any] = field(default_factory=dict)
    # Stage outputs, filled by the passes in pipeline order.
    document: YMap | None = None  # load: the located YAML document as written
    canonical: YMap | None = None  # desugar: the same document in canonical form
    playbook: Playbook | None = None  # normalize: the canonical tree
    # Later stages (expression pool, net, analysis, bytecode) keep their results here,
    # keyed by pass name, so this module does not import every stage.
    artifacts: dict[str, Any] = field(default_factory=dict)
    passes_run: list[str] = field(default_factory=list)
