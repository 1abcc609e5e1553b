"""The Petri net of a playbook as PNML (ISO/IEC 15909-2), for Petri-net tools.

`noetlc graph FILE --format pnml` writes a place/transition net: every place of the IR (the
entry step's entry place marked with one token), every transition with its input and output
arcs (weight 1). What a P/T net cannot say rides in a `toolspecific` element per transition
(`tool="noetlc"`): its kind, step, the boundary events it reacts to and the source of its
guard. Guards are not part of the P/T semantics: a tool that reads plain PNML treats every
decision as a free choice (as lint's abstraction does), and sees dead-path elimination only
where the net has `dead` transitions. Ids are `p<n>` / `t<n>` (XML ids); names keep the IR's.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from noetlc.ir.net import Net

NS = "http://www.pnml.org/version-2009/grammar/pnml"
PTNET = "http://www.pnml.org/version-2009/grammar/ptnet"


def to_pnml(net: Net, guard_source: list[str] | None = None) -> str:
    place_id = {p.id: f"p{i}" for i, p in enumerate(net.places)}
    entry = f"{net.entry_step}.entry"
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<pnml xmlns="{NS}">',
        f'  <net id={quoteattr(_xml_id(net.name))} type="{PTNET}">',
        f"    <name><text>{escape(net.name)}</text></name>",
        '    <page id="page0">',
    ]
    for p in net.places:
        out.append(f'      <place id="{place_id[p.id]}">')
        out.append(f"        <name><text>{escape(p.id)}</text></name>")
        if p.id == entry:
            out.append("        <initialMarking><text>1</text></initialMarking>")
        out.append("      </place>")
    arcs: list[str] = []
    for i, t in enumerate(net.transitions):
        tid = f"t{i}"
        out.append(f'      <transition id="{tid}">')
        out.append(f"        <name><text>{escape(t.id)}</text></name>")
        out.append('        <toolspecific tool="noetlc" version="1">')
        out.append(f"          <kind>{escape(t.kind)}</kind>")
        if t.step is not None:
            out.append(f"          <step>{escape(t.step)}</step>")
        for event in t.events:
            out.append(f"          <event>{escape(event)}</event>")
        if guard_source is not None and t.guard.expr is not None:
            out.append(f"          <guard>{escape(guard_source[t.guard.expr])}</guard>")
        for n in t.guard.negated:
            if guard_source is not None:
                out.append(f"          <unless>{escape(guard_source[n])}</unless>")
        if t.guard.earlier:
            out.append(f"          <unlessEarlier>{t.guard.earlier}</unlessEarlier>")
        out.append("        </toolspecific>")
        out.append("      </transition>")
        for place in t.consume:
            arcs.append(f'      <arc id="a{len(arcs)}" source="{place_id[place]}" target="{tid}"/>')
        for place in t.produce:
            arcs.append(f'      <arc id="a{len(arcs)}" source="{tid}" target="{place_id[place]}"/>')
    out.extend(arcs)
    out += ["    </page>", "  </net>", "</pnml>"]
    return "\n".join(out) + "\n"


def _xml_id(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-." else "_" for c in name)
    return cleaned if cleaned[:1].isalpha() or cleaned[:1] == "_" else f"n_{cleaned}"
