// What every view shares: the API token, fetch and event streams, escaping, formatting.
export const state = {
  token: new URLSearchParams(location.search).get("token") || localStorage.getItem("noetl-token") || "",
};
if (new URLSearchParams(location.search).has("token")) {
  // a token given in the address is kept in this browser, never left in the URL (history,
  // referrers, screenshots); only the event stream still sends it as ?token= (EventSource
  // cannot set headers, and the service accepts ?token= nowhere else)
  localStorage.setItem("noetl-token", state.token);
  history.replaceState(null, "", location.pathname + location.hash);
}

export function esc(text) {
  return String(text === undefined || text === null ? "" : text)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

export async function api(path, options) {
  const opts = Object.assign({ headers: {} }, options || {});
  if (state.token) opts.headers.Authorization = "Bearer " + state.token;
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
  if (!reply.ok) {
    const detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    throw new Error((body.code ? body.code + ": " : "") + detail + (body.hint ? " (" + body.hint + ")" : ""));
  }
  return body;
}

// Every catalog summary (no content: `catalogEntry` fetches one version's), page by page.
export async function catalogSummaries(filter) {
  const entries = [];
  for (let page = 1; ; page++) {
    const reply = await api("/api/catalog/list", { method: "POST", body: Object.assign({}, filter, { page, page_size: 500 }) });
    entries.push(...reply.entries);
    if (!reply.pagination.has_next) return entries;
  }
}

// One catalog version with its content, payload and findings.
export function catalogEntry(catalogId) {
  return api("/api/catalog/resource", { method: "POST", body: { catalog_id: catalogId } });
}

// A server-sent event stream with the token; `on` maps event names to handlers.
export function stream(path, on) {
  const url = new URL(path, location.href);
  if (state.token) url.searchParams.set("token", state.token);
  const source = new EventSource(url);
  for (const [name, handler] of Object.entries(on)) source.addEventListener(name, handler);
  return source;
}

export function badge(status) {
  const s = String(status || "").toUpperCase();
  return `<span class="badge ${esc(s)}">${esc(s)}</span>`;
}

export function when(iso) { return iso ? new Date(iso).toLocaleString() : ""; }

export function seconds(value) {
  if (value === null || value === undefined || !isFinite(value)) return "";
  if (value < 1) return Math.round(value * 1000) + " ms";
  if (value < 60) return value.toFixed(value < 10 ? 2 : 1) + " s";
  const m = Math.floor(value / 60), s = Math.round(value % 60);
  return m < 60 ? `${m}m ${s}s` : `${Math.floor(m / 60)}h ${m % 60}m`;
}

// Long text (a result, a log) cut for the page: the rest is counted, never rendered.
export function cut(text, limit) {
  const s = String(text);
  return s.length <= limit ? s : s.slice(0, limit) + `\n… ${s.length - limit} more characters not shown`;
}
