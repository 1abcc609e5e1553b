"""Pass `load`: YAML text -> located `YMap` (the playbook document).

Uses PyYAML's composer (the C parser when available) so every node keeps its line and column;
duplicate keys are reported with both locations, and unquoted scalars that YAML 1.1 silently
coerces (`on`, `no`, `010`, `1:30`) get a warning.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from noetlc.compiler.diagnostics import Reporter, Span
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq

try:  # the C parser is ~10x faster; composition semantics are identical
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MERGE = "tag:yaml.org,2002:merge"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_KNOWN_SCALAR_TAGS = {_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP, _MERGE}

_PLAIN_BOOLS = {"true", "false"}
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$")
_CONSTRUCTOR = yaml.SafeLoader("")  # only its scalar constructors are used


def read_source(path: str | Path, reporter: Reporter) -> str | None:
    """Read a playbook file as UTF-8; NOE004 if that is impossible."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except IsADirectoryError:
        reporter.report(
            "NOE004", f"{path} is a directory, not a playbook file", Span.point(str(path), 1, 1)
        )
    except FileNotFoundError:
        reporter.report("NOE004", f"{path}: no such file", Span.point(str(path), 1, 1))
    except UnicodeDecodeError as exc:
        reporter.report(
            "NOE004", f"{path} is not UTF-8 text ({exc.reason})", Span.point(str(path), 1, 1)
        )
    except OSError as exc:
        reporter.report(
            "NOE004", f"cannot read {path}: {exc.strerror}", Span.point(str(path), 1, 1)
        )
    return None


def load(text: str, file: str, reporter: Reporter) -> YMap | None:
    """Compose `text` into located nodes; returns None when the document is unusable."""
    try:
        loader = _Loader(text)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        column = mark.column + 1 if mark else 1
        problem = exc.problem or exc.context or "invalid YAML"
        if "but found another document" in str(exc):
            reporter.report(
                "NOE006",
                "a playbook file must contain exactly one YAML document",
                Span.point(file, line, column),
            )
        else:
            reporter.report(
                "NOE001", f"YAML syntax error: {problem}", Span.point(file, line, column)
            )
        return None
    except yaml.YAMLError as exc:  # reader errors (control characters, bad encoding)
        reporter.report("NOE001", f"YAML error: {exc}", Span.point(file, 1, 1))
        return None
    except RecursionError:
        reporter.report("NOE001", "YAML nesting is too deep", Span.point(file, 1, 1))
        return None
    if root is None:
        reporter.report("NOE005", "the file is empty", Span.point(file, 1, 1))
        return None
    converter = _Converter(file, reporter)
    try:
        node = converter.convert(root)
    except RecursionError:
        reporter.report("NOE001", "YAML nesting is too deep", Span.point(file, 1, 1))
        return None
    if not isinstance(node, YMap):
        reporter.report(
            "NOE005",
            f"the top level of a playbook must be a mapping, not a {_kind(node)}",
            node.span,
        )
        return None
    return node


def _kind(node: YNode) -> str:
    if isinstance(node, YMap):
        return "mapping"
    if isinstance(node, YSeq):
        return "sequence"
    return type(node.value).__name__ if node.value is not None else "null"


def _span(file: str, node: yaml.Node) -> Span:
    start, end = node.start_mark, node.end_mark
    return Span(file, start.line + 1, start.column + 1, end.line + 1, end.column + 1)


