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
    code(
        "NOE704",
        "invalid-bytecode",
        "error",
        "the bytecode does not verify",
        """
The container is intact and of this format, but the program in it is not well formed: a
pipeline instruction with the wrong operands (ir/opcodes.py), a transition record of the wrong
shape, an index past the end of its pool, a place, step, name or jump label that does not
exist, a step without its pipeline block. Loaders verify every program before a VM sees it (files, stored executions and
the first event of a distributed execution alike), so a program that was not made by noetlc,
or was edited, is refused here instead of failing in the middle of an execution. The message
names the first problems found.

Example: a `.nbc` file whose transition reads expression 99 of a pool of 3.
""",
        "recompile the playbook with `noetlc compile`; a file that still fails was not made by noetlc",
    ),
    code(
        "NOE705",
        "expression-pool-mismatch",
        "error",
        "a stored expression does not match its source",
        """
A program's expression pool keeps each expression's source text, its mode and the SHA-256 of
the code noetlc generated from it, never the code itself. Loading compiles every source again
with the installed code generator and compares the hash; stored code is never executed. A
different hash means the pool was edited, or the program was compiled by a noetlc whose code
generator produces different code for this expression. The message names the expression.

Example: a `.nbc` file whose pool entry's source was changed after compilation.
""",
        "recompile the playbook with the installed noetlc; never edit compiled bytecode",
    ),
)
