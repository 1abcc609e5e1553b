// What the graph draws of a large playbook: up to FULL steps at most DEPTH ranks deep as
// they are (the layout recurses along paths: deeper graphs overflow a worker's stack). Past
// that, chains (one way in, one way out) are cut into segments of `segment` steps, each one
// node, so the drawing is about DEPTH / 2 ranks deep; past DRAWN nodes the rest is left out
// (counted). Pure functions: the graph view uses them.
export const FULL = 1500;
export const DEPTH = 200;
export const DRAWN = 1500;

export function collapse(steps, edges) {
  const names = steps.map((s) => s.name);
  const outs = new Map(names.map((n) => [n, []]));
  const ins = new Map(names.map((n) => [n, []]));
  for (const e of edges) {
    if (outs.has(e.source) && ins.has(e.target) && e.source !== e.target) {
      outs.get(e.source).push(e.target);
      ins.get(e.target).push(e.source);
    }
  }
  const deep = depth(names, outs, ins);
  if (names.length <= FULL && deep <= DEPTH) {
    return { nodes: steps.map((s) => ({ id: s.name, members: [s.name], step: s })), edges, hidden: 0 };
  }
  const segment = Math.max(3, Math.ceil(deep / (DEPTH / 2)));
  // a link a -> b is inside a chain when a has one way out and b one way in
  const linked = (a, b) => outs.get(a).length === 1 && ins.get(b).length === 1 && a !== b;
  const groupOf = new Map();
  const groups = [];
  const byName = new Map(steps.map((s) => [s.name, s]));
  for (const name of names) {
    if (groupOf.has(name)) continue;
    const preds = ins.get(name);
    if (preds.length === 1 && linked(preds[0], name) && !groupOf.has(preds[0])) continue; // not a head
    const members = [name];
    groupOf.set(name, groups.length);
    let at = name;
    while (outs.get(at).length === 1 && linked(at, outs.get(at)[0]) && !groupOf.has(outs.get(at)[0])) {
      at = outs.get(at)[0];
      members.push(at);
      groupOf.set(at, groups.length);
    }
    for (let i = 0; i < members.length; i += segment) {
      const part = members.slice(i, i + segment);
      part.forEach((m) => groupOf.set(m, groups.length));
      groups.push(part);
    }
  }
  for (const name of names) if (!groupOf.has(name)) { groupOf.set(name, groups.length); groups.push([name]); }
  const nodes = [];
  const idOf = new Map();
  groups.forEach((members, i) => {
    const id = members.length >= 3 ? `chain:${members[0]}` : null;
    if (id) {
      nodes.push({ id, members, step: null });
      members.forEach((m) => idOf.set(m, id));
    } else {
      for (const m of members) { nodes.push({ id: m, members: [m], step: byName.get(m) }); idOf.set(m, m); }
    }
  });
  const kept = nodes.slice(0, DRAWN);
  const keptIds = new Set(kept.map((n) => n.id));
  const seen = new Set();
  const merged = [];
  for (const e of edges) {
    const v = idOf.get(e.source), w = idOf.get(e.target);
    if (!v || !w || v === w || !keptIds.has(v) || !keptIds.has(w)) continue;
    const key = v + "\u0000" + w;
    if (!seen.has(key)) { seen.add(key); merged.push({ source: v, target: w, style: e.style, guard: e.guard }); }
  }
  return { nodes: kept, edges: merged, hidden: nodes.length - kept.length };
}

// Ranks from the entry steps (breadth first, so cycles end): how deep the layout recurses.
function depth(names, outs, ins) {
  const level = new Map();
  let queue = names.filter((n) => ins.get(n).length === 0);
  if (!queue.length && names.length) queue = [names[0]];
  queue.forEach((n) => level.set(n, 0));
  let deepest = 0;
  for (let i = 0; i < queue.length; i++) {
    const at = queue[i];
    for (const next of outs.get(at)) {
      if (!level.has(next)) {
        level.set(next, level.get(at) + 1);
        deepest = Math.max(deepest, level.get(next));
        queue.push(next);
      }
    }
  }
  return deepest;
}

// A collapsed node's state from its members': failed, else running, else scheduled, else
// done when all are, else pending.
export function groupState(states) {
  for (const s of ["failed", "running", "scheduled", "cancelled"]) if (states.includes(s)) return s;
  if (states.length && states.every((s) => s === "done" || s === "skipped")) return "done";
  return "pending";
}
