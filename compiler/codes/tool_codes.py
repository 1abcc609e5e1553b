"""NOE6xx: tool kinds and tool arguments."""

from noetlc.compiler.codes import CodeInfo

CODES: tuple[CodeInfo, ...] = ()
