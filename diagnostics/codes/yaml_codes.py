"""NOE0xx: reading files and YAML."""

from noetlc.diagnostics.codes import code

CODES = (
    code(
        "NOE001",
        "yaml-syntax",
        "error",
        "YAML syntax error",
        """
The file is not valid YAML, so nothing else could be checked. The position points at the
place the YAML parser gave up; the real mistake is often on the line before (a missing
colon, a bad indentation, an unclosed quote or bracket).

Example (the second line is indented inconsistently):

    workflow:
      - step: start
       tool: {kind: noop}
""",
        "check the indentation and quoting around this position",
    ),
    code(
        "NOE002",
        "duplicate-key",
        "error",
        "duplicate mapping key",
        """
A mapping has the same key twice. YAML loaders silently keep the last value, which hides
mistakes, so noetlc rejects it and shows both places.

Example:

    - step: start
      tool: {kind: noop}
      tool: {kind: python, code: "result = 1"}
""",
        "remove one of the two keys or merge their contents",
    ),
    code(
        "NOE003",
        "coerced-scalar",
        "warning",
        "unquoted scalar silently changes type",
        """
YAML 1.1 turns some unquoted words into other types: `on`, `off`, `yes`, `no`, `y`, `n`
become booleans, `010` becomes the octal number 8, `1:30` becomes 90. This is almost never
what the author meant. Quote the value to keep it a string, or write `true`/`false` or a
plain decimal number.

Example:

    workload:
      mode: on        # becomes true
      zip: 010        # becomes 8
""",
        'quote the value ("on") or write the intended literal (true, 10)',
    ),
    code(
        "NOE004",
        "unreadable-file",
        "error",
        "the file cannot be read",
        """
The file does not exist, is a directory, is not readable, or is not UTF-8 text.

Example:

    noetlc check does_not_exist.yaml
""",
        "check the path and the file's permissions and encoding",
    ),
    code(
        "NOE005",
        "not-a-playbook-document",
        "error",
        "the document is empty or not a mapping",
        """
A playbook file must contain exactly one YAML document whose top level is a mapping with
`workflow:` (and usually `apiVersion`, `kind`, `metadata`).

Example of a file that is a list instead of a mapping:

    - step: start
      tool: {kind: noop}
""",
        "start the file with `apiVersion: noetl.io/v2`, `kind: Playbook` and a `workflow:` list",
    ),
    code(
        "NOE006",
        "unsupported-yaml-feature",
        "error",
        "YAML feature not supported in playbooks",
        """
Playbooks are plain data: mappings, sequences and scalars. Custom tags (`!!python/object`,
`!include`), non-scalar mapping keys and multiple documents in one file are rejected, and so
is a scalar its explicit tag cannot read (`!!int abc`, `!!bool abc`, `!!timestamp hello`).
Integers must fit in 64 bits (from -2**63 to 2**64 - 1: what compiled bytecode stores);
quote a larger one (an id, say) to keep it as text.

Example:

    workload: !include other.yaml
""",
        "write the value inline as plain YAML",
    ),
    code(
        "NOE007",
        "yaml-alias-expansion",
        "error",
        "YAML aliases expand the document too far",
        """
An alias (`*name`) repeats the value its anchor (`&name`) names. Nested aliases multiply: a
600-byte file of nine anchors, each a list of nine aliases of the previous one, stands for
hundreds of millions of values. noetlc counts every node of a document with each alias
expanded and stops at 1,000,000 (playbooks, `--workload` and `--keychain` files alike),
at the alias that went over.

Example:

    a: &a [x, x, x, x, x, x, x, x, x]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    # ... six more levels
""",
        "write the data out, or reference it instead of repeating it with aliases",
    ),
)
