"""jinja2 is loaded only when an expression needs it (`noetlc.expr.undefined`), and the
template splitter that runs without it gives jinja2's lexer's pieces exactly."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from noetlc.expr import library, parser

ALPHABET = "ab1_ .|()[],+-*/%<>=~:!'\"{}#%\n\r\t"


def jinja_split(text: str) -> object:
    """The pieces of jinja2's lexer (the splitter's answer when the fast one declines)."""
    try:
        return parser._split_jinja(text)
    except parser.ExpressionSyntaxError as exc:
        return ("error", str(exc))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=24))
def test_the_plain_splitter_agrees_with_jinja2(text: str) -> None:
    fast = parser._split_plain(text)
    if fast is not None:
        assert fast == jinja_split(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["{{", "}}", " a ", "x.y", "(", ")", "-", "s3://", "\n"])))
def test_the_plain_splitter_agrees_on_brace_soup(parts: list[str]) -> None:
    text = "".join(parts)
    fast = parser._split_plain(text)
    if fast is not None:
        assert fast == jinja_split(text)


def test_plain_templates_split_without_jinja2() -> None:
    assert parser._split_plain("s3://{{ bucket }}/{{ key | upper }}") == [
        "s3://",
        parser.ExprPiece(" bucket "),
        "/",
        parser.ExprPiece(" key | upper "),
    ]
    for declined in ('{{ "}}" }}', "{{- a }}", "{{ a -}}", "{{ a }}\n", "{% if a %}", "{{ (a }}"):
        assert parser._split_plain(declined) is None


def test_filter_and_test_names_match_their_tables() -> None:
    library.fill()
    assert set(library.FILTERS) == library.FILTER_NAMES
    assert set(library.TESTS) == library.TEST_NAMES
    assert set(library.CHARGED_FILTERS) == library.BUILDING_FILTERS


PROBE = """
import json, sys
from noetlc.expr.loader import load_expression
from noetlc.expr.compile import compile_expression
out = {}
for text, scope in json.loads(sys.argv[1]):
    c = compile_expression(text)
    e = load_expression(0, c.kind, c.source, c.mode, c.code_sha256)
    before = "jinja2" in sys.modules
    value = e(scope)
    out[text] = [before, repr(value), type(value).__name__]
print(json.dumps(out))
"""


def probe(cases: list[tuple[str, dict[str, object]]]) -> dict[str, list[object]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(cases)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, list[object]] = json.loads(done.stdout)
    return result


def test_defined_values_load_no_jinja2_and_hashes_match() -> None:
    out = probe([("{{ workload.name }}", {"workload": {"name": "w"}}), ("x {{ a + 1 }}", {"a": 1})])
    assert out["{{ workload.name }}"] == [False, "'w'", "str"]
    assert out["x {{ a + 1 }}"] == [False, "'x 2'", "str"]


def test_undefined_values_are_jinja2s_once_used() -> None:
    # a missing namespace (the shared undefined value), a missing key, a filter
    out = probe(
        [
            ("{{ workload.name }}", {}),
            ("{{ workload.nope | default('d') }}", {"workload": {}}),
            ("{{ ctx.a is defined }}", {}),
            ("{{ missing }}", {}),
        ]
    )
    assert out["{{ workload.name }}"][1:] == ["Undefined", "ChainableUndefined"]
    assert out["{{ workload.nope | default('d') }}"][1:] == ["'d'", "str"]
    assert out["{{ ctx.a is defined }}"][1:] == ["False", "bool"]
    assert out["{{ missing }}"][1:] == ["Undefined", "ChainableUndefined"]
