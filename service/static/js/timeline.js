// The event timeline: follows new events (newest at the bottom, scrolled into view while
// "follow" is on), filterable by step and kind; at most ROWS rows are in the page.
import { esc } from "./api.js";

const ROWS = 500;
const EVERY = 250;
const KINDS = { all: () => true, steps: (n) => n.startsWith("step."), tasks: (n) => n.startsWith("task."),
  loops: (n) => n.startsWith("loop."), routing: (n) => n === "next.selected" || n === "join.fired",
  errors: (n) => n.endsWith(".failed") || n === "task.retry" || n === "execution.cancelled" };

export function timeline(box, steps) {
  box.innerHTML = `<div class="toolbar"><h3>Timeline</h3>
    <label>Step <input id="tl-step" list="tl-steps" placeholder="any" size="14"></label>
    <datalist id="tl-steps">${steps.slice(0, 2000).map((s) => `<option value="${esc(s)}">`).join("")}</datalist>
    <label>Kind <select id="tl-kind">${Object.keys(KINDS).map((k) => `<option>${k}</option>`).join("")}</select></label>
    <label><input type="checkbox" id="tl-follow" checked> follow</label>
    <span class="muted" id="tl-count"></span></div><div id="timeline" class="timeline"></div>`;
  const list = box.querySelector("#timeline");
  const all = [];
  let queued = [];
  let last = -Infinity, timer = null;
  const keep = (e) => {
    const step = box.querySelector("#tl-step").value.trim();
    return KINDS[box.querySelector("#tl-kind").value](e.event_type) && (!step || e.node_name === step);
  };
  const row = (e) => {
    const it = e.iteration !== null && e.iteration !== undefined ? ` <span class="muted">#${esc(e.iteration)}</span>` : "";
    const at = e.attempt && e.attempt > 1 ? ` <span class="muted">attempt ${esc(e.attempt)}</span>` : "";
    const err = e.error ? ` <span class="error">${esc(String(e.error).slice(0, 200))}</span>` : "";
    const cls = e.event_type.endsWith(".failed") ? "ev failed" : e.event_type === "task.started" ? "ev running" : "ev";
    return `<div class="${cls}" data-kind="${esc(e.event_type)}"><span class="muted">${esc(new Date(e.timestamp).toLocaleTimeString())}</span>
      <b>${esc(e.event_type)}</b> ${esc(e.node_name || "")}${it}${at}${err}</div>`;
  };
  // the oldest rows past ROWS, removed at once (one by one, a replayed 40,000-event log spent
  // seconds here)
  const trim = () => {
    const extra = list.childElementCount - ROWS;
    if (extra <= 0) return;
    const range = document.createRange();
    range.setStartBefore(list.firstElementChild);
    range.setEndAfter(list.children[extra - 1]);
    range.deleteContents();
  };
  const count = () => { box.querySelector("#tl-count").textContent = `${all.length} event(s)`; };
  const redraw = () => {
    list.innerHTML = all.filter(keep).slice(-ROWS).map(row).join("");
    count();
    if (box.querySelector("#tl-follow").checked) list.scrollTop = list.scrollHeight;
  };
  box.querySelector("#tl-step").addEventListener("input", redraw);
  box.querySelector("#tl-kind").addEventListener("change", redraw);
  return {
    add(e) { all.push(e); queued.push(e); },
    // at most every EVERY ms (`now`: at once): each flush lays the list out again, and a
    // replayed log of 40,000 events spent most of its load flushing every frame
    flush(now) {
      if (!queued.length) return;
      const at = performance.now();
      if (!now && at - last < EVERY) {
        if (!timer) timer = setTimeout(() => { timer = null; this.flush(true); }, EVERY - (at - last));
        return;
      }
      last = at;
      const rows = queued.filter(keep);
      queued = [];
      if (rows.length >= ROWS) list.innerHTML = rows.slice(-ROWS).map(row).join("");
      else { list.insertAdjacentHTML("beforeend", rows.map(row).join("")); trim(); }
      count();
      if (box.querySelector("#tl-follow").checked) list.scrollTop = list.scrollHeight;
    },
  };
}
