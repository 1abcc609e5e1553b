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
`("model", name)`, `("ge", bound, code)`. A model is `(closed, {key: field index},
((code, required), ...), ((rule, field indices), ...))` or None.
"""

from __future__ import annotations

from typing import Any

Code = tuple[Any, ...]
Model = (
    tuple[
        bool, dict[str, int], tuple[tuple[Code, bool], ...], tuple[tuple[str, tuple[int, ...]], ...]
    ]
    | None
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
    closed, keys, fields, rules = spec
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
    if not all(i in seen for i, (_, required) in enumerate(fields) if required):
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
