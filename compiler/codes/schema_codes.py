"""NOE1xx: the surface schema."""

from noetlc.compiler.codes import CodeInfo

CODES: tuple[CodeInfo, ...] = ()
