"""NOE8xx: runtime, databases and command lines."""

from noetlc.compiler.codes import code

CODES = (
    code(
        "NOE800",
        "usage-error",
        "error",
        "bad command-line arguments",
        """
The command line could not be understood: an unknown option, a missing argument, or a value
of the wrong form. The usage line printed above the message shows what is expected.

Example:

    noetlc check --format xml playbook.yaml
""",
        "run the command with --help",
    ),
    code(
        "NOE801",
        "unknown-code",
        "error",
        "unknown diagnostic code",
        """
`noetlc explain` was given a code that does not exist.

Example:

    noetlc explain NOE12345
""",
        "`noetlc explain` without arguments lists every code",
    ),
    code(
        "NOE802",
        "cannot-write",
        "error",
        "an output file cannot be written",
        """
The output path is in a directory that does not exist or is not writable.

Example:

    noetlc compile playbook.yaml -o /nonexistent/dir/out.nbc
""",
        "check the output path",
    ),
)