class _Converter:
    def __init__(self, file: str, reporter: Reporter) -> None:
        self.file = file
        self.reporter = reporter
        self.active: set[int] = set()  # ids of nodes being converted (alias cycles)

    def convert(self, node: yaml.Node) -> YNode:
        if id(node) in self.active:
            self.reporter.report("NOE006", "recursive YAML alias", _span(self.file, node))
            return YScalar(None, _span(self.file, node))
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.ScalarNode):
                return self.scalar(node)
            if isinstance(node, yaml.SequenceNode):
                self.check_tag(node, "tag:yaml.org,2002:seq")
                return YSeq(tuple(self.convert(v) for v in node.value), _span(self.file, node))
            assert isinstance(node, yaml.MappingNode)
            self.check_tag(node, "tag:yaml.org,2002:map")
            return self.mapping(node)
        finally:
            self.active.discard(id(node))

    def check_tag(self, node: yaml.Node, expected: str) -> None:
        if node.tag != expected:
            self.reporter.report(
                "NOE006", f"unsupported YAML tag {node.tag}", _span(self.file, node)
            )

    def mapping(self, node: yaml.MappingNode) -> YMap:
        items: list[tuple[YScalar, YNode]] = []
        seen: dict[object, YScalar] = {}
        pairs = list(node.value)
        merged: list[tuple[YScalar, YNode]] = []
        for key_node, value_node in pairs:
            if key_node.tag == _MERGE:
                merged.extend(self.merge_items(value_node))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self.reporter.report(
                    "NOE006", "mapping keys must be plain scalars", _span(self.file, key_node)
                )
                continue
            key = self.scalar(key_node)
            if not isinstance(key.value, str):
                # Playbook keys are names; `1: x` or `true: x` keys are kept as their text.
                key = YScalar(str(key_node.value), key.span, key.quoted)
            if key.value in seen:
                first = seen[key.value]
                self.reporter.report(
                    "NOE002",
                    f"duplicate key '{key.value}' (first defined at line {first.span.line})",
                    key.span,
                    related=[("first definition", first.span)],
                )
                # Keep the last one, like YAML loaders, so later passes see one value.
                items = [(k, v) for k, v in items if k.value != key.value]
            seen[key.value] = key
            items.append((key, self.convert(value_node)))
        # Merge keys (`<<: *base`) never override explicit keys.
        for key, value in merged:
            if key.value not in seen:
                seen[key.value] = key
                items.append((key, value))
        return YMap(tuple(items), _span(self.file, node))

    def merge_items(self, value_node: yaml.Node) -> list[tuple[YScalar, YNode]]:
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        out: list[tuple[YScalar, YNode]] = []
        for src in sources:
            converted = self.convert(src)
            if isinstance(converted, YMap):
                out.extend(converted.items)
            else:
                self.reporter.report("NOE006", "a merge key (<<) needs a mapping", converted.span)
        return out

    def scalar(self, node: yaml.ScalarNode) -> YScalar:
        span = _span(self.file, node)
        quoted = node.style is not None and node.style != ""
        tag = node.tag
        if tag not in _KNOWN_SCALAR_TAGS:
            self.reporter.report("NOE006", f"unsupported YAML tag {tag}", span)
            return YScalar(node.value, span, quoted)
        if tag in (_STR, _TIMESTAMP, _MERGE):
            # Timestamps stay text: playbook data must be JSON-compatible.
            return YScalar(node.value, span, quoted)
        value = _CONSTRUCTOR.construct_object(node)
        if not quoted:
            self.check_coercion(node.value, tag, span)
        return YScalar(value, span, quoted)

    def check_coercion(self, text: str, tag: str, span: Span) -> None:
        digits = text.lstrip("+-")
        leading_zero = len(digits) > 1 and digits[0] == "0" and digits[1].isdigit()
        odd_number = bool(_SEXAGESIMAL.match(text)) or "_" in text
        surprising = (
            (tag == _BOOL and text.lower() not in _PLAIN_BOOLS)
            or (tag == _INT and (leading_zero or odd_number))
            or (tag == _FLOAT and odd_number)
        )
        if surprising:
            value = _CONSTRUCTOR.construct_scalar(yaml.ScalarNode(tag, text))
            shown = _CONSTRUCTOR.construct_object(yaml.ScalarNode(tag, value))
            self.reporter.report(
                "NOE003",
                f"unquoted '{text}' is read as {type(shown).__name__} {shown!r}",
                span,
                hint=f'write "{text}" to keep the text, or the literal you mean',
            )


def run(unit: CompilationUnit) -> None:
    unit.document = load(unit.source, unit.file, unit.reporter)
