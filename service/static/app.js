// The noetlc console: plain JavaScript, no build step, no external resources.
// Views (hash routes): #/executions, #/execution/ID, #/catalog, #/catalog/PATH.
"use strict";

const main = document.getElementById("main");
let token = new URLSearchParams(location.search).get("token") || localStorage.getItem("noetl-token") || "";
if (new URLSearchParams(location.search).has("token")) {
  // a token given in the address is kept in this browser, never left in the URL (history,
  // referrers, screenshots); only the event stream still sends it as ?token= (EventSource
  // cannot set headers)
  localStorage.setItem("noetl-token", token);
  history.replaceState(null, "", location.pathname + location.hash);
}
let cleanup = [];

function esc(text) {
  return String(text === undefined || text === null ? "" : text)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function json(value) { return esc(JSON.stringify(value, null, 2)); }

async function api(path, options) {
  const opts = Object.assign({ headers: {} }, options || {});
  if (token) opts.headers.Authorization = "Bearer " + token;
  if (opts.body && typeof opts.body !== "string") {
    opts.body = JSON.stringify(opts.body);
    opts.headers["Content-Type"] = "application/json";
  }
  const reply = await fetch(path, opts);
  if (reply.status === 401) {
    document.getElementById("token-box").hidden = false;
    throw new Error("the API needs a token");
  }
  const body = await reply.json();
  if (!reply.ok) throw new Error((body.code ? body.code + ": " : "") + JSON.stringify(body.detail));
  return body;
}

document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token = document.getElementById("token-input").value.trim();
  localStorage.setItem("noetl-token", token);
  document.getElementById("token-box").hidden = true;
  route();
});

function badge(status) { return `<span class="badge ${esc(status)}">${esc(status)}</span>`; }
function when(iso) { return iso ? new Date(iso).toLocaleString() : ""; }

// ------------------------------------------------------------------ executions

async function executionsView() {
  main.innerHTML = `
    <div class="panel">
      <form id="run-form" class="toolbar">
        <label>Playbook <select id="run-path"></select></label>
        <label>Workload <input id="run-workload" size="40" placeholder='{"name": "world"}'></label>
        <button type="submit" id="run-button">Run</button>
        <span id="run-note" class="muted"></span>
      </form>
    </div>
    <div class="toolbar">
      <label>Status <select id="f-status">
        <option value="">any</option><option>RUNNING</option><option>COMPLETED</option>
        <option>FAILED</option><option>CANCELLED</option></select></label>
      <label>Playbook <input id="f-path" placeholder="path"></label>
      <span class="muted" id="count"></span>
    </div>
    <table id="executions"><thead><tr><th>Execution</th><th>Status</th><th>Playbook</th>
      <th>Version</th><th>Started</th><th>Duration</th><th>Error</th></tr></thead><tbody></tbody></table>`;
  const catalog = await api("/api/catalog/list", { method: "POST", body: { resource_type: "playbook", page_size: 500 } });
  const paths = [...new Set(catalog.entries.map((e) => e.path))].sort();
  document.getElementById("run-path").innerHTML = paths.map((p) => `<option>${esc(p)}</option>`).join("");
  document.getElementById("run-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const note = document.getElementById("run-note");
    try {
      const text = document.getElementById("run-workload").value.trim();
      const body = { path: document.getElementById("run-path").value, workload: text ? JSON.parse(text) : {} };
      const started = await api("/api/execute", { method: "POST", body });
      location.hash = "#/execution/" + started.execution_id;
    } catch (err) { note.textContent = String(err.message || err); note.className = "error"; }
  });
  const refresh = async () => {
    const status = document.getElementById("f-status").value;
    const path = document.getElementById("f-path").value.trim();
    const query = new URLSearchParams({ page_size: "200" });
    if (status) query.set("status", status);
    if (path) query.set("path", path);
    const rows = await api("/api/executions?" + query);
    document.getElementById("count").textContent = rows.length + " execution(s)";
    document.querySelector("#executions tbody").innerHTML = rows.map((r) => `
      <tr class="row" data-id="${esc(r.execution_id)}">
        <td><code>${esc(r.execution_id)}</code></td><td>${badge(r.status)}</td>
        <td>${esc(r.path)}</td><td>${esc(r.version)}</td><td>${esc(when(r.start_time))}</td>
        <td>${esc(r.duration_human)}</td><td class="error">${esc(r.error)}</td></tr>`).join("");
    document.querySelectorAll("#executions tr.row").forEach((tr) =>
      tr.addEventListener("click", () => { location.hash = "#/execution/" + tr.dataset.id; }));
  };
  document.getElementById("f-status").addEventListener("change", refresh);
  document.getElementById("f-path").addEventListener("input", refresh);
  await refresh();
  const timer = setInterval(() => refresh().catch(() => {}), 2000);
  cleanup.push(() => clearInterval(timer));
}

