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
validators (custom code) or a construct the generator does not translate is `None` in the
table: it never fits, pydantic always decides.

Type codes (nested tuples, so a table is a literal the interpreter loads from the `.pyc`):
`("any",)`, `("str",)`, `("int",)`, `("float",)`, `("bool",)`, `("none",)`,
`("lit", values)`, `("list", item)`, `("dict", value)`, `("union", members)`,
`("model", name)`, `("ge", bound, code)`. A model is `(closed, {key: field index},
((code, required), ...))` or None.
"""

from __future__ import annotations

from typing import Any

Code = tuple[Any, ...]
Model = tuple[bool, dict[str, int], tuple[tuple[Code, bool], ...]] | None
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
    closed, keys, fields = spec
    seen: set[int] = set()
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
        if not _fits(models, fields[index][0], item):
            return False
    return all(i in seen for i, (_, required) in enumerate(fields) if required)


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
