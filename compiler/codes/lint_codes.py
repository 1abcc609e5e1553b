"""NOE5xx: static analysis (noetlc lint)."""

from noetlc.compiler.codes import CodeInfo

CODES: tuple[CodeInfo, ...] = ()