// ------------------------------------------------------------------ one execution

const STEP_STATE = { "step.started": "running", "step.done": "done", "step.failed": "failed", "step.skipped": "skipped" };

function layout(graph) {
  const depth = {};
  const entry = (graph.steps.find((s) => s.entry) || graph.steps[0] || {}).name;
  const queue = entry ? [entry] : [];
  if (entry) depth[entry] = 0;
  while (queue.length) {
    const at = queue.shift();
    for (const e of graph.edges) {
      if (e.source === at && depth[e.target] === undefined) {
        depth[e.target] = depth[at] + 1;
        queue.push(e.target);
      }
    }
  }
  const rows = {};
  const pos = {};
  for (const s of graph.steps) {
    const d = depth[s.name] === undefined ? 0 : depth[s.name];
    rows[d] = (rows[d] || 0) + 1;
    pos[s.name] = { x: 20 + d * 170, y: 20 + (rows[d] - 1) * 60 };
  }
  return pos;
}

function drawGraph(graph, states) {
  const pos = layout(graph);
  const width = Math.max(...Object.values(pos).map((p) => p.x), 0) + 170;
  const height = Math.max(...Object.values(pos).map((p) => p.y), 0) + 60;
  const edges = graph.edges.map((e) => {
    const a = pos[e.source], b = pos[e.target];
    if (!a || !b) return "";
    const back = b.x <= a.x;
    const path = back
      ? `M${a.x + 65},${a.y} C${a.x + 65},${a.y - 40} ${b.x + 65},${b.y - 40} ${b.x + 65},${b.y}`
      : `M${a.x + 130},${a.y + 18} L${b.x},${b.y + 18}`;
    return `<path class="edge ${e.style === "failed" ? "failed" : ""}" d="${path}"><title>${esc(e.guard)}</title></path>`;
  }).join("");
  const nodes = graph.steps.map((s) => {
    const p = pos[s.name];
    const state = states[s.name] || "pending";
    return `<g class="node state-${state}" data-step="${esc(s.name)}" data-state="${state}" transform="translate(${p.x},${p.y})">
      <rect width="130" height="36" stroke-width="${s.final ? 3 : 1}"></rect>
      <text x="8" y="22">${esc(s.name.length > 18 ? s.name.slice(0, 17) + "…" : s.name)}</text>
      <title>${esc(s.name)} (line ${esc(s.line)}): ${state}</title></g>`;
  }).join("");
  return `<svg id="graph" width="${width}" height="${height}" xmlns="http://www.w3.org/2000/svg">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto">
    <path d="M0,0 L10,5 L0,10 z" fill="#888"></path></marker></defs>${edges}${nodes}</svg>`;
}

