"""NOE3xx: templates and expressions."""

from noetlc.compiler.codes import code

CODES = (
    code(
        "NOE301",
        "template-syntax",
        "error",
        "a template does not parse",
        """
Every `{{ … }}` in a playbook is a Jinja expression and every `when:` is one (with or without
the braces). This one is not valid Jinja: an unclosed brace or bracket, a dangling operator,
an unknown tag.

Example:

    when: "{{ outcome.status == 'error' and }}"
""",
        "check the braces and the expression inside `{{ … }}`",
    ),
)
