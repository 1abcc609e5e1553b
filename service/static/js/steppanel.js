// The selected step: state, runs and iterations with attempts and durations, its result
// (collapsible JSON), its error with the YAML lines around the one that raised, and its
// task logs (followed while the execution runs).
import { api, badge, cut, esc, seconds } from "./api.js";
import { jsonTree } from "./json.js";
import { progressLabel } from "./model.js";
import { sourceLines } from "./yaml.js";

const LOG_CHARS = 200000;

export function stepPanel(box, { id, source, lineOf, model }) {
  let members = [], logs = { step: null, after: 0, text: [], size: 0, timer: null };

  const stopLogs = () => { if (logs.timer) clearInterval(logs.timer); logs.timer = null; };
  let pulling = false;
  const pullLogs = async () => {
    if (pulling) return;
    pulling = true;
    try { await pullOnce(); } finally { pulling = false; }
  };
  const pullOnce = async () => {
    const step = logs.step;
    const q = new URLSearchParams({ step, after: String(logs.after), limit: "1000" });
    const reply = await api(`/api/executions/${encodeURIComponent(id)}/logs?${q}`).catch(() => null);
    if (!reply || logs.step !== step) return;
    for (const row of reply.logs) {
      if (logs.size > LOG_CHARS) break;
      const it = row.iteration !== null && row.iteration !== undefined ? `#${row.iteration} ` : "";
      const prefix = `<span class="muted">${esc(it)}${esc(row.task || "")}${row.attempt > 1 ? " attempt " + esc(row.attempt) : ""}</span> `;
      logs.text.push(`<span class="log-${esc(row.stream)}">${prefix}${esc(row.text)}</span>`);
      logs.size += row.text.length;
    }
    logs.after = reply.next_after;
    const pre = box.querySelector("#step-logs");
    if (pre) {
      pre.innerHTML = logs.text.length ? logs.text.join("") : '<span class="muted">no output</span>';
      if (logs.size > LOG_CHARS) pre.insertAdjacentHTML("beforeend", '\n<span class="muted">… more output not shown here: GET the logs route</span>');
      pre.dataset.rows = String(logs.text.length);
    }
    if (reply.status !== "RUNNING" && !reply.more) stopLogs();
  };

  const errorBlock = (s) => {
    const err = s.errorDetail;
    if (!err && !s.error) return "";
    const e = err || { message: s.error };
    const yaml = e.yaml || null;
    const line = yaml && yaml.line ? yaml.line : lineOf[s.name];
    let lines = "";
    if (source && line) {
      const marks = { [line]: "hit" };
      for (const f of e.traceback || []) if (f.yaml_line && f.yaml_line !== line) marks[f.yaml_line] = "frame";
      lines = `<pre class="source error-source">${sourceLines(source, { from: line - 4, to: line + 3, marks })}</pre>`;
    }
    const frames = (e.traceback || []).map((f) =>
      `<div>line ${esc(f.yaml_line || f.line)}, in ${esc(f.function)}: <code>${esc(f.text || "")}</code></div>`).join("");
    const extra = ["status", "position", "expression"].filter((k) => e[k] !== undefined)
      .map((k) => `<div><b>${esc(k)}</b>: ${esc(cut(JSON.stringify(e[k]), 500))}</div>`).join("");
    const body = e.body !== undefined ? `<pre>${esc(cut(typeof e.body === "string" ? e.body : JSON.stringify(e.body), 4000))}</pre>` : "";
    return `<h4>Error</h4><div class="error" id="step-error">${esc(e.type ? e.type + ": " : "")}${esc(e.message || s.error || "")}
      ${yaml && yaml.line ? `<span class="muted"> at line ${esc(yaml.line)}${yaml.column ? ":" + esc(yaml.column) : ""}</span>` : ""}</div>
      ${e.task ? `<div class="muted">task ${esc(e.task)}${e.line ? `, line ${esc(e.line)} of its code` : ""}</div>` : ""}
      ${lines}${frames ? `<div class="traceback"><b>traceback</b> (the task's code)${frames}</div>` : ""}${extra}${body}`;
  };

  const runsBlock = (s) => {
    if (!s.runs.size) return "";
    const rows = [...s.runs.values()].map((r) => `<tr><td>${r.n}</td><td>${badge(r.state)}</td>
      <td>${r.started ? esc(seconds((r.started - r.scheduled) / 1000)) : ""}</td>
      <td>${r.ended ? esc(seconds((r.ended - (r.started || r.scheduled)) / 1000)) : ""}</td></tr>`).join("");
    return `<h4>Runs</h4><table class="small"><tr><th>#</th><th>state</th><th>waited</th><th>took</th></tr>${rows}</table>`;
  };

  const iterationsBlock = (s) => {
    if (!s.iterations.size) return "";
    const all = [...s.iterations.values()].sort((a, b) => a.index - b.index);
    const failed = all.filter((i) => i.state === "failed");
    const shown = [...failed.slice(0, 50), ...all.filter((i) => i.state !== "failed").slice(-100)];
    const rows = shown.map((i) => `<tr data-iteration="${esc(i.index)}"><td>${esc(i.index)}</td><td>${badge(i.state)}</td>
      <td>${i.attempts > 1 ? esc(i.attempts) : ""}</td>
      <td>${i.ended && i.started ? esc(seconds((i.ended - i.started) / 1000)) : ""}</td>
      <td class="error">${i.error ? esc(cut(i.error.message || JSON.stringify(i.error), 160)) : ""}</td></tr>`).join("");
    return `<h4>Iterations <span class="muted">(${all.length} issued${all.length > shown.length ? `, ${shown.length} shown` : ""})</span></h4>
      <div class="scroll"><table class="small"><tr><th>#</th><th>state</th><th>attempts</th><th>took</th><th>error</th></tr>${rows}</table></div>`;
  };

  const render = () => {
    if (members.length > 1) {
      box.innerHTML = `<h3>${members.length} steps in a chain</h3><div class="scroll">${members.map((m) => {
        const s = model.steps.get(m);
        return `<div><a href="#" data-member="${esc(m)}">${esc(m)}</a> ${badge(s ? s.state : "pending")}</div>`;
      }).join("")}</div>`;
      box.querySelectorAll("a[data-member]").forEach((a) => a.addEventListener("click", (e) => {
        e.preventDefault(); show([a.dataset.member]);
      }));
      return;
    }
    const name = members[0];
    const s = model.steps.get(name) || { name, state: "pending", runs: new Map(), iterations: new Map(), attempts: 0 };
    const loop = s.loop ? `<div class="loop-bar" title="${esc(progressLabel(s))}"><div class="done" style="width:${100 * s.loop.done / Math.max(1, s.loop.total)}%"></div><div class="failed" style="width:${100 * s.loop.failed / Math.max(1, s.loop.total)}%"></div></div>
      <div id="loop-progress">${esc(s.loop.done + s.loop.failed)}/${esc(s.loop.total)} done · ${esc(s.loop.failed)} failed · ${esc(s.loop.inFlight)} in flight · ${esc(s.loop.running)} running</div>` : "";
    const result = s.result !== undefined ? `<h4>Result</h4>${jsonTree(s.result)}` : "";
    box.innerHTML = `<h3 id="step-title" data-step="${esc(name)}">${esc(name)} ${badge(s.state)}</h3>
      <div class="muted">${lineOf[name] ? "line " + esc(lineOf[name]) + " · " : ""}${s.runs.size} run(s)${s.attempts > 1 ? " · " + esc(s.attempts) + " attempts" : ""}</div>
      ${loop}${errorBlock(s)}${runsBlock(s)}${iterationsBlock(s)}${result}
      <h4>Logs</h4><pre id="step-logs" class="logs"><span class="muted">loading…</span></pre>`;
  };

  const show = (list) => {
    members = list;
    stopLogs();
    logs = { step: list[0], after: 0, text: [], size: 0, timer: null };
    render();
    if (list.length === 1) {
      pullLogs();
      logs.timer = setInterval(pullLogs, 1000);
    }
  };

  return {
    show,
    refresh() {
      if (!members.length) return;
      const open = [...box.querySelectorAll("details")].map((d) => d.open);
      render();
      box.querySelectorAll("details").forEach((d, i) => { if (open[i] !== undefined) d.open = open[i]; });
      if (members.length === 1) pullLogs();
    },
    close: stopLogs,
  };
}
