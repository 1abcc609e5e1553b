"""NOE9xx: internal compiler errors (bugs in noetlc)."""

from noetlc.diagnostics.codes import code

CODES = (
    code(
        "NOE900",
        "internal-error",
        "error",
        "internal compiler error",
        """
noetlc hit a bug while compiling. This is never caused by a mistake in the playbook; the
message carries the pass that failed. Please report it with the playbook and command line.

Example: there is none to give; any input that triggers it is a bug to report.
""",
        "please report this with the playbook that triggered it",
    ),
)
