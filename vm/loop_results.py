"""A long loop's iteration results, kept in chunks that go to the result store once complete.

A loop of 100,000 iterations held every iteration's result in the control VM until the loop
ended (and the loop's result, the list of them all, for the rest of the execution). With a
`Spill` (the runtime's result store, runtime/driver.py), a loop of more than CHUNK items keeps
its results in chunks of CHUNK consecutive iterations: a chunk whose slots are all set
(a result, or null for a failed iteration) is written to the store as its JSON and only its
key is kept. When the loop ends, its result — NoETL's `{"results": [...], "stats": {...}}` —
is assembled from the chunks' JSON texts into the store (`Spill.join`) and the step's result is
that reference: templates resolve it when they read a field of it, tool arguments get the
value, a summary shows it (by reference past its inline size). Keys are the SHA-256 of the
JSON text, so a replay, or a resumed execution, writes and refers to the same values.
"""

from __future__ import annotations

from typing import Any, Protocol

CHUNK = 1024


class Spill(Protocol):
    """Where a long loop's results go (the runtime's result store)."""

    def put(self, values: list[Any]) -> str:
        """Store a chunk of results; its key."""

    def get(self, key: str) -> list[Any]:
        """A stored chunk's results."""

    def join(self, parts: list[str | list[Any]], stats: dict[str, Any]) -> dict[str, Any]:
        """The loop's result `{"results": [...], "stats": stats}`, the chunks' results in
        order (a key: a stored chunk; a list: one in memory), stored: its reference."""


class LoopResults:
    """`n` result slots in chunks of CHUNK; a complete chunk is spilled (see the module doc)."""

    __slots__ = ("chunks", "filled", "n", "spill")

    def __init__(self, n: int, spill: Spill) -> None:
        self.n = n
        self.spill = spill
        self.chunks: dict[int, list[Any] | str] = {}  # chunk -> its values, or its key
        self.filled: dict[int, int] = {}  # chunk in memory -> slots set

    def __len__(self) -> int:
        return self.n

    def _size(self, chunk: int) -> int:
        return min(CHUNK, self.n - chunk * CHUNK)

    def __setitem__(self, index: int, value: Any) -> None:
        chunk, offset = divmod(index, CHUNK)
        values = self.chunks.get(chunk)
        if isinstance(values, str):  # a stored chunk is complete: never set again
            return
        if values is None:
            values = self.chunks[chunk] = [None] * self._size(chunk)
        values[offset] = value
        filled = self.filled[chunk] = self.filled.get(chunk, 0) + 1
        if filled == len(values):
            self.chunks[chunk] = self.spill.put(values)
            del self.filled[chunk]

    def truncated(self, n: int) -> LoopResults:
        """The first `n` slots (a loop that `stop_when` ended early)."""
        out = LoopResults(n, self.spill)
        last = -(-n // CHUNK)
        for chunk in range(last):
            part = self.chunks.get(chunk)
            if part is None:
                continue
            size = out._size(chunk)
            if isinstance(part, str) and size < CHUNK:
                part = self.spill.get(part)
            if isinstance(part, list):
                out.chunks[chunk] = part[:size]  # the loop ends now: nothing is set again
            else:
                out.chunks[chunk] = part
        return out

    def result(self, stats: dict[str, Any]) -> dict[str, Any]:
        """The loop's result, stored: its reference."""
        parts: list[str | list[Any]] = []
        for chunk in range(-(-self.n // CHUNK)):
            part = self.chunks.get(chunk)
            parts.append([None] * self._size(chunk) if part is None else part)
        return self.spill.join(parts, stats)


def new_results(n: int, spill: Spill | None) -> list[Any] | LoopResults:
    """A loop run's result slots: chunked and spilled past CHUNK items when there is a store."""
    if spill is None or n <= CHUNK:
        return [None] * n
    return LoopResults(n, spill)


def truncated(results: list[Any] | LoopResults, n: int) -> list[Any] | LoopResults:
    return results.truncated(n) if isinstance(results, LoopResults) else results[:n]


__all__ = ["CHUNK", "LoopResults", "Spill", "new_results", "truncated"]
