// The noetlc console: ES modules, no build step, nothing fetched from elsewhere.
// Views (hash routes): #/executions, #/execution/ID, #/catalog, #/catalog/PATH.
import { esc, state } from "./api.js";
import { executionsView } from "./executions.js";
import { executionView } from "./execution.js";
import { catalogView } from "./catalog.js";

const main = document.getElementById("main");
let cleanup = [];

document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  state.token = document.getElementById("token-input").value.trim();
  localStorage.setItem("noetl-token", state.token);
  document.getElementById("token-box").hidden = true;
  route();
});

async function route() {
  cleanup.forEach((fn) => fn());
  cleanup = [];
  const hash = location.hash || "#/executions";
  const [path, query] = hash.split("?");
  const [, view, rest] = path.match(/^#\/([^/]*)\/?(.*)$/) || [null, "executions", ""];
  const params = new URLSearchParams(query || "");
  document.getElementById("nav-executions").className = view.startsWith("execution") ? "active" : "";
  document.getElementById("nav-catalog").className = view === "catalog" ? "active" : "";
  const onLeave = (fn) => cleanup.push(fn);
  try {
    if (view === "execution") await executionView(main, decodeURIComponent(rest), onLeave);
    else if (view === "catalog") await catalogView(main, rest ? decodeURIComponent(rest) : "", params);
    else await executionsView(main, params, onLeave);
  } catch (err) {
    main.innerHTML = `<p class="error">${esc(err.message || err)}</p>`;
  }
}

window.addEventListener("hashchange", route);
route();
