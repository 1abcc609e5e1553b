// A workload editor: JSON in a textarea, checked as it is typed (the Run button reads it).
import { esc } from "./api.js";

export function workloadEditor(box) {
  box.innerHTML = `<label class="block">Workload (JSON object)
    <textarea id="run-workload" spellcheck="false" rows="4"></textarea></label>
    <div id="workload-note" class="muted"></div>`;
  const area = box.querySelector("textarea");
  const note = box.querySelector("#workload-note");
  const check = () => {
    try {
      const v = area.value.trim() ? JSON.parse(area.value) : {};
      if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("the workload is a JSON object");
      area.classList.remove("invalid");
      note.textContent = "";
      return v;
    } catch (err) {
      area.classList.add("invalid");
      note.innerHTML = `<span class="error">${esc(err.message)}</span>`;
      return null;
    }
  };
  area.addEventListener("input", check);
  return {
    set(value) { area.value = JSON.stringify(value, null, 2); check(); },
    value() {
      const v = check();
      if (v === null) throw new Error("fix the workload first: " + note.textContent);
      return v;
    },
  };
}
