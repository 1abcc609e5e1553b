// The step graph: laid out by dagre in a worker (layout-worker.js), drawn as SVG with pan
// (drag), zoom (wheel, buttons), fit and a minimap; each node coloured by its state, with loop
// progress on it; large playbooks are collapsed first (collapse.js).
import { esc } from "./api.js";
import { collapse, groupState } from "./collapse.js";

const W = 150, H = 40;
const MIN_READABLE = 0.45, READABLE = 0.8; // zoom levels: below the first, labels are unreadable
const SVG = "http://www.w3.org/2000/svg";

export function createGraph(box, graph, onSelect) {
  box.innerHTML = `<div class="graph-tools">
      <button type="button" data-act="fit" title="fit to the panel">Fit</button>
      <button type="button" data-act="in" title="zoom in">+</button>
      <button type="button" data-act="out" title="zoom out">−</button>
      <span class="muted" id="graph-note">laying out ${graph.steps.length} step(s)…</span></div>
    <div class="graph-frame"><svg id="graph" xmlns="${SVG}"></svg><svg id="minimap" xmlns="${SVG}"></svg></div>`;
  const svg = box.querySelector("#graph");
  const mini = box.querySelector("#minimap");
  const note = box.querySelector("#graph-note");
  const shape = collapse(graph.steps, graph.edges);
  const byStep = new Map(); // step -> its drawn node id
  for (const n of shape.nodes) for (const m of n.members) byStep.set(m, n.id);
  const nodeOf = new Map(shape.nodes.map((n) => [n.id, n]));
  const states = new Map(), labels = new Map(), els = new Map(), miniEls = new Map();
  const view = { x: 0, y: 0, k: 1, width: 1, height: 1 };
  const where = new Map(); // drawn node id -> its centre
  let viewport = null, miniView = null, selected = null;
  let follow = true; // until the user pans or zooms: keep what runs (or failed) in view

  const apply = () => {
    if (viewport) viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
    if (miniView) {
      const r = svg.getBoundingClientRect();
      miniView.setAttribute("x", -view.x / view.k);
      miniView.setAttribute("y", -view.y / view.k);
      miniView.setAttribute("width", r.width / view.k);
      miniView.setAttribute("height", r.height / view.k);
    }
    svg.dataset.zoom = view.k.toFixed(4);
    // zoomed out past reading: nodes drawn as thick borders of their state's colour
    svg.classList.toggle("far", view.k < MIN_READABLE);
  };
  const fit = () => {
    const r = svg.getBoundingClientRect();
    const k = Math.min(2, (r.width - 20) / view.width, (r.height - 20) / view.height);
    view.k = k > 0 ? k : 1;
    view.x = (r.width - view.width * view.k) / 2;
    view.y = (r.height - view.height * view.k) / 2;
    apply();
  };
  const zoom = (factor, cx, cy) => {
    const r = svg.getBoundingClientRect();
    const px = cx === undefined ? r.width / 2 : cx, py = cy === undefined ? r.height / 2 : cy;
    const k = Math.max(0.005, Math.min(4, view.k * factor));
    view.x = px - (px - view.x) * (k / view.k);
    view.y = py - (py - view.y) * (k / view.k);
    view.k = k;
    apply();
  };
  const center = (x, y) => {
    const r = svg.getBoundingClientRect();
    view.x = r.width / 2 - x * view.k;
    view.y = r.height / 2 - y * view.k;
    apply();
  };
  // A graph too large to read when fitted is shown at a readable zoom around `id`.
  const focus = (id) => {
    const at = where.get(id);
    if (!at) return;
    const r = svg.getBoundingClientRect();
    const inside = (px, py) => px > 10 && py > 10 && px < r.width - 10 && py < r.height - 10;
    if (inside(at.x * view.k + view.x, at.y * view.k + view.y) && view.k >= MIN_READABLE) return;
    if (view.k < MIN_READABLE) view.k = READABLE;
    center(at.x, at.y);
  };
  const first = () => {
    fit();
    if (view.k < MIN_READABLE && shape.nodes.length) {
      const entry = graph.steps.find((s) => s.entry) || graph.steps[0];
      const at = where.get(byStep.get(entry.name) || shape.nodes[0].id);
      view.k = READABLE;
      if (at) center(at.x + svg.getBoundingClientRect().width / 3 / view.k, at.y);
      else apply();
    }
  };
  box.querySelector(".graph-tools").addEventListener("click", (e) => {
    const act = e.target.dataset && e.target.dataset.act;
    if (act) follow = false;
    if (act === "fit") fit(); else if (act === "in") zoom(1.5); else if (act === "out") zoom(1 / 1.5);
  });
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    follow = false;
    const r = svg.getBoundingClientRect();
    zoom(e.deltaY < 0 ? 1.2 : 1 / 1.2, e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (e) => { drag = { x: e.clientX, y: e.clientY, moved: false }; });
  window.addEventListener("pointerup", () => { setTimeout(() => { drag = null; }, 0); });
  svg.addEventListener("pointermove", (e) => {
    if (!drag || !(e.buttons & 1)) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 2) drag.moved = true;
    drag.x = e.clientX; drag.y = e.clientY;
    follow = false;
    view.x += dx; view.y += dy;
    apply();
  });
  svg.addEventListener("click", (e) => {
    if (drag && drag.moved) return;
    const g = e.target.closest("g.node");
    if (g) onSelect(nodeOf.get(g.dataset.id).members, g.dataset.id);
  });
  mini.addEventListener("click", (e) => {
    const r = mini.getBoundingClientRect();
    const s = Math.max(view.width / r.width, view.height / r.height);
    center((e.clientX - r.left) * s, (e.clientY - r.top) * s);
  });

  const paint = (id) => {
    const node = nodeOf.get(id), g = els.get(id);
    if (!node || !g) return;
    const state = node.members.length > 1
      ? groupState(node.members.map((m) => states.get(m) || "pending"))
      : states.get(node.members[0]) || "pending";
    g.setAttribute("data-state", state);
    const kind = node.members.length > 1 ? " chain" : node.step && node.step.loop ? " loop" : "";
    g.setAttribute("class", `node${kind} state-${state}${selected === id ? " selected" : ""}`);
    const label = node.members.length > 1
      ? `${node.members.filter((m) => states.get(m) === "done").length}/${node.members.length} done`
      : labels.get(node.members[0]) || "";
    g.querySelector("text.progress").textContent = label; // cut at the node's edge (clip)
    const m = miniEls.get(id);
    if (m) m.setAttribute("class", `state-${state}`);
    if (follow && (state === "running" || state === "failed")) focusSoon(id);
  };
  // Following is done once a frame, on the last node that ran or failed: replaying a long
  // log turns thousands of steps running in one frame, and each focus measures the panel.
  let toFocus = null;
  const focusSoon = (id) => {
    if (toFocus === null) requestAnimationFrame(() => { const id_ = toFocus; toFocus = null; if (follow) focus(id_); });
    toFocus = id;
  };

  const draw = (layout) => {
    view.width = Math.max(layout.width, 1);
    view.height = Math.max(layout.height, 1);
    const parts = [`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#888"></path></marker><clipPath id="in-node"><rect width="${W - 4}" height="${H}"></rect></clipPath></defs><g class="viewport">`];
    const styleOf = new Map(shape.edges.map((e) => [e.source + "\u0000" + e.target, e]));
    for (const e of layout.edges) {
      const d = "M" + e.points.map((p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" L");
      const info = styleOf.get(e.v + "\u0000" + e.w) || {};
      parts.push(`<path class="edge ${info.style === "failed" ? "failed" : ""}" d="${d}"><title>${esc(info.guard || "")}</title></path>`);
    }
    for (const n of layout.nodes) {
      const node = nodeOf.get(n.id);
      const name = node.members.length > 1 ? `${node.members[0]} … ${node.members[node.members.length - 1]}` : n.id;
      const short = name.length > 20 ? name.slice(0, 19) + "…" : name;
      const kind = node.members.length > 1 ? " chain" : node.step && node.step.loop ? " loop" : "";
      parts.push(`<g class="node${kind}" data-id="${esc(n.id)}" data-step="${esc(node.members[0])}" data-state="pending" transform="translate(${(n.x - W / 2).toFixed(1)},${(n.y - H / 2).toFixed(1)})">
        <rect width="${W}" height="${H}" rx="6"></rect><text x="8" y="16" clip-path="url(#in-node)">${esc(short)}</text>
        <text class="progress" x="8" y="32" clip-path="url(#in-node)"></text><title>${esc(name)}${node.members.length > 1 ? ` (${node.members.length} steps)` : ""}</title></g>`);
    }
    parts.push("</g>");
    svg.innerHTML = parts.join("");
    viewport = svg.querySelector("g.viewport");
    for (const g of svg.querySelectorAll("g.node")) els.set(g.dataset.id, g);
    for (const n of layout.nodes) where.set(n.id, { x: n.x, y: n.y });
    mini.setAttribute("viewBox", `0 0 ${view.width} ${view.height}`);
    mini.innerHTML = layout.nodes.map((n) =>
      `<rect data-id="${esc(n.id)}" x="${n.x - W / 2}" y="${n.y - H / 2}" width="${W}" height="${H}"></rect>`).join("")
      + `<rect class="mini-view" x="0" y="0" width="1" height="1"></rect>`;
    for (const r of mini.querySelectorAll("rect[data-id]")) miniEls.set(r.dataset.id, r);
    miniView = mini.querySelector(".mini-view");
    first();
    for (const id of els.keys()) paint(id);
    note.textContent = `${graph.steps.length} step(s)` +
      (shape.nodes.length < graph.steps.length ? `, ${shape.nodes.length} node(s) drawn (chains collapsed)` : "") +
      (shape.hidden ? `, ${shape.hidden} not drawn` : "") + ` · layout ${layout.ms} ms`;
    box.dataset.ready = "true";
  };

  const ready = new Promise((resolve, reject) => {
    const worker = new Worker("/static/js/layout-worker.js");
    worker.onmessage = (m) => { worker.terminate(); draw(m.data); resolve(); };
    worker.onerror = (e) => { worker.terminate(); note.textContent = "layout failed: " + e.message; reject(e); };
    worker.postMessage({
      nodes: shape.nodes.map((n) => ({ id: n.id, w: W, h: H })),
      edges: shape.edges.map((e) => ({ v: e.source, w: e.target })),
    });
  });

  return {
    ready,
    fit: () => { follow = false; fit(); },
    zoom,
    set(step, state, label) {
      if (state) states.set(step, state);
      if (label !== undefined) labels.set(step, label);
      const id = byStep.get(step);
      if (id) paint(id);
    },
    focus(step) { const id = byStep.get(step); if (id) focus(id); },
    select(step) {
      const previous = selected;
      selected = byStep.get(step) || null;
      if (previous) paint(previous);
      if (selected) paint(selected);
    },
  };
}
