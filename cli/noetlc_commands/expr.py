"""Evaluate one expression or template against variables and print the result as JSON.

    noetlc expr "{{ ctx.count | default(0) + 1 }}" --vars '{"ctx": {"count": 2}}'

    noetlc expr "1 + 2"                    # 3: without {{ }} the argument is one expression

`--guard` evaluates a `when:` condition (braces optional) and prints true/false. An argument
with neither `{{` nor `{%` is an expression, as if written `{{ ... }}` (a template without
them would only be its own text). Exit 1 with a located message when the expression does not
compile or fails at run time.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from noetlc.expr.compile import (
    ExpressionSyntaxError,
    ExpressionUnsafe,
    Mode,
    compile_expression,
)
from noetlc.expr.runtime import ExpressionError, compile_entry, to_json_value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "expression",
        help="an expression such as 'x + 1', a template such as 'n={{ x + 1 }}', or a condition",
    )
    p.add_argument("--vars", default="{}", metavar="JSON", help="the scope: a JSON object")
    p.add_argument("--guard", action="store_true", help="evaluate as a `when:` condition")
    p.add_argument("--show-code", action="store_true", help="print the generated Python code")


def run(args: argparse.Namespace) -> int:
    try:
        variables: Any = json.loads(args.vars)
    except json.JSONDecodeError as exc:
        print(
            f"<vars>:1:{exc.colno}: error[NOE800]: --vars is not valid JSON: {exc.msg}",
            file=sys.stderr,
        )
        return 2
    except (ValueError, RecursionError) as exc:  # an integer too long, nesting too deep
        print(f"<vars>:1:1: error[NOE800]: --vars cannot be read: {exc}", file=sys.stderr)
        return 2
    if not isinstance(variables, dict):
        print("<vars>:1:1: error[NOE800]: --vars must be a JSON object", file=sys.stderr)
        return 2
    mode: Mode = "guard" if args.guard else "template"
    source = args.expression
    if mode == "template" and "{{" not in source and "{%" not in source:
        source = "{{ " + source + " }}"
    try:
        compiled = compile_expression(source, mode=mode)
    except ExpressionSyntaxError as exc:
        print(f"<expr>:1:1: error[NOE301]: template syntax error: {exc}", file=sys.stderr)
        return 1
    except ExpressionUnsafe as exc:
        print(f"<expr>:1:1: error[NOE302]: sandbox violation: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 1
    if args.show_code:
        print(compiled.code or f"# slow path (jinja2): {compiled.slow_reason}", file=sys.stderr)
    try:
        value = compile_entry(compiled.to_entry())(variables)
        if mode == "guard":
            value = bool(value)
    except ExpressionError as exc:
        cause = exc.cause
        print(f"<expr>:1:1: error[{exc.code}]: {type(cause).__name__}: {cause}", file=sys.stderr)
        return 1
    except Exception as exc:  # e.g. bool() of a value that refuses it
        print(f"<expr>:1:1: error[NOE310]: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(to_json_value(value)))
    return 0
