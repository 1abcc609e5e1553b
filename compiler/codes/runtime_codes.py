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
    code(
        "NOE803",
        "bad-store",
        "error",
        "the event store cannot be opened",
        """
`--db` names the event store: `sqlite:///path/to/file.db` (created if missing) or `memory:`.
The URL is malformed, names an unsupported backend, or the file cannot be opened.

Example:

    noetl-vm run playbook.yaml --db mysql://localhost/noetl
""",
        "use sqlite:///.noetl/noetl.db (the default) or memory:",
    ),
    code(
        "NOE804",
        "unknown-execution",
        "error",
        "no such execution in the event store",
        """
`noetl-vm status ID` and `noetl-vm events ID` look the execution up in the store named by
`--db` (default `sqlite:///.noetl/noetl.db`); it is not there.

Example:

    noetl-vm events 00000000-0000-0000-0000-000000000000
""",
        "`noetl-vm status` lists the executions the store has",
    ),
)
