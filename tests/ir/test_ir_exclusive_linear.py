"""An exclusive router of n guarded arcs compiles to O(n) guard data, not O(n²).

Each arc negates the earlier arcs by rank into its decision's guard list (`Guard.earlier`,
a transition record's `earlier`) instead of copying their guards; counting what the net, the text form and
the bytecode hold for n = 100 and n = 1,000 shows linear growth (~10×; copying the negations
grew ~100×). No timing involved. Old `.nbc` files (format 1 spelled every negation out) get
the version-mismatch error."""

from __future__ import annotations

import pytest

from noetlc import FORMAT_VERSION
from noetlc.compiler.pipeline import compile_source
from noetlc.ir import nbc
from noetlc.ir.net import Net, decision_guards, dump, negations, verify
from noetlc.ir.net_text import parse

# a transition record: [id, kind, step, target, on, guards, earlier, ...]
GUARDS, EARLIER = 5, 6


def _router(n: int) -> str:
    arcs = "".join(
        f'        - step: s{i}\n          when: "{{{{ workload.k == {i} }}}}"\n' for i in range(n)
    )
    steps = "".join(f"  - step: s{i}\n    tool: {{kind: noop}}\n" for i in range(n))
    return f"""\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {{name: router_{n}, path: t/router_{n}}}
workload: {{k: 0}}
workflow:
  - step: start
    tool: {{kind: noop}}
    next:
      spec: {{mode: exclusive}}
      arcs:
{arcs}{steps}"""


def _sizes(n: int) -> dict[str, int]:
    unit = compile_source(_router(n), "router.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    net: Net = unit.net
    payload = unit.payload
    guard_entries = sum(
        (t.guard.expr is not None) + len(t.guard.negated) + (t.guard.earlier > 0)
        for t in net.transitions
    ) + sum(len(d.guards) for d in net.decisions)
    instructions = sum(
        len(record[GUARDS]) + (record[EARLIER] > 0) for record in payload["control"]
    ) + sum(len(guards) for _place, guards in payload["decisions"])
    return {
        "net guard entries": guard_entries,
        "bytecode guard entries": instructions,
        "text form characters": len(dump(net)),
        "bytecode bytes": len(unit.nbc),
    }


def test_guard_data_grows_linearly_with_the_arcs() -> None:
    small, large = _sizes(100), _sizes(1_000)
    for what, size in small.items():
        growth = large[what] / size
        assert growth < 13, f"{what}: {size} -> {large[what]} ({growth:.1f}× for 10× the arcs)"


def test_the_negations_spelled_out_are_every_earlier_arcs_guard() -> None:
    net: Net = compile_source(_router(30), "router.yaml").net
    assert verify(net) == []
    tables = decision_guards(net)
    routes = [t for t in net.transitions if t.kind == "route"]
    guards = [t.guard.expr for t in routes]
    for i, t in enumerate(routes):
        assert negations(t, tables) == tuple(guards[:i])
    [end] = [t for t in net.transitions if t.kind == "end" and t.consume == ("start.done",)]
    assert negations(end, tables) == tuple(guards)
    assert parse(dump(net)) == net


def test_an_old_format_file_gets_the_version_mismatch_error() -> None:
    unit = compile_source(_router(3), "router.yaml")
    old = nbc.encode(unit.payload, format_version=1, compiler_version="0.0.1", source_sha256="")
    with pytest.raises(nbc.BytecodeError) as err:
        nbc.decode(old, format_version=FORMAT_VERSION)
    assert err.value.code == "NOE703"
    assert f"bytecode format 1 is not supported (this noetl-vm reads format {FORMAT_VERSION})" in (
        str(err.value)
    )
    assert "recompile" in (err.value.hint or "")
