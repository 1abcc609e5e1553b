"""Tokens, and join branch places: the tokens waiting at a join, and when the join fires.

`JoinPlaces.arrive` puts a token on a branch place and returns what fired, so the control VM
stays the only writer of its ready queue, its events and its firing count. An `all` join
(AND-join) fires when every branch place holds a token — live or dead (dead-path elimination);
it enters the step dead only if every consumed token was dead. An `any` join lets each live
token through until the step has run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Token:
    """A token on a place: the args it carries into the step it enters, whether it is dead
    (dead-path elimination) and the step that produced it (a join's branch)."""

    __slots__ = ("args", "dead", "source")

    def __init__(self, args: dict[str, Any], dead: bool = False, source: str | None = None) -> None:
        self.args = args
        self.dead = dead
        self.source = source


# (the join step, the token that enters it, the `join.fired` payload; None: it enters dead)
Fired = tuple[str, Token, dict[str, Any] | None]


class JoinPlaces:
    __slots__ = ("branch_places", "has_run", "kinds", "marking")

    def __init__(
        self,
        branch_places: dict[str, tuple[str, ...]],
        kinds: dict[str, str],
        has_run: Callable[[str], bool],
    ) -> None:
        self.branch_places = branch_places  # join step -> its branch places
        self.kinds = kinds  # join step -> "all" | "any"
        self.has_run = has_run
        self.marking: dict[str, list[Token]] = {}

    def arrive(self, place: str, token: Token) -> list[Fired]:
        self.marking.setdefault(place, []).append(token)
        step = place.split(".from.", 1)[0]
        branches = self.branch_places.get(step)
        if not branches:
            return []
        if self.kinds.get(step, "all") == "any":
            return self._let_through(step, branches)
        marking = self.marking
        if not all(marking.get(b) for b in branches):
            return []
        tokens = [marking[b].pop(0) for b in branches]
        live = [t for t in tokens if not t.dead]
        if not live:
            return [(step, Token({}, dead=True), None)]
        merged = {t.source: t.args for t in live if t.source is not None}
        return [(step, Token(merged), {"branches": sorted(merged)})]

    def _let_through(self, step: str, branches: tuple[str, ...]) -> list[Fired]:
        fired: list[Fired] = []
        for place in branches:
            tokens = self.marking.get(place)
            while tokens:
                token = tokens.pop(0)
                if not token.dead and not self.has_run(step):
                    payload = {"branches": [token.source], "kind": "any"}
                    fired.append((step, Token({token.source or "": token.args}), payload))
        return fired

    def stuck(self) -> list[str]:
        """Branch places that hold a live token: joins that wait (a deadlock once nothing
        else can run)."""
        return [p for p, tokens in self.marking.items() if any(not t.dead for t in tokens)]
