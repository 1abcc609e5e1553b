"""Pass `load`: YAML text -> located `YMap` (the playbook document).

Builds located nodes straight from PyYAML's event stream (the C parser when available), so
every node keeps its line and column and the text is visited once: no intermediate yaml node
tree, no per-node resolver callbacks. Duplicate keys are reported with both locations, and
unquoted scalars that YAML 1.1 silently coerces (`on`, `no`, `010`, `1:30`) get a warning.
An alias reuses the (immutable) node its anchor built, so aliased data costs nothing extra.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter, Span
from noetlc.diagnostics.yaml_safe import (
    INT_MAX,
    INT_MIN,
    MAX_NODES,
    ScalarError,
    check_timestamp,
    construct_scalar,
)

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MERGE = "tag:yaml.org,2002:merge"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_KNOWN_SCALAR_TAGS = {_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP, _MERGE}

_PLAIN_BOOLS = {"true", "false"}
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$")
_CONSTRUCTOR = yaml.SafeLoader("")  # only its scalar constructors are used
# YAML 1.1 implicit resolution of plain scalars (first character -> candidate tags).
_IMPLICIT: dict[Any, list[tuple[str, re.Pattern[str]]]] = (
    yaml.resolver.Resolver.yaml_implicit_resolvers
)

_ScalarEvent = yaml.ScalarEvent
_MappingStart = yaml.MappingStartEvent
_SequenceStart = yaml.SequenceStartEvent
_AliasEvent = yaml.AliasEvent
_MappingEnd = yaml.MappingEndEvent
_SequenceEnd = yaml.SequenceEndEvent


class _PyParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """PyYAML's pure-Python event parser (used when the C extension is missing)."""

    def __init__(self, text: str) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)

    def dispose(self) -> None:
        return None


try:  # the C parser is ~10x faster; the events are the same
    from yaml._yaml import CParser as _Parser
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    _Parser = _PyParser  # type: ignore[misc, assignment]


_new_tuple = tuple.__new__  # a Span without NamedTuple's Python-level __new__ (hot path)


class _Unusable(Exception):
    """The text composes into no document (reported by the raiser)."""


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
        # where the first byte that is not UTF-8 is, in the characters before it
        data = exc.object if isinstance(exc.object, bytes) else b""
        head = data[: exc.start].decode("utf-8", errors="replace")
        line, column = _position(head + "?", len(head))
        reporter.report(
            "NOE004",
            f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, column"
            f" {column} ({exc.reason})",
            Span.point(str(path), line, column),
            hint="save the file as UTF-8 (for example: iconv -f latin1 -t utf-8)",
        )
    except OSError as exc:
        reporter.report(
            "NOE004", f"cannot read {path}: {exc.strerror}", Span.point(str(path), 1, 1)
        )
    return None


