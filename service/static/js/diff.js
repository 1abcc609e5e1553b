// A line diff of two texts (longest common subsequence): rows [op, line] with op "+", "-"
// or " ". Texts too large for the table (over CELLS line pairs) are shown as removed/added.
const CELLS = 4e6;

export function diffLines(before, after) {
  const a = String(before).split("\n"), b = String(after).split("\n");
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length, endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) { endA--; endB--; }
  const head = a.slice(0, start).map((l) => [" ", l]), tail = a.slice(endA).map((l) => [" ", l]);
  const x = a.slice(start, endA), y = b.slice(start, endB);
  if (x.length * y.length > CELLS) return [...head, ...x.map((l) => ["-", l]), ...y.map((l) => ["+", l]), ...tail];
  const n = x.length, m = y.length;
  const table = new Uint32Array((n + 1) * (m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      table[i * (m + 1) + j] = x[i] === y[j] ? table[(i + 1) * (m + 1) + j + 1] + 1
        : Math.max(table[(i + 1) * (m + 1) + j], table[i * (m + 1) + j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([" ", x[i]]); i++; j++; }
    else if (table[(i + 1) * (m + 1) + j] >= table[i * (m + 1) + j + 1]) out.push(["-", x[i++]]);
    else out.push(["+", y[j++]]);
  }
  while (i < n) out.push(["-", x[i++]]);
  while (j < m) out.push(["+", y[j++]]);
  return [...head, ...out, ...tail];
}
