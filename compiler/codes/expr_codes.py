"""NOE3xx: templates and expressions."""

from noetlc.compiler.codes import CodeInfo

CODES: tuple[CodeInfo, ...] = ()