def _position(text: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of the character at `index` of `text`."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _syntax_error(exc: yaml.MarkedYAMLError, file: str, reporter: Reporter) -> None:
    """NOE001 where the parser stopped, naming where the construct it was in began (an
    unclosed `[` or `{` is usually the cause, lines before the place it is noticed)."""
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark else 1
    column = mark.column + 1 if mark else 1
    problem = exc.problem or exc.context or "invalid YAML"
    related = []
    opened = exc.context_mark
    if (
        exc.context
        and opened is not None
        and (opened.line, opened.column)
        != (
            mark.line if mark else -1,
            mark.column if mark else -1,
        )
    ):
        where = f"line {opened.line + 1}, column {opened.column + 1}"
        problem = f"{problem} ({exc.context} that starts at {where})"
        related.append((exc.context, Span.point(file, opened.line + 1, opened.column + 1)))
    reporter.report(
        "NOE001", f"YAML syntax error: {problem}", Span.point(file, line, column), related=related
    )


def load(text: str, file: str, reporter: Reporter) -> YMap | None:
    """Compose `text` into located nodes; returns None when the document is unusable.

    Diagnostics about the content (duplicate keys, coercions) are only kept when the whole
    text parses: a syntax error is reported alone.
    """
    local = Reporter()
    try:
        parser = _Parser(text)
        try:
            node = _Composer(parser, file, local).document()
        finally:
            parser.dispose()
    except _Unusable:
        reporter.extend(d for d in local.diagnostics if d.is_error)
        return None
    except yaml.MarkedYAMLError as exc:
        _syntax_error(exc, file, reporter)
        return None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line, column = _position(text, exc.position)
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        reporter.report(
            "NOE001",
            f"YAML error: character U+{char:04X} is not allowed in YAML text",
            Span.point(file, line, column),
            hint="remove the character, or write it as an escape in a double-quoted string",
        )
        return None
    except yaml.YAMLError as exc:
        reporter.report("NOE001", f"YAML error: {exc}", Span.point(file, 1, 1))
        return None
    except RecursionError:
        reporter.report("NOE001", "YAML nesting is too deep", Span.point(file, 1, 1))
        return None
    reporter.extend(local.diagnostics)
    if not isinstance(node, YMap):
        reporter.report(
            "NOE005",
            "a playbook is a mapping of keys (apiVersion, kind, metadata, workflow), but this"
            f" file holds {_kind(node)}",
            node.span,
        )
        return None
    return node


def _kind(node: YNode) -> str:
    """What a document that is not a mapping holds, in words."""
    if isinstance(node, YMap):
        return "a mapping"
    if isinstance(node, YSeq):
        return "a list"
    value = node.value
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"only the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"only the number {value}"
    text = str(value)
    shown = text if len(text) <= 40 else text[:37] + "..."
    return f"only the text {shown!r}"


class _Composer:
    """Parser events -> located nodes, one visit per event (linear in the text's size)."""

    def __init__(self, parser: Any, file: str, reporter: Reporter) -> None:
        self.next_event = parser.get_event
        self.file = file
        self.reporter = reporter
        self.anchors: dict[str, tuple[YNode, str | None]] = {}  # node, raw text of a scalar
        self.open_anchors: set[str] = set()  # collections being built (recursive aliases)
        self.plain_tags: dict[str, str] = {}  # keys and values repeat across steps
        # The document's size with every alias expanded (an alias adds its anchor's size):
        # bounded by MAX_NODES, so later passes that turn nodes into values stay bounded.
        self.nodes = 0
        self.sizes: dict[str, int] = {}

    def span(self, event: Any) -> Span:
        start, end = event.start_mark, event.end_mark
        return _new_tuple(
            Span, (self.file, start.line + 1, start.column + 1, end.line + 1, end.column + 1)
        )

    def between(self, start: Any, end: Any) -> Span:
        """From the start of `start` to the end of `end` (a collection's two events)."""
        sm, em = start.start_mark, end.end_mark
        return _new_tuple(Span, (self.file, sm.line + 1, sm.column + 1, em.line + 1, em.column + 1))

    def document(self) -> YNode:
        self.next_event()  # stream start
        start = self.next_event()
        if isinstance(start, yaml.StreamEndEvent):
            self.reporter.report("NOE005", "the file is empty", Span.point(self.file, 1, 1))
            raise _Unusable
        root, _ = self.node(self.next_event())
        self.next_event()  # document end
        extra = self.next_event()
        if not isinstance(extra, yaml.StreamEndEvent):
            mark = extra.start_mark
            self.reporter.report(
                "NOE006",
                "a playbook file must contain exactly one YAML document",
                Span.point(self.file, mark.line + 1, mark.column + 1),
            )
            raise _Unusable
        return root

    def node(self, event: Any) -> tuple[YNode, str | None]:
        """The node `event` starts (consuming its events) and, for a scalar, its raw text."""
        kind = type(event)
        self.nodes += 1
        if kind is _ScalarEvent:
            scalar = self.scalar(event)
            if event.anchor is not None:
                self.define(event, (scalar, event.value))
                self.sizes[event.anchor] = 1
            return scalar, event.value
        if kind is _AliasEvent:
            self.nodes -= 1
            return self.alias(event)
        anchor = event.anchor
        before = self.nodes
        if anchor is not None:
            self.open_anchors.add(anchor)
        if kind is _MappingStart:
            self.check_tag(event, _MAP)
            built: YNode = self.mapping(event)
        else:
            self.check_tag(event, _SEQ)
            built = self.sequence(event)
        if anchor is not None:
            self.open_anchors.discard(anchor)
            self.define(event, (built, None))
            self.sizes[anchor] = self.nodes - before + 1
        return built, None

    def define(self, event: Any, value: tuple[YNode, str | None]) -> None:
        anchor = event.anchor
        if anchor in self.anchors:
            first = self.anchors[anchor][0].span
            self.reporter.report(
                "NOE001",
                f"YAML syntax error: duplicate anchor &{anchor} (first defined at line "
                f"{first.line})",
                self.span(event),
            )
            raise _Unusable
        self.anchors[anchor] = value

    def alias(self, event: Any) -> tuple[YNode, str | None]:
        anchor = event.anchor
        if anchor in self.open_anchors:
            self.reporter.report("NOE006", "recursive YAML alias", self.span(event))
            return YScalar(None, self.span(event)), None
        found = self.anchors.get(anchor)
        if found is None:
            self.reporter.report(
                "NOE001", f"YAML syntax error: found undefined alias *{anchor}", self.span(event)
            )
            raise _Unusable
        self.nodes += self.sizes[anchor]
        if self.nodes > MAX_NODES:
            self.reporter.report(
                "NOE007",
                f"YAML aliases expand the document past {MAX_NODES:,} nodes",
                self.span(event),
                hint="write the data out, or reference it instead of repeating it with aliases",
            )
            raise _Unusable
        return found

    def check_tag(self, event: Any, expected: str) -> None:
        tag = event.tag
        if tag is not None and tag != "!" and tag != expected:
            self.reporter.report("NOE006", f"unsupported YAML tag {tag}", self.span(event))

    def sequence(self, start: Any) -> YSeq:
        items: list[YNode] = []
        next_event, node = self.next_event, self.node
        event: Any = next_event()
        while type(event) is not _SequenceEnd:
            items.append(node(event)[0])
            event = next_event()
        span = self.between(start, event)
        return YSeq(tuple(items), span)

    def mapping(self, start: Any) -> YMap:
        # Duplicates are found with one dict: the position of each key in `items`.
        items: list[tuple[YScalar, YNode] | None] = []
        seen: dict[object, int] = {}
        merged: list[tuple[YScalar, YNode]] = []
        next_event, node = self.next_event, self.node
        event: Any = next_event()
        while type(event) is not _MappingEnd:
            key, text = node(event)
            if text == "<<" and type(event) is _ScalarEvent and self.tag_of(event) == _MERGE:
                merged.extend(self.merge_items(next_event()))
                event = next_event()
                continue
            value = node(next_event())[0]
            event = next_event()
            if not isinstance(key, YScalar) or text is None:
                self.reporter.report("NOE006", "mapping keys must be plain scalars", key.span)
                continue
            if not isinstance(key.value, str):
                # Playbook keys are names; `1: x` or `true: x` keys are kept as their text.
                key = YScalar(text, key.span, key.quoted)
            at = seen.get(key.value)
            if at is not None:
                first = items[at]
                assert first is not None
                self.reporter.report(
                    "NOE002",
                    f"duplicate key '{key.value}' (first defined at line {first[0].span.line})",
                    key.span,
                    related=[("first definition", first[0].span)],
                )
                # Keep the last one, like YAML loaders, so later passes see one value.
                items[at] = None
            seen[key.value] = len(items)
            items.append((key, value))
        kept = tuple([item for item in items if item is not None])
        # Merge keys (`<<: *base`) never override explicit keys.
        if merged:
            extra: list[tuple[YScalar, YNode]] = []
            for key, value in merged:
                if key.value not in seen:
                    seen[key.value] = -1
                    extra.append((key, value))
            kept = kept + tuple(extra)
        span = self.between(start, event)
        return YMap(kept, span)

    def merge_items(self, event: Any) -> list[tuple[YScalar, YNode]]:
        value = self.node(event)[0]
        sources = value.items if isinstance(value, YSeq) else (value,)
        out: list[tuple[YScalar, YNode]] = []
        for src in sources:
            if isinstance(src, YMap):
                out.extend(src.items)
            else:
                self.reporter.report("NOE006", "a merge key (<<) needs a mapping", src.span)
        return out

    def tag_of(self, event: Any) -> str:
        """The resolved tag of a scalar event (YAML 1.1 implicit resolution)."""
        tag = event.tag
        if tag is not None and tag != "!":
            return str(tag)
        if not event.implicit[0]:
            return _STR
        text = event.value
        found = self.plain_tags.get(text)
        if found is None:
            found = _STR
            for candidate, regexp in _IMPLICIT.get(text[0] if text else "", []) + _IMPLICIT.get(
                None, []
            ):
                if regexp.match(text):
                    found = candidate
                    break
            self.plain_tags[text] = found
        return found

    def scalar(self, event: Any) -> YScalar:
        sm, em = event.start_mark, event.end_mark
        span = _new_tuple(Span, (self.file, sm.line + 1, sm.column + 1, em.line + 1, em.column + 1))
        quoted = bool(event.style)  # None or "" is plain
        if event.tag is None:  # the common case, inlined: untagged text
            tag = self.plain_tags.get(event.value) if not quoted else _STR
            if tag is None:
                tag = self.tag_of(event)
        else:
            tag = self.tag_of(event)
        if tag == _STR:
            return YScalar(event.value, span, quoted)
        if tag not in _KNOWN_SCALAR_TAGS:
            self.reporter.report("NOE006", f"unsupported YAML tag {tag}", span)
            return YScalar(event.value, span, quoted)
        if tag in (_TIMESTAMP, _MERGE):
            # Timestamps stay text: playbook data must be JSON-compatible.
            if tag == _TIMESTAMP and event.tag is not None:
                try:
                    check_timestamp(event.value)
                except ScalarError as exc:  # `!!timestamp hello`
                    self.reporter.report("NOE006", str(exc), span)
            return YScalar(event.value, span, quoted)
        try:
            value = construct_scalar(tag, event.value)
        except ScalarError as exc:  # `!!int abc`, `!!bool abc`, an integer too long to read
            self.reporter.report("NOE006", str(exc), span)
            return YScalar(event.value, span, quoted)
        if type(value) is int and not INT_MIN <= value <= INT_MAX:
            # The bytecode (msgpack) holds 64-bit integers only; NoETL keeps such ids as text.
            self.reporter.report(
                "NOE006",
                f"the integer {event.value} does not fit in 64 bits (the bytecode stores "
                f"integers from {INT_MIN:,} to {INT_MAX:,})",
                span,
                hint="quote it to keep it as text",
            )
            return YScalar(event.value, span, quoted)
        if not quoted:
            self.check_coercion(event.value, tag, span)
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