async function executionView(id) {
  main.innerHTML = `<p><a href="#/executions">← executions</a></p><div id="head" class="panel"></div>
    <div class="grid"><div><div class="panel"><h3>Steps</h3><div id="graph-box" class="muted">no graph</div></div>
    <div class="panel"><h3>Step results</h3><div id="steps"></div></div></div>
    <div class="panel"><h3>Timeline</h3><div id="timeline" class="timeline"></div></div></div>`;
  const detail = await api(`/api/executions/${encodeURIComponent(id)}?include_events=false`);
  let graph = null, source = null;
  if (detail.catalog_id) {
    graph = await api(`/api/catalog/graph?catalog_id=${encodeURIComponent(detail.catalog_id)}`).catch(() => null);
    const entry = await api("/api/catalog/resource", { method: "POST", body: { catalog_id: detail.catalog_id } }).catch(() => null);
    source = entry && entry.content;
  }
  const lineOf = {};
  if (graph) for (const s of graph.steps) lineOf[s.name] = s.line;
  const states = {}, results = {}, events = [];
  const head = (status) => {
    document.getElementById("head").innerHTML = `<h2>${esc(detail.path)} <small class="muted">v${esc(detail.version)}</small>
      <span id="exec-status">${badge(status)}</span></h2><code>${esc(id)}</code>
      <span class="muted"> started ${esc(when(detail.start_time))}</span>
      ${status === "RUNNING" ? '<button id="cancel">Cancel</button>' : ""}`;
    const cancel = document.getElementById("cancel");
    if (cancel) cancel.addEventListener("click", () => api(`/api/executions/${id}/cancel`, { method: "POST", body: {} }));
  };
  head(detail.status);
  const render = () => {
    if (graph) document.getElementById("graph-box").innerHTML = drawGraph(graph, states);
    document.getElementById("steps").innerHTML = Object.keys(results).map((name) => {
      const r = results[name];
      const line = lineOf[name] ? `<span class="muted">${esc(source ? "line " + lineOf[name] : "")}</span>` : "";
      const yaml = source && lineOf[name] ? `<pre>${esc(source.split("\n").slice(lineOf[name] - 1, lineOf[name] + 2).join("\n"))}</pre>` : "";
      const body = r.error ? `<pre class="error">${esc(r.error)}</pre>` : `<pre>${json(r.result)}</pre>`;
      return `<div class="step-result" data-step="${esc(name)}"><b>${esc(name)}</b> ${badge(r.error ? "FAILED" : "COMPLETED")} ${line}${yaml}${body}</div>`;
    }).join("");
    document.getElementById("timeline").innerHTML = events.slice(-400).map((e) =>
      `<div><span class="muted">${esc(new Date(e.timestamp).toLocaleTimeString())}</span> <b>${esc(e.event_type)}</b> ${esc(e.node_name || "")}${e.iteration !== null && e.iteration !== undefined ? " #" + esc(e.iteration) : ""}</div>`).join("");
  };
  render();
  const query = new URLSearchParams({ stream: "true" });
  if (token) query.set("token", token);
  const stream = new EventSource(`/api/executions/${encodeURIComponent(id)}/events?${query}`);
  cleanup.push(() => stream.close());
  let pending = false;
  const schedule = () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; render(); }); } };
  stream.onmessage = () => {};
  const onEvent = (msg) => {
    const e = JSON.parse(msg.data);
    events.push(e);
    if (STEP_STATE[e.event_type] && e.node_name) {
      states[e.node_name] = STEP_STATE[e.event_type];
      if (e.event_type === "step.done") results[e.node_name] = { result: e.result };
      if (e.event_type === "step.failed") results[e.node_name] = { error: e.error || JSON.stringify(e.context) };
    }
    schedule();
  };
  for (const name of ["playbook.execution.requested", "workflow.started", "step.scheduled", "step.started", "step.done",
    "step.failed", "step.skipped", "task.started", "task.done", "task.retry", "loop.started", "loop.iteration.started",
    "loop.iteration.done", "loop.iteration.failed", "loop.done", "next.selected", "join.fired", "workflow.finished",
    "execution.failed", "execution.cancelled", "signal.received", "timer.fired", "execution.resumed"]) {
    stream.addEventListener(name, onEvent);
  }
  stream.addEventListener("end", (msg) => {
    stream.close();
    head(JSON.parse(msg.data).status);
    document.getElementById("head").dataset.ended = "true";
  });
}

