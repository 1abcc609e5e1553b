// An execution as the console knows it, folded from its events: each step's state, runs,
// iterations, attempts, result and error; the execution's end and error. The same folding
// as the API's status (service/progress.py), here for the live page.
// every event name, generated from the Python vocabulary (scripts/gen_console_events.py)
export { EVENT_NAMES } from "./events.js";

export function newModel() {
  return { steps: new Map(), events: [], error: null, finished: null, changed: new Set() };
}

function stepOf(model, name) {
  let s = model.steps.get(name);
  if (!s) {
    s = { name, state: "pending", runs: new Map(), iterations: new Map(), loop: null, attempts: 0,
      result: undefined, error: null, errorDetail: null };
    model.steps.set(name, s);
  }
  return s;
}

const ms = (e) => Date.parse(e.timestamp);

export function feed(model, e) {
  model.events.push(e);
  const name = e.event_type, step = e.node_name, p = e.context || {};
  if (name === "execution.failed") model.error = p.error || { message: e.error };
  if (name === "workflow.finished" || name === "execution.failed" || name === "execution.cancelled") {
    model.finished = { name, at: ms(e) };
  }
  if (!step) return;
  const s = stepOf(model, step);
  model.changed.add(step);
  if (typeof e.attempt === "number" && e.attempt > s.attempts) s.attempts = e.attempt;
  const runId = e.step_run_id || "run";
  const run = () => {
    let r = s.runs.get(runId);
    if (!r) { r = { n: s.runs.size + 1, scheduled: ms(e), started: null, ended: null, state: "scheduled" }; s.runs.set(runId, r); }
    return r;
  };
  const iteration = () => {
    let it = s.iterations.get(e.iteration);
    if (!it) { it = { index: e.iteration, state: "scheduled", scheduled: ms(e), started: null, ended: null, attempts: 0 }; s.iterations.set(e.iteration, it); }
    return it;
  };
  switch (name) {
    case "step.scheduled": s.state = "scheduled"; run(); break;
    case "loop.started":
      s.state = "scheduled"; run();
      s.loop = { total: Number(p.count) || 0, done: 0, failed: 0, inFlight: 0, running: 0 };
      break;
    case "loop.iteration.started": iteration(); if (s.loop) s.loop.inFlight++; break;
    case "task.started":
      s.state = "running";
      if (e.iteration !== null && e.iteration !== undefined) {
        const it = iteration();
        if (it.state !== "running") { it.state = "running"; it.started = ms(e); if (s.loop) s.loop.running++; }
        const r = run();
        if (r.state === "scheduled") { r.state = "running"; r.started = ms(e); }
        it.attempts = Math.max(it.attempts, e.attempt || 1);
      } else { const r = run(); r.state = "running"; r.started = r.started || ms(e); }
      break;
    case "step.started": if (p.listener) { s.state = "running"; run().started = ms(e); } break;
    case "step.done": case "step.failed": {
      const r = run();
      r.ended = ms(e); r.state = name === "step.done" ? "done" : "failed";
      s.state = r.state;
      if (name === "step.done") s.result = p.result; else { s.error = e.error; s.errorDetail = p.error || null; }
      break;
    }
    case "loop.iteration.done": case "loop.iteration.failed": {
      const it = iteration();
      const wasRunning = it.state === "running";
      it.ended = ms(e); it.state = name.endsWith("done") ? "done" : "failed";
      if (it.state === "failed") { it.error = p.error; s.errorDetail = s.errorDetail || p.error || null; }
      if (s.loop) {
        s.loop[it.state === "done" ? "done" : "failed"]++;
        s.loop.inFlight = Math.max(0, s.loop.inFlight - 1);
        if (wasRunning) s.loop.running = Math.max(0, s.loop.running - 1);
      }
      break;
    }
    case "loop.done": {
      const r = run();
      r.ended = ms(e);
      s.state = p.failed ? "failed" : "done"; r.state = s.state;
      s.result = p.results !== undefined ? p.results : p;
      if (s.loop) { s.loop.inFlight = 0; s.loop.running = 0; }
      break;
    }
    case "step.skipped": s.state = "skipped"; break;
    default: break;
  }
}

// Steps still scheduled or running when the execution ended were stopped; so were a loop's
// iterations in flight (a fail-fast loop ends the run while others run): none is shown
// running after the end, each such iteration is cancelled.
export function settle(model, status) {
  for (const s of model.steps.values()) {
    if (s.state === "running" || s.state === "scheduled") {
      s.state = status === "CANCELLED" ? "cancelled" : "failed";
      model.changed.add(s.name);
    }
    for (const it of s.iterations.values()) {
      if (it.state === "running" || it.state === "scheduled") { it.state = "cancelled"; model.changed.add(s.name); }
    }
    if (s.loop && (s.loop.inFlight || s.loop.running)) {
      s.loop.inFlight = 0; s.loop.running = 0;
      model.changed.add(s.name);
    }
  }
}

export function progressLabel(s) {
  if (s.loop) {
    const extra = [s.loop.failed ? `${s.loop.failed} failed` : "", s.loop.running ? `${s.loop.running} running` : ""].filter(Boolean);
    return `${s.loop.done + s.loop.failed}/${s.loop.total}` + (extra.length ? ` · ${extra.join(", ")}` : "");
  }
  return s.attempts > 1 ? `attempt ${s.attempts}` : "";
}
