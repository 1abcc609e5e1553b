"""The slow path: expressions outside the compiled subset, evaluated by jinja2.

`PlaybookSandbox` is jinja2's `ImmutableSandboxedEnvironment` with the compiled path's
refusals (`noetlc.expr.runtime`); a template is compiled once per process and cached.
Imported only by a program that has such expressions (it imports jinja2).
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from noetlc.expr import undefined

undefined.load()

from jinja2 import ChainableUndefined, Undefined, nodes  # noqa: E402
from jinja2.compiler import CodeGenerator, Frame  # noqa: E402
from jinja2.exceptions import SecurityError  # noqa: E402
from jinja2.runtime import LoopContext  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

from noetlc.expr import library, limits  # noqa: E402
from noetlc.expr.access import (  # noqa: E402
    MAPPING_METHODS,
    MISSING,
    REF_ATTRIBUTES,
    REF_KEY,
    RESOLVER_KEY,
    Evaluator,
    Resolver,
    Scope,
    call_method,
    reference_of,
)
from noetlc.expr.library import (  # noqa: E402
    BUILDING_FILTERS,
    FILTER_NAMES,
    FILTERS,
    GLOBALS,
    NONDETERMINISTIC_FILTERS,
)
from noetlc.expr.namespaces import BARE_NAME_ORDER  # noqa: E402

# The resolver of the scope being evaluated on the slow path (jinja2 calls `getattr` and
# `getitem` without the scope).
_SLOW_RESOLVER: contextvars.ContextVar[Resolver | None] = contextvars.ContextVar(
    "noetlc_slow_resolver", default=None
)


class _BoundedCodeGenerator(CodeGenerator):
    """jinja2's code generator with `~` size-checked like the compiled path's (jinja2 joins
    the operands with its own `str_join`, out of the sandbox's reach)."""

    def visit_Call(self, node: nodes.Call, frame: Frame, forward_caller: bool = False) -> None:
        # `m.get(k)`: the method of the mapping even when it has a key `get`, as on the
        # compiled path (and in jinja2, where an attribute wins over a key)
        target = node.node
        if (
            isinstance(target, nodes.Getattr)
            and target.attr in MAPPING_METHODS
            and not node.kwargs
            and node.dyn_args is None
            and node.dyn_kwargs is None
        ):
            self.write("environment.call_method(")
            self.visit(target.node, frame)
            self.write(f", {target.attr!r}")
            self.signature(node, frame)
            self.write(")")
            return
        super().visit_Call(node, frame, forward_caller=forward_caller)

    def _output_child_to_const(self, node: nodes.Expr, frame: Frame, finalize: Any) -> str:
        # Printed values go through `finalize` at run time, constants too (`{{ false }}`):
        # a guard's value is what it printed (`_guard_value`), and `finalize` checks it.
        if not isinstance(node, nodes.TemplateData):
            raise nodes.Impossible()
        return str(super()._output_child_to_const(node, frame, finalize))

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat_values(")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(")")


class PlaybookSandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox with the compiled path's refusals.

    On top of jinja2's own rules: keys (not only attributes) starting with `_` are refused,
    methods are unreachable (`x.items()`, `'a'.upper()` are refused like in compiled code; a
    mapping's key wins over a method of the same name, so `data.items` is the key), `*`, `%`
    and `**` and the padding filters have the limits of `noetlc.expr.limits`, references
    resolve.
    """

    intercepted_binops = frozenset({"*", "%", "**", "+"})
    _BINOPS: ClassVar[dict[str, Callable[[Any, Any, Any], Any]]] = {
        "*": limits.multiply,
        "%": limits.modulo,
        "+": limits.add,
    }
    code_generator_class = _BoundedCodeGenerator
    # The text a template renders, `{% set %}` blocks and macros are joined by `concat`:
    # counted while a `{% for %}` produces it. `~` goes through `concat_values`.
    concat = staticmethod(limits.bounded_join)
    concat_values = staticmethod(limits.slow_concat)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            return limits.power(left, right)
        return self._BINOPS[operator](left, right, limits.slow_meter())

    def call_method(self, obj: Any, name: str, *args: Any) -> Any:
        """`m.get(k)`, `m.keys()`, ... (the generated code's call of a mapping method)."""
        resolver = _SLOW_RESOLVER.get()
        scope = None if resolver is None else {RESOLVER_KEY: resolver}
        return call_method(limits.slow_meter(), obj, name, args, scope)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if callable(value) and not isinstance(obj, LoopContext):
            return False  # no methods (`loop.cycle` aside): the same rule as compiled code
        return bool(super().is_safe_attribute(obj, attr, value))

    def wrap_str_format(self, value: Any) -> None:
        return None  # refused by is_safe_attribute instead

    def getattr(self, obj: Any, attribute: str) -> Any:
        if attribute in REF_ATTRIBUTES:
            return reference_of(obj, attribute)
        if attribute.startswith("_"):
            raise SecurityError(f"access to attribute {attribute!r} is not allowed")
        if type(obj) is dict:
            if attribute in obj:
                return obj[attribute]
            target = self._resolved(obj)
            if target is not MISSING:
                return self.getattr(target, attribute)
            if attribute == "data":
                return obj  # as `getattr_`: NoETL's `x.data` of a mapping without `data`
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(argument, str) and argument.startswith("_"):
            raise SecurityError(f"access to key {argument!r} is not allowed")
        if type(obj) is dict and argument not in obj:
            target = self._resolved(obj)
            if target is not MISSING:
                return self.getitem(target, argument)
        return super().getitem(obj, argument)

    @staticmethod
    def _resolved(obj: dict[Any, Any]) -> Any:
        resolver = _SLOW_RESOLVER.get()
        if resolver is None or REF_KEY not in obj:
            return MISSING
        return resolver(obj[REF_KEY])


@functools.lru_cache(maxsize=1)
def fallback_environment() -> PlaybookSandbox:
    """The slow path's environment: the same globals and filters as compiled code."""
    # `finalize` sees every `{{ value }}` a template prints, before jinja2's str()
    env = PlaybookSandbox(undefined=ChainableUndefined, finalize=_printed)
    # Only the whitelisted globals: no cycler/joiner/lipsum (jinja2's `range` is replaced by
    # ours, which has the same bound). `namespace` stays: `{% set %}` in loops needs it.
    for name in ("cycler", "joiner", "lipsum"):
        env.globals.pop(name, None)
    for name in NONDETERMINISTIC_FILTERS:  # refused at compile time too, with a hint
        env.filters.pop(name, None)
    env.globals.update(GLOBALS)
    library.fill()
    ours = ("bool", "join", "replace", "sum", "tojson", "string")  # ours, the size-checked
    for name in ours:
        env.filters[name] = FILTERS[name]
    env.filters.update(limits.bounded_filters(env.filters))
    # what they build is charged to the evaluation's meter (the others return an item)
    env.filters.update(
        limits.charged_filters(env.filters, skip=set(FILTER_NAMES - BUILDING_FILTERS))
    )
    return env


@functools.lru_cache(maxsize=4096)
def _fallback_compiled(text: str, mode: str) -> Any:
    env = fallback_environment()
    if mode == "expression":
        return env.compile_expression(text, undefined_to_none=False)
    return env.from_string(text)


def _flatten(s: Scope) -> dict[str, Any]:
    """The variables a Jinja template sees: bare names resolve like `lookup_name`."""
    flat: dict[str, Any] = {}
    for ns in reversed(BARE_NAME_ORDER):
        space = s.get(ns)
        if type(space) is dict:
            flat.update(space)
    flat.update(s)
    flat.pop(RESOLVER_KEY, None)
    return flat


# The values a guard's template printed (`_printed` appends them while a guard renders).
_PRINTED = threading.local()


def _printed(value: Any) -> Any:
    """jinja2's `finalize`: every `{{ value }}` a template prints passes here first."""
    limits.check_printable(value)
    printed = getattr(_PRINTED, "values", None)
    if printed is not None:
        printed.append(value)
    return value


def _guard_value(text: str, printed: list[Any]) -> Any:
    """A guard rendered on the slow path is true or false as the fast path judges it: when
    the text is one printed value (blocks that print nothing around it), that value itself —
    so `{% if true %}{% endif %}{{ false }}` is false, not the truthy text "False" —
    else the text (true unless empty, as for a text condition of the fast path)."""
    shown = [v for v in printed if not isinstance(v, Undefined) and str(v) != ""]
    if len(shown) == 1 and text.strip() == str(shown[0]).strip():
        return shown[0]
    if not shown and not text.strip():
        return printed[0] if printed else text  # an undefined value, or nothing at all
    return text


def _slow(text: str, mode: str, guard: bool = False) -> Evaluator:
    def evaluate(s: Scope) -> Any:
        compiled = _fallback_compiled(text, mode)
        token = _SLOW_RESOLVER.set(s.get(RESOLVER_KEY))
        variables = _flatten(s)
        limits.begin_slow()
        try:
            if mode == "expression":
                value = limits.StepBudget().run(lambda: compiled(**variables))
                # its value goes to the log as JSON: bounded like printed text
                return limits.check_printable(value)
            if not guard:
                return limits.StepBudget().run(lambda: compiled.render(**variables))
            printed: list[Any] = []
            _PRINTED.values = printed
            try:
                rendered = limits.StepBudget().run(lambda: compiled.render(**variables))
            finally:
                _PRINTED.values = None
            return _guard_value(rendered, printed)
        finally:
            limits.end_slow()
            _SLOW_RESOLVER.reset(token)

    return evaluate


def slow_expression(text: str) -> Evaluator:
    return _slow(text, "expression")


def slow_template(text: str, guard: bool = False) -> Evaluator:
    return _slow(text, "template", guard)
