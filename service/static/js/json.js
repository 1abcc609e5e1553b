// Collapsible JSON: nested <details>, the first levels open; at most LIMIT values and
// STRING characters per string are rendered (the rest is counted), so a huge result never
// blocks the page.
import { esc } from "./api.js";

const LIMIT = 2000, STRING = 2000;

export function jsonTree(value) {
  const budget = { left: LIMIT };
  return `<div class="json">${node(value, 0, budget)}</div>`;
}

function node(value, depth, budget) {
  if (budget.left-- <= 0) return `<span class="muted">…</span>`;
  if (value === null || typeof value !== "object") {
    if (typeof value === "string") {
      const s = value.length > STRING ? value.slice(0, STRING) + `… (${value.length - STRING} more)` : value;
      return `<span class="j-str">"${esc(s)}"</span>`;
    }
    return `<span class="j-${typeof value}">${esc(String(value))}</span>`;
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  const open = Array.isArray(value) ? "[" : "{", close = Array.isArray(value) ? "]" : "}";
  if (!entries.length) return `<span>${open}${close}</span>`;
  const shown = [];
  for (const [k, v] of entries) {
    if (budget.left <= 0) { shown.push(`<div class="muted">… ${entries.length - shown.length} more</div>`); break; }
    const key = Array.isArray(value) ? "" : `<span class="j-key">${esc(k)}</span>: `;
    shown.push(`<div class="j-row">${key}${node(v, depth + 1, budget)}</div>`);
  }
  return `<details${depth < 2 ? " open" : ""}><summary>${open} <span class="muted">${entries.length} ${Array.isArray(value) ? "item(s)" : "key(s)"}</span></summary>${shown.join("")}${close}</details>`;
}
