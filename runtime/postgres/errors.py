"""The one exception type the PostgreSQL runtime raises for anything a user can fix."""

from __future__ import annotations

from noetlc.diagnostics.errors import ErrorKind, UserError


class DatabaseError(UserError):
    """Cannot connect, bad URL, schema not upgraded, migration failed: a stable NOE8xx code
    (diagnostics/codes/runtime_codes.py) and a hint. Command lines print
    `error[CODE]: message` and `  hint: ...` and exit non-zero, without a traceback."""

    kind = ErrorKind.UNAVAILABLE
