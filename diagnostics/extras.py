"""Optional dependencies, by the extra of pyproject.toml that installs them.

`pip install noetlc` is the compiler, the checker and the embedded runtime; the HTTP service
and the PostgreSQL runtime need an extra (README.md, "Dependencies"). Code imports those
packages where it needs them; a `ModuleNotFoundError` for one of them becomes NOE820 naming
the extra (the command lines' one handler, `cli/common.run_guarded`; the tool registry for
tasks).
"""

from __future__ import annotations

from noetlc.diagnostics.errors import UserError

# top-level import name -> the extra that installs it
EXTRAS: dict[str, str] = {
    "fastapi": "service",
    "starlette": "service",
    "uvicorn": "service",
    "cryptography": "service",
    "asyncpg": "postgres",
}


class MissingExtraError(UserError):
    """A package of an extra is not installed (NOE820)."""


def missing_extra(exc: ImportError) -> MissingExtraError | None:
    """NOE820 for an import of a package an extra installs; None for any other import error."""
    name = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(name)
    if extra is None:
        return None
    return MissingExtraError(
        "NOE820",
        f"this needs the `{name}` package of the `noetlc[{extra}]` extra, which is not installed",
        hint=f"pip install 'noetlc[{extra}]'",
    )
