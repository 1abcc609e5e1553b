"""The one table of template namespaces; every list of names elsewhere is derived from it.

A template sees a scope: a dict whose root holds the namespaces below (each present or absent,
never required), every finished step or task bound by name to its result, and a few names the
legacy `case` forms provide. A bare name that is not at the root is looked up, in order, in
the namespaces with a `bare_order` (args -> ctx -> iter -> workload), so a legacy `{{ city }}`
finds the loop iterator.

Columns:

* `root` — always looked up directly at the scope root (the code generator emits a plain
  `s.get(name)` for it; other names go through the bare-name fallback);
* `reserved` — a step or task may not be named like it (it would shadow the namespace);
* `bare_order` — its rank in the bare-name fallback, or None.

`RUNTIME_NAMES` are names the VMs bind in some scopes without being namespaces of their own
(the legacy `case` rules' `result`, `response`, `error`, `this`; NoETL's `loop` of a loop
iteration, and the legacy `vars`): the linter counts them as defined. `loop_index` is defined
only inside a loop step (the expressions pass adds it there).
"""

from __future__ import annotations

from typing import NamedTuple


class Namespace(NamedTuple):
    name: str
    root: bool
    reserved: bool
    bare_order: int | None
    meaning: str


NAMESPACES: tuple[Namespace, ...] = (
    Namespace("workload", True, True, 3, "the playbook's workload merged with the request"),
    Namespace("ctx", True, True, 1, "execution-scoped values written by set_ctx"),
    Namespace("iter", True, True, 2, "the iteration's values: the iterator, index, set_iter"),
    Namespace("args", True, True, 0, "the token's arc inscription"),
    Namespace("event", True, True, None, "the boundary event an arc guard reacts to"),
    Namespace("outcome", True, True, None, "a task's outcome: status, result, error, meta"),
    Namespace("output", True, True, None, "an alias of outcome (output.data is the result)"),
    Namespace("_prev", True, False, None, "the previous task's result in a pipeline"),
    Namespace("_task", True, False, None, "the current task's name"),
    Namespace("_attempt", True, False, None, "the attempt number, 1 on the first try"),
    Namespace("keychain", True, True, None, "the credentials the playbook declares"),
    Namespace("execution_id", True, True, None, "the id of the running execution"),
    # NoETL hides a step named `job` behind its namespace instead of refusing the name
    Namespace("job", True, False, None, "NoETL's job: uuid, execution_id, id (the execution id)"),
    Namespace("vars", False, True, None, "legacy: the vars block, read as ctx"),
)

BY_NAME: dict[str, Namespace] = {n.name: n for n in NAMESPACES}

# Looked up directly at the scope root (no bare-name fallback).
ROOT_NAMESPACES: frozenset[str] = frozenset(n.name for n in NAMESPACES if n.root)

# A step or task may not be named like these, nor start with `_`.
RESERVED_NAMES: frozenset[str] = frozenset(n.name for n in NAMESPACES if n.reserved)

# Where a bare name is looked up after the scope root, in order.
BARE_NAME_ORDER: tuple[str, ...] = tuple(
    n.name
    for n in sorted(
        (n for n in NAMESPACES if n.bare_order is not None),
        key=lambda n: n.bare_order if n.bare_order is not None else 0,
    )
)

# Names some scope binds without being a namespace (see the module docstring).
RUNTIME_NAMES: frozenset[str] = frozenset({"result", "response", "error", "this", "loop", "vars"})


def is_reserved(name: str) -> bool:
    """May a step or task be named `name`? No if it shadows a namespace or starts with `_`."""
    return name in RESERVED_NAMES or name.startswith("_")
