"""Source spans: where in a file a node, a value or a finding is.

Apart from `report.py` (which re-exports them) so that code which only carries spans (the
expression compiler, the compile cache) does not import the diagnostics and their
dataclasses: a cached `noetl-vm run` reports nothing.
"""

from __future__ import annotations

from typing import NamedTuple


class Span(NamedTuple):
    """A source range; lines and columns are 1-based, the end is exclusive on the column.

    A NamedTuple rather than a dataclass: the loader creates one per YAML node, and tuple
    construction is several times cheaper."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"

    @staticmethod
    def point(file: str, line: int, column: int) -> Span:
        return Span(file, line, column, line, column + 1)


# The span of generated nodes and of values that were never written in a file.
NO_SPAN = Span("<generated>", 0, 0, 0, 0)
