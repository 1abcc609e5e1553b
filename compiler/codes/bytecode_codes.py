"""NOE7xx: bytecode (.nbc) files."""

from noetlc.compiler.codes import CodeInfo

CODES: tuple[CodeInfo, ...] = ()
