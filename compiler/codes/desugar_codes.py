"""NOE4xx: legacy forms and authoring sugar."""

from noetlc.compiler.codes import CodeInfo

CODES: tuple[CodeInfo, ...] = ()