// ------------------------------------------------------------------ catalog

async function catalogView(path) {
  // summaries (no content): a path's chosen version is fetched alone below
  const listed = await api("/api/catalog/list", { method: "POST", body: { page_size: 500 } });
  const byPath = {};
  for (const e of listed.entries) (byPath[e.path] = byPath[e.path] || []).push(e);
  if (!path) {
    main.innerHTML = `<table id="catalog"><thead><tr><th>Path</th><th>Kind</th><th>Versions</th><th>Latest</th><th>Findings</th></tr></thead><tbody>
      ${Object.keys(byPath).sort().map((p) => {
        const versions = byPath[p].sort((a, b) => b.version - a.version);
        return `<tr class="row" data-path="${esc(p)}"><td>${esc(p)}</td><td>${esc(versions[0].kind)}</td>
          <td>${versions.map((v) => "v" + v.version).join(" ")}</td><td>${esc(when(versions[0].created_at))}</td>
          <td>${versions[0].findings_count}</td></tr>`;
      }).join("")}</tbody></table>`;
    document.querySelectorAll("#catalog tr.row").forEach((tr) =>
      tr.addEventListener("click", () => { location.hash = "#/catalog/" + encodeURIComponent(tr.dataset.path); }));
    return;
  }
  const versions = (byPath[path] || []).sort((a, b) => b.version - a.version);
  const chosen = Number(new URLSearchParams(location.hash.split("?")[1] || "").get("v")) || (versions[0] || {}).version;
  const summary = versions.find((v) => v.version === chosen);
  const entry = summary && await api("/api/catalog/resource", { method: "POST", body: { catalog_id: summary.catalog_id } });
  if (!entry) { main.innerHTML = `<p class="error">no catalog entry ${esc(path)}</p>`; return; }
  const findings = {};
  for (const f of entry.findings || []) (findings[f.line] = findings[f.line] || []).push(f);
  const lines = entry.content.split("\n").map((text, i) => {
    const here = findings[i + 1] || [];
    const cls = here.length ? (here.some((f) => f.severity === "error") ? "finding-error" : "finding") : "";
    const notes = here.map((f) => `<div class="note">${esc(f.severity)}[${esc(f.code)}] ${esc(f.message)}</div>`).join("");
    return `<div class="${cls}"><span class="ln">${i + 1}</span>${esc(text)}</div>${notes}`;
  }).join("");
  main.innerHTML = `<p><a href="#/catalog">← catalog</a></p><div class="panel"><h2>${esc(path)}</h2>
    ${versions.map((v) => `<a href="#/catalog/${encodeURIComponent(path)}?v=${v.version}">${v.version === chosen ? "<b>v" + v.version + "</b>" : "v" + v.version}</a>`).join(" ")}
    <span class="muted"> ${esc(entry.catalog_id)} · ${(entry.findings || []).length} finding(s)</span></div>
    <div class="panel"><pre class="source">${lines}</pre></div>`;
}

// ------------------------------------------------------------------ routing

async function route() {
  cleanup.forEach((fn) => fn());
  cleanup = [];
  const hash = location.hash || "#/executions";
  const [, view, rest] = hash.split("?")[0].match(/^#\/([^/]*)\/?(.*)$/) || [null, "executions", ""];
  document.getElementById("nav-executions").className = view.startsWith("execution") ? "active" : "";
  document.getElementById("nav-catalog").className = view === "catalog" ? "active" : "";
  try {
    if (view === "execution") await executionView(decodeURIComponent(rest));
    else if (view === "catalog") await catalogView(rest ? decodeURIComponent(rest) : "");
    else await executionsView();
    document.getElementById("conn").textContent = "";
  } catch (err) {
    main.innerHTML = `<p class="error">${esc(err.message || err)}</p>`;
  }
}

window.addEventListener("hashchange", route);
route();
