// Lays out a step graph with dagre (shipped in /static/vendor) off the page's thread, so a
// large graph never freezes the tab. In: {nodes: [{id, w, h}], edges: [{v, w}]}; out: the
// nodes' centres, the edges' points and the drawing's size.
importScripts("/static/vendor/dagre.min.js");

onmessage = (message) => {
  const { nodes, edges } = message.data;
  const started = Date.now();
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 18, ranksep: 46, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) g.setNode(n.id, { width: n.w, height: n.h });
  for (const e of edges) if (e.v !== e.w && g.hasNode(e.v) && g.hasNode(e.w)) g.setEdge(e.v, e.w);
  dagre.layout(g);
  postMessage({
    nodes: g.nodes().map((id) => { const n = g.node(id); return { id, x: n.x, y: n.y }; }),
    edges: g.edges().map((e) => ({ v: e.v, w: e.w, points: g.edge(e).points })),
    width: g.graph().width,
    height: g.graph().height,
    ms: Date.now() - started,
  });
};
