// The catalog: paths with search; one playbook: its versions (with a diff between two), its
// source with line numbers and highlighting at full height, its lint findings with hints
// linked to their lines, and Run.
import { catalogEntry, catalogSummaries, esc, when } from "./api.js";
import { diffLines } from "./diff.js";
import { sourceLines } from "./yaml.js";

export async function catalogView(main, path, params) {
  // summaries (no content): the chosen version is fetched alone below
  const listed = await catalogSummaries({});
  const byPath = {};
  for (const e of listed) (byPath[e.path] = byPath[e.path] || []).push(e);
  if (!path) return listView(main, byPath);
  const versions = (byPath[path] || []).sort((a, b) => b.version - a.version);
  const chosen = Number(params.get("v")) || (versions[0] || {}).version;
  const summary = versions.find((v) => v.version === chosen);
  if (!summary) { main.innerHTML = `<p class="error">no catalog entry ${esc(path)}</p>`; return; }
  const entry = await catalogEntry(summary.catalog_id);
  const content = entry.content;
  const findings = entry.findings || [];
  const marks = {};
  for (const f of findings) if (f.line) marks[f.line] = f.severity === "error" ? "finding-error" : "finding";
  const options = versions.map((v) => `<option value="${v.version}">v${v.version}</option>`).join("");
  main.innerHTML = `<p><a href="#/catalog">← catalog</a></p>
    <div class="panel head-row"><h2>${esc(path)}</h2>
      ${versions.map((v) => `<a class="version${v.version === chosen ? " current" : ""}" href="#/catalog/${encodeURIComponent(path)}?v=${v.version}">v${v.version}</a>`).join(" ")}
      <span class="muted">${esc(entry.catalog_id)} · ${esc(when(entry.created_at))}</span>
      <a class="button" id="run-this" href="#/executions?run=${encodeURIComponent(path)}">Run</a></div>
    <div class="cat-grid">
      <div class="panel"><pre class="source full" id="source">${sourceLines(content, { marks, ids: true })}</pre></div>
      <div>
        <div class="panel"><h3>Findings <span class="muted">(${findings.length})</span></h3><ul id="findings">${findings.map((f) => `
          <li class="${f.severity === "error" ? "error" : ""}"><a href="#" data-line="${esc(f.line)}">line ${esc(f.line)}${f.column ? ":" + esc(f.column) : ""}</a>
            ${esc(f.severity)}[${esc(f.code)}] ${esc(f.message)}${f.hint ? `<div class="hint">hint: ${esc(f.hint)}</div>` : ""}</li>`).join("") || '<li class="muted">none</li>'}</ul></div>
        <div class="panel"><h3>Diff</h3>
          <label>from <select id="diff-a">${options}</select></label> <label>to <select id="diff-b">${options}</select></label>
          <pre id="diff" class="source diff"></pre></div>
      </div></div>`;
  main.querySelectorAll("#findings a[data-line]").forEach((a) => a.addEventListener("click", (e) => {
    e.preventDefault();
    const line = document.getElementById("L" + a.dataset.line);
    if (!line) return;
    line.scrollIntoView({ block: "center" });
    line.classList.add("flash");
    setTimeout(() => line.classList.remove("flash"), 1500);
  }));
  const a = main.querySelector("#diff-a"), b = main.querySelector("#diff-b");
  a.value = String(versions.length > 1 ? versions[1].version : chosen);
  b.value = String(chosen);
  const texts = { [entry.catalog_id]: content };
  const text = async (version) => {
    const v = versions.find((x) => x.version === Number(version));
    if (!(v.catalog_id in texts)) texts[v.catalog_id] = (await catalogEntry(v.catalog_id)).content;
    return texts[v.catalog_id];
  };
  const showDiff = async () => {
    const rows = diffLines(await text(a.value), await text(b.value));
    main.querySelector("#diff").innerHTML = rows.map(([op, line]) =>
      `<div class="d-${op === "+" ? "add" : op === "-" ? "del" : "same"}">${esc(op)} ${esc(line)}</div>`).join("");
  };
  a.addEventListener("change", showDiff);
  b.addEventListener("change", showDiff);
  await showDiff();
}

function listView(main, byPath) {
  main.innerHTML = `<div class="toolbar"><input id="cat-search" type="search" placeholder="search paths" size="30">
    <span class="muted" id="cat-count"></span></div>
    <table id="catalog"><thead><tr><th>Path</th><th>Kind</th><th>Versions</th><th>Latest</th><th>Findings</th><th></th></tr></thead><tbody></tbody></table>`;
  const body = main.querySelector("#catalog tbody");
  const draw = () => {
    const q = main.querySelector("#cat-search").value.trim().toLowerCase();
    const paths = Object.keys(byPath).sort().filter((p) => !q || p.toLowerCase().includes(q));
    main.querySelector("#cat-count").textContent = `${paths.length} path(s)`;
    body.innerHTML = paths.map((p) => {
      const versions = byPath[p].sort((x, y) => y.version - x.version);
      const run = versions[0].kind === "playbook" ? `<a href="#/executions?run=${encodeURIComponent(p)}">Run</a>` : "";
      return `<tr class="row" data-path="${esc(p)}"><td><a href="#/catalog/${encodeURIComponent(p)}">${esc(p)}</a></td><td>${esc(versions[0].kind)}</td>
        <td>${versions.map((v) => "v" + v.version).join(" ")}</td><td>${esc(when(versions[0].created_at))}</td>
        <td>${esc(versions[0].findings_count)}</td><td>${run}</td></tr>`;
    }).join("");
  };
  main.querySelector("#cat-search").addEventListener("input", draw);
  draw();
}
