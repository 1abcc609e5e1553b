"""NOE7xx: bytecode (.nbc) files."""

from noetlc.diagnostics.codes import CodeInfo, code

CODES: tuple[CodeInfo, ...] = (
    code(
        "NOE701",
        "not-bytecode",
        "error",
        "the file is not noetlc bytecode",
        """
A `.nbc` file starts with the 8 magic bytes `\\x89NBC\\r\\n\\x1a\\n`; this one does not (it may be
a YAML file with the wrong extension, or another format).

Example:

    noetl-vm run playbook.yaml.nbc   # a renamed YAML file
""",
        "compile the playbook with `noetlc compile FILE.yaml -o FILE.nbc`",
    ),
    code(
        "NOE702",
        "corrupt-bytecode",
        "error",
        "the bytecode file is truncated or corrupt",
        """
The container could not be decoded, or the payload's SHA-256 does not match the header:
the file was truncated, edited, or damaged in transit. Nothing from it is used.

Example:

    head -c 100 playbook.nbc > broken.nbc && noetlc dis broken.nbc
""",
        "recompile the playbook",
    ),
    code(
        "NOE703",
        "bytecode-version",
        "error",
        "the bytecode was compiled for another format version",
        """
The file's format version differs from the one this noetl-vm reads; bytecode is not
portable across format versions. The message names the compiler that produced it.

Example: a file compiled by an older noetlc after an upgrade.
""",
        "recompile the playbook with the installed noetlc",
    ),
)
