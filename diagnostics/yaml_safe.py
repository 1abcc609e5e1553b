"""The safe YAML rules of every file noetlc reads (playbooks, workloads, keychains).

YAML files are untrusted: a 600-byte file of nested aliases expands to gigabytes, an explicit
tag (`!!int abc`, `!!python/object`) can fail or construct anything, a file may not be UTF-8.
The rules, shared by the playbook loader (`noetlc.compiler.passes.load`, which builds located
nodes) and by `load_data` here (plain values, for `--workload` and `--keychain` files):

* text must be UTF-8 (NOE004, at the line and column of the first bad byte);
* only mappings, sequences and the scalars of YAML 1.1's core schema (str, int, float, bool,
  null; timestamps stay text); any other tag is NOE006, and a scalar that its explicit tag
  cannot read (`!!int abc`) is NOE006 at that scalar;
* an alias re-uses its anchor's value, and the expanded size of the whole document (every
  node, counting an alias as the size of what it names) is at most `MAX_NODES` (NOE007 at the
  alias that went over); a recursive alias (`a: &a [*a]`) is NOE006;
* integers of more than `MAX_INT_DIGITS` digits are NOE006 (Python refuses to read them);
* an explicit `!!timestamp` must be a timestamp (`!!timestamp hello` is NOE006; timestamps,
  explicit or implicit, stay text).

Errors are `YamlError`s (a `UserError`: a stable code, `file:line:column`, a hint).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from noetlc.diagnostics.errors import UserError

MAX_NODES = 1_000_000  # nodes of one document after alias expansion
MAX_INT_DIGITS = 4_300  # the longest integer Python reads from text
# The integers a compiled program can hold (msgpack: int64 and uint64).
INT_MIN, INT_MAX = -(2**63), 2**64 - 1

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
MERGE = "tag:yaml.org,2002:merge"
TIMESTAMP = "tag:yaml.org,2002:timestamp"
SEQ = "tag:yaml.org,2002:seq"
MAP = "tag:yaml.org,2002:map"
SCALAR_TAGS = frozenset({STR, INT, FLOAT, BOOL, NULL, TIMESTAMP, MERGE})

_CONSTRUCTOR = yaml.SafeLoader("")  # only its scalar constructors are used
_CONSTRUCTORS = {tag: yaml.SafeLoader.yaml_constructors[tag] for tag in (INT, FLOAT, BOOL, NULL)}
_IMPLICIT: dict[Any, list[tuple[str, Any]]] = yaml.resolver.Resolver.yaml_implicit_resolvers


class YamlError(UserError):
    """A YAML file breaks one of the rules of this module; located at `file:line:column`."""

    def __init__(
        self, code: str, file: str, line: int, column: int, message: str, hint: str | None = None
    ) -> None:
        self.file, self.line, self.column, self.problem = file, line, column, message
        super().__init__(code, f"{file}:{line}:{column}: {message}", hint)


class ScalarError(ValueError):
    """A scalar its (explicit or implicit) tag cannot read; the caller locates it."""


def construct_scalar(tag: str, text: str) -> Any:
    """The value of a plain or tagged scalar under the core schema (timestamps stay text)."""
    if tag == STR or tag in (TIMESTAMP, MERGE):
        return text
    if tag not in _CONSTRUCTORS:
        raise ScalarError(f"unsupported YAML tag {tag}")
    if tag == INT and sum(c.isdigit() for c in text) > MAX_INT_DIGITS:
        raise ScalarError(f"an integer of more than {MAX_INT_DIGITS:,} digits")
    try:
        return _CONSTRUCTORS[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, text))
    except (ValueError, TypeError, LookupError, yaml.YAMLError):  # `!!bool abc`: a KeyError
        name = tag.rsplit(":", 1)[-1]
        raise ScalarError(f"{text!r} is not a valid !!{name}") from None


def check_timestamp(text: str) -> None:
    """A timestamp stays text, but an explicit `!!timestamp` must be one (`!!timestamp hello`
    is refused like `!!int abc`; a round-trip reader such as `migrate`'s constructs it)."""
    try:
        yaml.SafeLoader.construct_yaml_timestamp(_CONSTRUCTOR, yaml.ScalarNode(TIMESTAMP, text))
    except (ValueError, TypeError, LookupError, AttributeError, yaml.YAMLError):
        raise ScalarError(f"{text!r} is not a valid !!timestamp") from None


def resolve_tag(tag: str | None, implicit: bool, text: str) -> str:
    """The tag of a scalar event: its explicit tag, else YAML 1.1 implicit resolution."""
    if tag is not None and tag != "!":
        return tag
    if not implicit:
        return STR
    for candidate, regexp in _IMPLICIT.get(text[0] if text else "", []) + _IMPLICIT.get(None, []):
        if regexp.match(text):
            return str(candidate)
    return STR


def decode(data: bytes, file: str) -> str:
    """UTF-8 text (a BOM is dropped), or NOE004 at the first byte that is not."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        raise YamlError(
            "NOE004",
            file,
            line,
            column,
            f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x})",
            "save the file as UTF-8",
        ) from None


def read_data_file(path: str | Path, what: str) -> Any:
    """A YAML/JSON data file (`what`: "workload file", "keychain file") as plain values."""
    file = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise YamlError(
            "NOE004", file, 1, 1, f"cannot read the {what}: {exc.strerror}", "check the path"
        ) from None
    return load_data(decode(data, file), file)


def load_data(text: str, file: str) -> Any:
    """One YAML document as plain values under the rules of this module."""
    try:
        parser = yaml.CSafeLoader(text) if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader(text)
        try:
            return _Builder(parser, file).document()
        finally:
            parser.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        raise YamlError("NOE001", file, line, column, f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as exc:  # reader errors (control characters)
        raise YamlError("NOE001", file, 1, 1, f"YAML error: {exc}") from None
    except RecursionError:
        raise YamlError("NOE001", file, 1, 1, "YAML nesting is too deep") from None


class _Builder:
    """Parser events -> plain values, with the alias budget."""

    def __init__(self, parser: Any, file: str) -> None:
        self.next_event = parser.get_event
        self.file = file
        self.anchors: dict[str, tuple[Any, int]] = {}  # value, expanded size
        self.open: set[str] = set()
        self.nodes = 0

    def fail(self, code: str, event: Any, message: str, hint: str | None = None) -> YamlError:
        mark = event.start_mark
        return YamlError(code, self.file, mark.line + 1, mark.column + 1, message, hint)

    def document(self) -> Any:
        self.next_event()  # stream start
        start = self.next_event()
        if isinstance(start, yaml.StreamEndEvent):
            return None
        value = self.node(self.next_event())
        self.next_event()  # document end
        extra = self.next_event()
        if not isinstance(extra, yaml.StreamEndEvent):
            raise self.fail("NOE006", extra, "the file must contain exactly one YAML document")
        return value

    def count(self, size: int, event: Any) -> None:
        self.nodes += size
        if self.nodes > MAX_NODES:
            raise self.fail(
                "NOE007",
                event,
                f"YAML aliases expand the document past {MAX_NODES:,} nodes",
                "write the data out, or reference it instead of repeating it with aliases",
            )

    def node(self, event: Any) -> Any:
        if isinstance(event, yaml.AliasEvent):
            name = str(event.anchor)
            if name in self.open:
                raise self.fail("NOE006", event, f"recursive YAML alias *{name}")
            found = self.anchors.get(name)
            if found is None:
                raise self.fail(
                    "NOE001", event, f"YAML syntax error: undefined alias *{event.anchor}"
                )
            self.count(found[1], event)
            return found[0]
        before = self.nodes
        self.count(1, event)
        anchor = event.anchor
        if isinstance(event, yaml.ScalarEvent):
            tag = resolve_tag(event.tag, event.implicit[0], event.value)
            try:
                if tag == TIMESTAMP and event.tag is not None:
                    check_timestamp(event.value)
                value: Any = construct_scalar(tag, event.value)
            except ScalarError as exc:
                raise self.fail("NOE006", event, str(exc)) from None
        else:
            if anchor is not None:
                self.open.add(anchor)
            if isinstance(event, yaml.SequenceStartEvent):
                self.check_tag(event, SEQ)
                value = self.sequence()
            else:
                self.check_tag(event, MAP)
                value = self.mapping()
            if anchor is not None:
                self.open.discard(anchor)
        if anchor is not None:
            self.anchors[anchor] = (value, self.nodes - before)
        return value

    def check_tag(self, event: Any, expected: str) -> None:
        if event.tag is not None and event.tag != "!" and event.tag != expected:
            raise self.fail("NOE006", event, f"unsupported YAML tag {event.tag}")

    def sequence(self) -> list[Any]:
        items: list[Any] = []
        event = self.next_event()
        while not isinstance(event, yaml.SequenceEndEvent):
            items.append(self.node(event))
            event = self.next_event()
        return items

    def mapping(self) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        merged: dict[Any, Any] = {}
        event = self.next_event()
        while not isinstance(event, yaml.MappingEndEvent):
            if not isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
                raise self.fail("NOE006", event, "mapping keys must be scalars")
            is_merge = (
                isinstance(event, yaml.ScalarEvent)
                and resolve_tag(event.tag, event.implicit[0], event.value) == MERGE
            )
            key = self.node(event)
            value_event = self.next_event()
            value = self.node(value_event)
            if is_merge:
                sources = value if isinstance(value, list) else [value]
                for source in sources:
                    if not isinstance(source, dict):
                        raise self.fail("NOE006", value_event, "a merge key (<<) needs a mapping")
                    merged.update({k: v for k, v in source.items() if k not in merged})
            elif isinstance(key, dict | list):
                raise self.fail("NOE006", event, "mapping keys must be scalars")
            else:
                out[key] = value
            event = self.next_event()
        for k, v in merged.items():
            out.setdefault(k, v)
        return out
