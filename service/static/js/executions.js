// The executions list: paginated, searchable (text, status, start time range), with end time,
// duration and the error; and Run: a catalog playbook with a workload edited as JSON.
import { api, badge, catalogEntry, catalogSummaries, esc, when } from "./api.js";
import { workloadEditor } from "./workload.js";

const PAGE = 50;

export async function executionsView(main, params, onLeave) {
  main.innerHTML = `
    <div class="panel" id="run-panel">
      <form id="run-form" class="toolbar">
        <label>Playbook <select id="run-path"></select></label>
        <button type="submit" id="run-button">Run</button>
        <span id="run-note" class="muted"></span>
      </form>
      <div id="run-editor"></div>
    </div>
    <form class="toolbar" id="filters">
      <input id="f-text" type="search" placeholder="search id, playbook, error" size="28">
      <label>Status <select id="f-status">
        <option value="">any</option><option>RUNNING</option><option>COMPLETED</option>
        <option>FAILED</option><option>CANCELLED</option></select></label>
      <label>Playbook <input id="f-path" placeholder="exact path" size="16"></label>
      <label>From <input id="f-since" type="datetime-local"></label>
      <label>To <input id="f-until" type="datetime-local"></label>
      <span class="muted" id="count"></span>
      <span class="pager"><button type="button" id="prev">‹ Newer</button>
        <span id="page-no">1</span><button type="button" id="next">Older ›</button></span>
    </form>
    <table id="executions"><thead><tr><th>Execution</th><th>Status</th><th>Playbook</th><th>Version</th>
      <th>Started</th><th>Ended</th><th>Duration</th><th>Error</th></tr></thead><tbody></tbody></table>`;
  const editor = workloadEditor(document.getElementById("run-editor"));
  const catalog = await catalogSummaries({ resource_type: "playbook" });
  const latest = {};
  for (const e of catalog) if (!latest[e.path] || latest[e.path].version < e.version) latest[e.path] = e;
  const paths = Object.keys(latest).sort();
  const select = document.getElementById("run-path");
  select.innerHTML = paths.map((p) => `<option>${esc(p)}</option>`).join("");
  if (params.get("run") && latest[params.get("run")]) select.value = params.get("run");
  // the list holds summaries: the chosen playbook's workload comes from its entry
  const defaults = async () => {
    const summary = latest[select.value];
    const path = select.value;
    const entry = summary ? await catalogEntry(summary.catalog_id).catch(() => null) : null;
    if (select.value !== path) return;  // another playbook was chosen meanwhile
    editor.set(entry && entry.payload && entry.payload.workload ? entry.payload.workload : {});
  };
  select.addEventListener("change", defaults);
  await defaults();
  document.getElementById("run-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const note = document.getElementById("run-note");
    try {
      const workload = editor.value();
      const started = await api("/api/execute", { method: "POST", body: { path: select.value, workload } });
      location.hash = "#/execution/" + started.execution_id;
    } catch (err) { note.textContent = String(err.message || err); note.className = "error"; }
  });

  let page = 1;
  const epochOf = (id) => {
    const v = document.getElementById(id).value;
    return v ? String(new Date(v).getTime() / 1000) : "";
  };
  const refresh = async () => {
    const query = new URLSearchParams({ page: String(page), page_size: String(PAGE + 1) });
    for (const [key, id] of [["status", "f-status"], ["path", "f-path"], ["q", "f-text"]]) {
      const v = document.getElementById(id).value.trim();
      if (v) query.set(key, v);
    }
    if (epochOf("f-since")) query.set("since", epochOf("f-since"));
    if (epochOf("f-until")) query.set("until", epochOf("f-until"));
    const rows = await api("/api/executions?" + query);
    const more = rows.length > PAGE;
    const shown = rows.slice(0, PAGE);
    document.getElementById("count").textContent =
      `${shown.length}${more ? "+" : ""} execution(s)` + (page > 1 ? ` on page ${page}` : "");
    document.getElementById("page-no").textContent = String(page);
    document.getElementById("prev").disabled = page === 1;
    document.getElementById("next").disabled = !more;
    document.querySelector("#executions tbody").innerHTML = shown.map((r) => `
      <tr class="row" data-id="${esc(r.execution_id)}">
        <td><a href="#/execution/${encodeURIComponent(r.execution_id)}"><code>${esc(r.execution_id)}</code></a></td>
        <td>${badge(r.status)}</td><td>${esc(r.path)}</td><td>${esc(r.version)}</td>
        <td>${esc(when(r.start_time))}</td><td>${esc(when(r.end_time))}</td>
        <td>${esc(r.duration_human)}</td><td class="error cell-error" title="${esc(r.error)}">${esc(r.error)}</td></tr>`).join("");
    document.querySelectorAll("#executions tr.row").forEach((tr) =>
      tr.addEventListener("click", () => { location.hash = "#/execution/" + tr.dataset.id; }));
  };
  const again = () => { page = 1; refresh().catch(() => {}); };
  for (const id of ["f-status", "f-since", "f-until"]) document.getElementById(id).addEventListener("change", again);
  for (const id of ["f-text", "f-path"]) document.getElementById(id).addEventListener("input", again);
  document.getElementById("filters").addEventListener("submit", (e) => e.preventDefault());
  document.getElementById("prev").addEventListener("click", () => { page = Math.max(1, page - 1); refresh(); });
  document.getElementById("next").addEventListener("click", () => { page += 1; refresh(); });
  await refresh();
  const timer = setInterval(() => refresh().catch(() => {}), 3000);
  onLeave(() => clearInterval(timer));
}
