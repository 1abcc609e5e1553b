"""Rendering a result file: the terminal table, the comparison of two runs (markdown), and
docs/performance.md's section (between `<!-- perf:begin -->` and `<!-- perf:end -->`)."""

from __future__ import annotations

from typing import Any

from noetlc.bench.results import key, unmet

BEGIN, END = "<!-- perf:begin -->", "<!-- perf:end -->"
TIME_UNITS = {"ns", "µs", "ms", "s"}


class ReadmeError(Exception):
    pass


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if unit == "×":
        return f"{value:.2f}"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if magnitude >= 0.01 else f"{value:.2g}"


def reading(figure: dict[str, Any]) -> str:
    """The ratio in words: how ours compares with the comparison, in the good direction."""
    ratio = figure.get("ratio")
    if not ratio:
        return ""
    timed = figure["unit"] in TIME_UNITS
    if figure["better"] == "lower":
        if ratio <= 1:
            return f"{1 / ratio:.3g}× {'faster' if timed else 'lower'}"
        return f"{ratio:.3g}× {'slower' if timed else 'higher'}"
    if ratio >= 1:
        return f"{ratio:.3g}× higher"
    return f"{1 / ratio:.3g}× lower"


def target_cell(figure: dict[str, Any]) -> str:
    goal = figure.get("target")
    if not goal:
        return ""
    mark = {True: "met", False: "NOT MET", None: "n/a"}[figure.get("met")]
    return f"{mark}: {goal['text']}"


def grouped(figures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Figures by group, groups in the order they first appear, figures in run order."""
    order: dict[str, int] = {}
    for f in figures:
        order.setdefault(f["group"], len(order))
    return sorted(figures, key=lambda f: order[f["group"]])


def terminal_table(result: dict[str, Any]) -> str:
    header = (
        "group",
        "figure",
        "value",
        "unit",
        "compared with",
        "theirs",
        "ours/theirs",
        "target",
    )
    rows = [header]
    for f in grouped(result["figures"]):
        rows.append(
            (
                f["group"],
                f["figure"],
                number(f["value"], f["unit"]),
                f["unit"],
                f["against"] or "",
                number(f["against_value"], f["unit"]),
                f"{f['ratio']:.3g} ({reading(f)})" if f.get("ratio") else "",
                target_cell(f),
            )
        )
    widths = [min(max(len(r[i]) for r in rows), 60) for i in range(len(header))]
    lines = ["  ".join(cell[:60].ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.extend(_outcome_lines(result))
    missed = unmet(result)
    if missed:
        lines.append(f"targets not met: {len(missed)}")
        lines.extend(f"  {f['figure']}: {target_cell(f)}" for f in missed)
    return "\n".join(lines)


def _outcome_lines(result: dict[str, Any]) -> list[str]:
    return [f"{o['outcome']}: {o['test']}: {o['reason']}" for o in result.get("outcomes", [])]


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def compare_markdown(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> str:
    """Every figure of either run: its value in A and B, B/A and whether B is better."""
    old = {key(f): f for f in a["figures"]}
    new = {key(f): f for f in b["figures"]}
    lines = [
        f"| group | figure | unit | A: {_md(names[0])} | B: {_md(names[1])} | B/A | change |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for k in [*old, *(k for k in new if k not in old)]:
        fa, fb = old.get(k), new.get(k)
        f = fb or fa
        assert f is not None
        va = fa["value"] if fa else None
        vb = fb["value"] if fb else None
        if va and vb is not None:
            change = vb / va
            better = change < 1 if f["better"] == "lower" else change > 1
            verdict = "same (±5%)" if abs(change - 1) <= 0.05 else ("better" if better else "worse")
            cells = (f"{change:.3f}", verdict)
        else:
            cells = ("–", "only in B" if fa is None else "only in A")
        lines.append(
            f"| {_md(f['group'])} | {_md(f['figure'])} | {f['unit']} | {number(va, f['unit'])} "
            f"| {number(vb, f['unit'])} | {cells[0]} | {cells[1]} |"
        )
    return "\n".join(lines) + "\n"


def machine_line(machine: dict[str, Any]) -> str:
    line = (
        f"{machine.get('cpu', 'unknown CPU')}, {machine.get('cores', '?')} cores, "
        f"{machine.get('memory_gib', '?')} GiB, {machine.get('python', '?')} on "
        f"{machine.get('platform', '?')}"
    )
    if machine.get("load_average_before") is not None:
        line += (
            f" (1-minute load average {machine['load_average_before']} before the run, "
            f"{machine.get('load_average')} after)"
        )
    return line


def readme_section(result: dict[str, Any], source: str) -> str:
    """The generated markdown that goes between the markers."""
    notes: dict[str, int] = {}
    lines = [
        BEGIN,
        "<!-- generated by `python -m bench table`; do not edit by hand -->",
        f"Generated from `{source}`: a run of `{result.get('command', 'python -m bench')}` "
        f"({result.get('started', '?')}, {result.get('duration_s', 0):.0f} s) on "
        f"{machine_line(result.get('machine', {}))}. Every comparison was measured in the "
        "same run; *ours/theirs* is our value divided by the compared one.",
        "",
        "| figure | ours | compared with | theirs | ours/theirs | target |",
        "|---|---:|---|---:|---:|---|",
    ]
    group = None
    for f in grouped(result["figures"]):
        if f["group"] != group:
            group = f["group"]
            lines.append(f"| **{_md(group)}** | | | | | |")
        mark = ""
        if f.get("fair"):
            mark = f" [{notes.setdefault(f['fair'], len(notes) + 1)}]"
        ratio = f"{f['ratio']:.3g} ({reading(f)})" if f.get("ratio") else ""
        lines.append(
            f"| {_md(f['figure'])}{mark} | {number(f['value'], f['unit'])} {f['unit']} "
            f"| {_md(f['against'] or '–')} | {number(f['against_value'], f['unit'])} "
            f"| {ratio} | {_md(target_cell(f))} |"
        )
    if notes:
        lines.append("")
        lines.extend(f"[{n}] {_md(text)}  " for text, n in notes.items())
    lines.extend(_passes_table(result))
    outcomes = result.get("outcomes", [])
    if outcomes:
        lines += ["", "Not measured in this run:", ""]
        lines.extend(f"* `{o['test']}` ({o['outcome']}): {_md(o['reason'])}" for o in outcomes)
    missed = unmet(result)
    lines += ["", f"Targets not met in this run: {len(missed)}."]
    lines.extend(f"* {_md(f['figure'])}: {_md(f['target']['text'])}" for f in missed)
    lines.append(END)
    return "\n".join(lines)


def _passes_table(result: dict[str, Any]) -> list[str]:
    rows = [f for f in result["figures"] if (f.get("detail") or {}).get("passes_ms")]
    if not rows:
        return []
    passes = list(rows[0]["detail"]["passes_ms"])
    lines = [
        "",
        "Compile time per pass (ms):",
        "",
        "| playbook | " + " | ".join(passes) + " |",
        "|---|" + "---:|" * len(passes),
    ]
    for f in rows:
        cells = " | ".join(number(f["detail"]["passes_ms"].get(p)) for p in passes)
        lines.append(f"| {_md(f['figure'].removeprefix('compile '))} | {cells} |")
    return lines


def update_readme(text: str, section: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ReadmeError(f"the README has no {BEGIN} … {END} markers")
    return text[:start] + section + text[end + len(END) :]
