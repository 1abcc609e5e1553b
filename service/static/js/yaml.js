// YAML source lines with line numbers and light syntax highlighting (comments, keys,
// strings, templates); `marks` maps a line number to a class (a finding, the failing line).
import { esc } from "./api.js";

export function highlight(text) {
  const comment = text.match(/^(\s*)(#.*)$/);
  if (comment) return esc(comment[1]) + `<span class="y-comment">${esc(comment[2])}</span>`;
  let html = esc(text);
  html = html.replace(/^(\s*-?\s*)([A-Za-z_][\w.\-]*)(:)(?=\s|$)/, '$1<span class="y-key">$2</span>$3');
  html = html.replace(/(\{\{.*?\}\}|\{%.*?%\})/g, '<span class="y-tpl">$1</span>');
  html = html.replace(/(\s)(#[^"']*)$/, '$1<span class="y-comment">$2</span>');
  return html;
}

export function sourceLines(source, { from = 1, to = Infinity, marks = {}, ids = false } = {}) {
  const lines = String(source).split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop(); // the final newline
  const out = [];
  const last = Math.min(lines.length, to);
  for (let n = Math.max(1, from); n <= last; n++) {
    const cls = marks[n] ? ` ${marks[n]}` : "";
    out.push(`<div class="src-line${cls}"${ids ? ` id="L${n}"` : ""} data-line="${n}"><span class="ln">${n}</span>${highlight(lines[n - 1])}</div>`);
  }
  return out.join("");
}
