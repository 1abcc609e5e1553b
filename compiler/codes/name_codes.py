"""NOE2xx: names, references and structure."""

from noetlc.compiler.codes import CodeInfo

CODES: tuple[CodeInfo, ...] = ()
