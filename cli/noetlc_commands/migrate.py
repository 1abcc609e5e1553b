"""Print (or rewrite in place with -i) a playbook in canonical form.

Legacy forms are rewritten by the compiler's `desugar` pass; the parts of the file the rewrite
did not touch keep their comments, quoting and key order (ruamel.yaml round trip). What was
rewritten is reported on standard error, one line per construct. Running it twice changes
nothing the second time.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.scalarstring import LiteralScalarString

from noetlc.compiler.pipeline import compile_file
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Diagnostic, Span, render_text
from noetlc.diagnostics.severity import Severity


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the playbook to migrate")
    p.add_argument("-i", "--in-place", action="store_true", help="rewrite FILE instead of printing")


def run(args: argparse.Namespace) -> int:
    unit = compile_file(args.file, until="desugar", options={"migrate": True, "print": True})
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    if errors or unit.document is None or unit.canonical is None:
        print(render_text(unit.reporter.sorted(), {unit.file: unit.source}), file=sys.stderr)
        return 1
    rewrites = [d for d in unit.reporter.sorted() if d.code.startswith("NOE4")]
    try:
        text = migrate_text(unit.source, unit.document, unit.canonical)
    except YAMLError as exc:
        # The round-trip reader (ruamel.yaml) is stricter than the checker's (PyYAML): a tab
        # inside a plain key, for one. Say where, and how to make the file readable to both.
        print(render_text([_unreadable(unit.file, exc)], {unit.file: unit.source}), file=sys.stderr)
        return 1
    for d in rewrites:
        print(f"{d.span}: rewrote {d.message} [{d.code}]", file=sys.stderr)
    if not rewrites:
        print(f"{args.file}: already canonical", file=sys.stderr)
    if args.in_place:
        if rewrites:
            Path(args.file).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _unreadable(file: str, exc: YAMLError) -> Diagnostic:
    mark = (exc.problem_mark or exc.context_mark) if isinstance(exc, MarkedYAMLError) else None
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    problem = (exc.problem if isinstance(exc, MarkedYAMLError) else None) or str(exc)
    return Diagnostic(
        "NOE001",
        Severity.ERROR,
        f"migrate's round-trip YAML reader cannot read this ({problem.strip()}); "
        "`check` can, so the file is valid but cannot be rewritten as it is",
        Span.point(file, line, column),
        hint="quote the scalar (a key or value with a tab or an unusual character) and run "
        "migrate again",
    )


def migrate_text(source: str, document: YMap, canonical: YMap) -> str:
    """The canonical YAML, reusing the original text's nodes wherever nothing changed."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    original = yaml.load(source)
    merged = _merge(original, document, canonical)
    out = io.StringIO()
    yaml.dump(merged, out)
    return out.getvalue()


def _merge(rt: Any, old: YNode, new: YNode) -> Any:
    if old == new:
        return rt
    if isinstance(old, YMap) and isinstance(new, YMap) and isinstance(rt, CommentedMap):
        new_keys = new.keys()
        for key in list(rt.keys()):
            if key not in new_keys:
                del rt[key]
        for position, key in enumerate(new_keys):
            new_value = new.get(key)
            assert new_value is not None
            old_value = old.get(key)
            if key in rt and old_value is not None:
                rt[key] = _merge(rt[key], old_value, new_value)
            else:
                rt.insert(min(position, len(rt)), key, _plain(new_value))
        return rt
    if (
        isinstance(old, YSeq)
        and isinstance(new, YSeq)
        and isinstance(rt, CommentedSeq)
        and len(old.items) == len(new.items)
    ):
        for i, (o, n) in enumerate(zip(old.items, new.items)):
            rt[i] = _merge(rt[i], o, n)
        return rt
    return _plain(new)


def _plain(node: YNode) -> Any:
    if isinstance(node, YScalar):
        value = node.value
        if isinstance(value, str) and "\n" in value:
            return LiteralScalarString(value)
        return value
    if isinstance(node, YSeq):
        seq = CommentedSeq([_plain(i) for i in node.items])
        return seq
    out = CommentedMap()
    for k, v in node.items:
        out[str(k.value)] = _plain(v)
    return out
