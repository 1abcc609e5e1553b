"""The exception bases: problems a user can fix (`UserError`) and bugs (`InternalCompilerError`).

Run-time problems a user can fix:

Stores (`StoreError`), the PostgreSQL runtime (`DatabaseError`) and the keychain
(`KeychainError`) each raise a subclass of `UserError`: a stable NOE8xx code
(diagnostics/codes/runtime_codes.py), a message and an optional hint. The command lines catch
`UserError` once, print `error[CODE]: message` and `  hint: ...`, and exit 1 without a
traceback. It lives in the package root so every layer can import it without a cycle.
"""

from __future__ import annotations

from typing import Any


class UserError(Exception):
    """A problem the user can fix: `code` is stable, `hint` says how (or is None)."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        self.code = code
        self.hint = hint
        super().__init__(message)

    def render(self) -> str:
        """What the command line prints: `error[CODE]: message`, then `  hint: ...`."""
        text = f"error[{self.code}]: {self}"
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class InternalCompilerError(Exception):
    """A bug in noetlc itself (never a user mistake). Printed with a please-report footer.

    `span` is where in the playbook the bug showed (a `Span`, or None)."""

    def __init__(self, message: str, span: Any = None, pass_name: str | None = None):
        self.span = span
        self.pass_name = pass_name
        super().__init__(message)
