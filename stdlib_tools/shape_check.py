"""A pydantic-free test of "this data validates": the fast path in front of pydantic models.

Importing pydantic and building its models costs more than checking a small playbook. Valid
input is the common case and needs no error message, so the compiler first asks `fits`, over
a table generated from the models (`scripts/gen_shape_tables.py` writes
`compiler/surface/shape_table.py` for the surface models and `stdlib_tools/args_table.py` for
the tool arguments; a test fails when they are stale). Only when `fits` says no are the
pydantic models imported, to produce the diagnostics exactly as before.

`fits` is sound, not complete: when it says True, pydantic accepts the data; when it says
False, pydantic decides (it may accept what `fits` refuses: an integer written as "5", a key
spelled by its field name...). So it checks a subset of pydantic's lax rules: exact JSON types
(`int` is not `bool`; a `float` field takes an `int`), literals by type and value, lists and
string-keyed dicts, unions as "any member fits", closed models refuse unknown keys, required
fields must be present, a field given under two spellings is refused. A model that has
validators (custom code) is `None` in the table — it never fits, pydantic always decides —
unless it declares what they require as `shape_rules` (below); so is a model with a construct
the generator does not translate.

`shape_rules` (a class attribute of a model, read by the generator) states what the model's
validators refuse in data whose fields fit their types: `("given", names)`, at least one of
the fields is given and not null; `("exclusive", names)`, at most one is. The validators may
refuse less (a before-validator that only normalizes), never more: the differential tests
(`tests/compiler/test_shape_tables.py`) hold them to it.

Type codes (nested tuples, so a table is a literal the interpreter loads from the `.pyc`):
`("any",)`, `("str",)`, `("int",)`, `("float",)`, `("bool",)`, `("none",)`,
`("lit", values)`, `("list", item)`, `("dict", value)`, `("union", members)`,
`("model", name)`, `("ge", bound, code)`. A model is `(extra, {key: field index}, fields,
((rule, field indices), ...))` or None, where `extra` is pydantic's setting (`forbid`: closed)
and each field is `(code, required, name, dump alias, default)`, the default being
`("=", literal)`, `("list",)` or `("dict",)` (None when required).

`build` goes one step further for the runtime: the validated value itself, as pydantic would
make it, for data that needs no conversion (`Args` objects for models, new lists and dicts,
every other value as given). It refuses (None) where pydantic would convert (an integer for a
`float`) or where a union would have to choose between two models; the caller then asks
pydantic. Tool executors that read their arguments only through attributes, `model_dump` and
`model_extra` can take `Args` objects (`ToolKind.plain_args`), so a run need not import pydantic.
"""

from __future__ import annotations

from typing import Any

Code = tuple[Any, ...]
Field = tuple[Code, bool, str, str, Any]
Model = (
    tuple[str, dict[str, int], tuple[Field, ...], tuple[tuple[str, tuple[int, ...]], ...]] | None
)
Models = dict[str, Model]


def fits(models: Models, name: str, value: Any) -> bool:
    """Does `value` validate against the model `name` of `models`? (True: pydantic agrees;
    False: ask pydantic.) Deeply nested data that exhausts the stack is a False."""
    try:
        return _model(models, name, value)
    except RecursionError:
        return False


def _model(models: Models, name: str, value: Any) -> bool:
    spec = models.get(name)
    if spec is None or type(value) is not dict:
        return False
    extra, keys, fields, rules = spec
    closed = extra == "forbid"
    seen: set[int] = set()
    given: set[int] = set()  # fields given with a value that is not null
    for key, item in value.items():
        if type(key) is not str:
            return False
        index = keys.get(key)
        if index is None:
            if closed:
                return False
            continue  # an extra key of an open model: any value
        if index in seen:
            return False  # two spellings of one field
        seen.add(index)
        if item is not None:
            given.add(index)
        if not _fits(models, fields[index][0], item):
            return False
    if not all(i in seen for i, field in enumerate(fields) if field[1]):
        return False
    for rule, indices in rules:
        count = sum(i in given for i in indices)
        if rule == "given":
            if count == 0:
                return False
        elif rule != "exclusive" or count > 1:
            return False  # broken, or a rule this version does not know: pydantic decides
    return True


