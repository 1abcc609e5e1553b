"""The one exception type the PostgreSQL runtime raises for anything a user can fix."""

from __future__ import annotations


class DatabaseError(Exception):
    """Cannot connect, bad URL, schema not upgraded, migration failed: a stable NOE8xx code
    (compiler/codes/runtime_codes.py) and a hint. Command lines print
    `error[CODE]: message` and `  hint: ...` and exit non-zero, without a traceback."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        self.code = code
        self.hint = hint
        super().__init__(message)

    def render(self) -> str:
        text = f"error[{self.code}]: {self}"
        return f"{text}\n  hint: {self.hint}" if self.hint else text
