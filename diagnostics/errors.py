"""The exception bases: problems a user can fix (`UserError`) and bugs (`InternalCompilerError`).

Run-time problems a user can fix:

Stores (`StoreError`), the PostgreSQL runtime (`DatabaseError`) and the keychain
(`KeychainError`) each raise a subclass of `UserError`: a stable NOE8xx code
(diagnostics/codes/runtime_codes.py), a message and an optional hint. The command lines catch
`UserError` once, print `error[CODE]: message` and `  hint: ...`, and exit without a
traceback. It lives in the bottom layer so every layer can import it without a cycle.

Every user error has a `kind` (`ErrorKind`, a class attribute): what sort of problem it is,
and the one thing both front ends read. `OUTCOMES` maps a kind to the exit code of the command
lines (cli/common.py's `exit_code_for`) and the HTTP status of the service (service/app.py's
`http_status_for`); a new sort of error is a new kind and a row here, not a class added to two
tables above.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar, NamedTuple


class ErrorKind(enum.Enum):
    """What sort of problem a user error is."""

    INPUT = "input"  # the input has errors, or a command's result is a failure
    USAGE = "usage"  # a bad option or value, an unreadable option file, an unwritable output
    EXECUTION = "execution"  # the execution named cannot take the request: unknown, ended, owned
    UNAVAILABLE = "unavailable"  # the event store or database cannot be used


class Outcome(NamedTuple):
    exit_code: int  # of `noetlc` and `noetl-vm` (docs/cli.md)
    http_status: int  # of the service, for an error raised below its routes (docs/api.md)


# kind -> outcome. The service answers 400 for the kinds a request caused (the routes refuse
# unknown ids (404), ended executions (409) and missing settings (503) themselves, before a
# lower layer would) and 503 when its store or database cannot be used now (unreachable,
# locked by another process, full): the request may succeed later, as NoETL's server answers
# 503 when its database pool is busy.
OUTCOMES: dict[ErrorKind, Outcome] = {
    ErrorKind.INPUT: Outcome(1, 400),
    ErrorKind.USAGE: Outcome(2, 400),
    ErrorKind.EXECUTION: Outcome(4, 400),
    ErrorKind.UNAVAILABLE: Outcome(5, 503),
}


class UserError(Exception):
    """A problem the user can fix: `code` is stable, `hint` says how (or is None); `kind`
    (set by each subclass) picks the exit code and the HTTP status (`OUTCOMES`)."""

    kind: ClassVar[ErrorKind] = ErrorKind.INPUT

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        self.code = code
        self.hint = hint
        super().__init__(message)

    def render(self) -> str:
        """What the command line prints: `error[CODE]: message`, then `  hint: ...`."""
        text = f"error[{self.code}]: {self}"
        return f"{text}\n  hint: {self.hint}" if self.hint else text

    @property
    def outcome(self) -> Outcome:
        return OUTCOMES[self.kind]


# printed under an `InternalCompilerError` (and any other bug) by the command lines
REPORT_FOOTER = (
    "This is a bug in noetlc, not in your playbook. Please report it with the playbook and the "
    "command line at https://github.com/noetl/noetlc/issues"
)


class InternalCompilerError(Exception):
    """A bug in noetlc itself (never a user mistake). Printed with a please-report footer.

    `span` is where in the playbook the bug showed (a `Span`, or None)."""

    def __init__(self, message: str, span: Any = None, pass_name: str | None = None):
        self.span = span
        self.pass_name = pass_name
        super().__init__(message)