def _fits(models: Models, code: Code, value: Any) -> bool:
    tag = code[0]
    if tag == "any":
        return True
    if tag == "str":
        return type(value) is str
    if tag == "none":
        return value is None
    if tag == "int":
        return type(value) is int
    if tag == "float":
        return type(value) is float or type(value) is int
    if tag == "bool":
        return type(value) is bool
    if tag == "union":
        return any(_fits(models, member, value) for member in code[1])
    if tag == "lit":
        return any(type(value) is type(choice) and value == choice for choice in code[1])
    if tag == "list":
        return type(value) is list and all(_fits(models, code[1], item) for item in value)
    if tag == "dict":
        return type(value) is dict and all(
            type(k) is str and _fits(models, code[1], v) for k, v in value.items()
        )
    if tag == "model":
        return _model(models, code[1], value)
    if tag == "ge":
        return _fits(models, code[2], value) and value >= code[1]
    return False  # a code this version does not know: pydantic decides


# --------------------------------------------------------------------------- building values


class _Refused(Exception):
    """`build` cannot make what pydantic would: pydantic decides."""


class Args:
    """A validated model as plain attributes (what `build` makes), with the part of pydantic's
    model interface the tool executors use: `model_dump(by_alias=, exclude_none=)` and
    `model_extra`."""

    __slots__ = ("__dict__", "_aliases", "_extra", "_model")
    _aliases: dict[str, str]
    _extra: dict[str, Any] | None
    _model: str

    def __init__(
        self, model: str, values: dict[str, Any], aliases: dict[str, str], extra: Any
    ) -> None:
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_aliases", aliases)
        object.__setattr__(self, "_extra", extra)
        self.__dict__.update(values)

    @property
    def model_extra(self) -> dict[str, Any] | None:
        return self._extra

    def model_dump(self, *, by_alias: bool = False, exclude_none: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if exclude_none and value is None:
                continue
            out[self._aliases[name] if by_alias else name] = _dump(value, by_alias, exclude_none)
        for name, value in (self._extra or {}).items():
            if not (exclude_none and value is None):
                out[name] = _dump(value, by_alias, exclude_none)
        return out

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Args)
            and self._model == other._model
            and self.__dict__ == other.__dict__
            and self._extra == other._extra
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{self._model}({shown})"


def _dump(value: Any, by_alias: bool, exclude_none: bool) -> Any:
    if isinstance(value, Args):
        return value.model_dump(by_alias=by_alias, exclude_none=exclude_none)
    if type(value) is list:
        return [_dump(v, by_alias, exclude_none) for v in value]
    if type(value) is dict:
        return {k: _dump(v, by_alias, exclude_none) for k, v in value.items()}
    return value


def build(models: Models, name: str, value: Any) -> Args | None:
    """The validated value of model `name` as an `Args` object, or None (it does not fit, or
    pydantic would convert something: ask pydantic)."""
    if not fits(models, name, value):
        return None
    try:
        return _build_model(models, name, value)
    except (_Refused, RecursionError):
        return None


def _build_model(models: Models, name: str, value: dict[str, Any]) -> Args:
    spec = models[name]
    assert spec is not None  # `fits` said yes
    extra_mode, keys, fields, _ = spec
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, item in value.items():
        index = keys.get(key)
        if index is None:
            if extra_mode == "allow":
                extra[key] = item
            continue
        values[fields[index][2]] = _build(models, fields[index][0], item)
    out: dict[str, Any] = {}
    for _code, _required, field, _alias, default in fields:
        if field in values:
            out[field] = values[field]
        elif default[0] == "=":
            out[field] = default[1]
        else:
            out[field] = [] if default[0] == "list" else {}
    aliases = {field[2]: field[3] for field in fields}
    return Args(name, out, aliases, extra if extra_mode == "allow" else None)


def _build(models: Models, code: Code, value: Any) -> Any:
    tag = code[0]
    if tag == "float":
        if type(value) is not float:
            raise _Refused  # pydantic makes a float of it
        return value
    if tag == "list":
        return [_build(models, code[1], item) for item in value]
    if tag == "dict":
        return {k: _build(models, code[1], v) for k, v in value.items()}
    if tag == "model":
        return _build_model(models, code[1], value)
    if tag == "ge":
        return _build(models, code[2], value)
    if tag == "union":
        matching = [m for m in code[1] if _fits(models, m, value)]
        if sum(m[0] in ("model", "union") for m in matching) > 1:
            raise _Refused  # pydantic's choice between two shapes: not guessed here
        return _build(models, matching[0], value)
    return value  # any, str, int, bool, none, lit: the value itself
