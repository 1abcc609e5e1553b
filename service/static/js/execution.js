// One execution, live over its event stream: a header with status, duration and the error;
// the step graph; the selected step's panel; the timeline.
import { api, badge, catalogEntry, esc, seconds, stream, when } from "./api.js";
import { createGraph } from "./graph.js";
import { EVENT_NAMES, feed, newModel, progressLabel, settle } from "./model.js";
import { stepPanel } from "./steppanel.js";
import { timeline } from "./timeline.js";

export async function executionView(main, id, onLeave) {
  main.innerHTML = `<div id="head" class="panel head"></div>
    <div class="exec-grid">
      <div class="panel graph-panel"><div id="graph-box" class="graph-box muted">loading the graph…</div></div>
      <div class="panel side-panel" id="step-panel"><p class="muted">Click a step of the graph to see its runs, result, logs and error.</p></div>
    </div>
    <div class="panel" id="timeline-box"></div>`;
  const t0 = performance.now();
  const detail = await api(`/api/executions/${encodeURIComponent(id)}?include_events=false`);
  const [graph, source] = await Promise.all([
    api(`/api/executions/${encodeURIComponent(id)}/graph`).catch(() => null),
    detail.catalog_id
      ? catalogEntry(detail.catalog_id).then((e) => e.content).catch(() => null)
      : Promise.resolve(null),
  ]);
  const model = newModel();
  const lineOf = {};
  if (graph) for (const s of graph.steps) lineOf[s.name] = s.line;
  let status = detail.status;
  let selected = null;
  const panel = stepPanel(document.getElementById("step-panel"), { id, source, lineOf, model });
  const events = timeline(document.getElementById("timeline-box"), graph ? graph.steps.map((s) => s.name) : []);

  const head = () => {
    const start = Date.parse(detail.start_time);
    const end = model.finished ? model.finished.at : (detail.end_time ? Date.parse(detail.end_time) : null);
    const took = ((end || Date.now()) - start) / 1000;
    const err = model.error || (detail.error ? { message: detail.error } : null);
    const errLine = err ? `<div id="exec-error" class="error">${esc(errorSummary(err))}
      ${err.step ? ` <a href="#" data-step="${esc(err.step)}" class="goto">show step ${esc(err.step)}</a>` : ""}</div>` : "";
    document.getElementById("head").innerHTML = `<div class="head-row"><h2>${esc(detail.path)}
      <small class="muted">${detail.version ? "v" + esc(detail.version) : ""}</small></h2>
      <span id="exec-status">${badge(status)}</span>
      <span class="muted">started ${esc(when(detail.start_time))}${end ? " · ended " + esc(new Date(end).toLocaleString()) : ""}
        · <span id="exec-duration">${esc(seconds(took))}</span></span>
      ${status === "RUNNING" ? '<button id="cancel" type="button">Cancel</button>' : ""}
      <code class="muted">${esc(id)}</code></div>${errLine}`;
    const cancel = document.getElementById("cancel");
    if (cancel) cancel.addEventListener("click", () => api(`/api/executions/${encodeURIComponent(id)}/cancel`, { method: "POST", body: {} }));
    const go = document.querySelector("#exec-error .goto");
    if (go) go.addEventListener("click", (e) => { e.preventDefault(); select([go.dataset.step]); });
  };
  head();
  const tick = setInterval(() => { if (status === "RUNNING") head(); }, 1000);
  onLeave(() => clearInterval(tick));

  const select = (members) => {
    selected = members[0];
    if (drawn) { drawn.select(selected); drawn.focus(selected); }
    panel.show(members);
  };
  let drawn = null;
  if (graph) {
    drawn = createGraph(document.getElementById("graph-box"), graph, (members) => select(members));
    drawn.ready.then(() => {
      for (const s of model.steps.values()) drawn.set(s.name, s.state, progressLabel(s));
      document.getElementById("graph-box").dataset.shownMs = String(Math.round(performance.now() - t0));
    }).catch(() => {});
  } else {
    document.getElementById("graph-box").textContent = "no graph: the execution has no stored program";
  }

  let pending = false;
  const render = () => {
    pending = false;
    for (const name of model.changed) {
      const s = model.steps.get(name);
      if (drawn && s) drawn.set(name, s.state, progressLabel(s));
    }
    if (selected && model.changed.has(selected)) panel.refresh();
    model.changed.clear();
    events.flush();
    head();
  };
  const schedule = () => { if (!pending) { pending = true; requestAnimationFrame(render); } };
  const onEvent = (msg) => {
    const e = JSON.parse(msg.data);
    feed(model, e);
    events.add(e);
    schedule();
  };
  const handlers = Object.fromEntries(EVENT_NAMES.map((n) => [n, onEvent]));
  handlers.end = async (msg) => {
    source_.close();
    status = JSON.parse(msg.data).status;
    settle(model, status);
    const fresh = await api(`/api/executions/${encodeURIComponent(id)}?include_events=false`).catch(() => null);
    if (fresh) Object.assign(detail, fresh);
    render();
    events.flush(true); // the last events at once
    document.getElementById("head").dataset.ended = "true";
    // a failed execution opens its failing step: its line, its error and its logs
    const failing = model.error && model.error.step;
    if (failing && !selected) select([failing]);
    panel.refresh();
  };
  const source_ = stream(`/api/executions/${encodeURIComponent(id)}/events?stream=true`, handlers);
  onLeave(() => source_.close());
  onLeave(() => panel.close());
}

export function errorSummary(err) {
  if (!err) return "";
  const type = err.type && err.type !== "Cancelled" ? err.type + ": " : "";
  const at = err.yaml && err.yaml.line ? ` at line ${err.yaml.line}${err.yaml.column ? ":" + err.yaml.column : ""}` : "";
  const where = err.step ? ` (step ${err.step}${err.task ? ", task " + err.task : ""}${at})` : at;
  return `${err.code ? "error[" + err.code + "]: " : ""}${type}${err.message || ""}${where}`;
}
