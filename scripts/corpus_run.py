"""Run every NoETL playbook of a corpus that needs no outside service, and compare the outcome
with the one NoETL gives it.

    python scripts/corpus_run.py [--shared DIR] [--json OUT] [--only SUBSTRING] [--jobs N]

For each YAML file whose root `kind` is a playbook (`Playbook`, or none):

1. *Needs an outside service?* (then skipped, with the reason) — by these rules:
   a tool kind that needs a plugin (`snowflake`, `gcs`, ...) or that nothing installed
   provides; an `http(s)://` URL whose host is not this machine; a credential other than a
   PostgreSQL or NATS one (those are served by the local PostgreSQL and NATS: the runner gives
   every PostgreSQL-looking credential name the local DSN and every NATS-looking one the local
   URL); a shell command whose program is not installed, or is the client of a cluster, daemon
   or cloud account (kubectl, docker, gcloud, helm, psql, ...); python code importing a
   module that is not installed; a `kind: playbook` child that is neither a file nor a catalog path of the
   same corpus (also when a child named at run time turns out to be missing), a database
   file whose tables another playbook creates when that one needs an outside service (a run
   that fails on a missing table other playbooks create runs again after the first of them
   that runs here made it, on the same database; skipped when none runs here), or a
   script file that is not in the corpus; a child playbook (named in the file) that needs any of
   these. NoETL's e2e test server (`http://paginated-api...`) is not outside: its URLs are
   pointed at a loopback stand-in (`tests/standin_api.py`) started for the run. A playbook that
   another playbook of the corpus runs as its child counts through a parent that runs (passed
   when one that runs it passed; its tables and inputs come from the parent); when no parent
   runs (each skipped or rejected, each named with its reason) it runs on its own.
2. *Compiled*: `noetlc check`; legacy files that do not check are put through `noetlc
   migrate` first (in a copy of the corpus: the shared data is never written). A file that
   still has errors is reported as rejected by the compiler, with its first error.
3. *Run*: `noetl-vm run FILE --json --db memory:` (a time limit per run: 90 s, or the longest
   `timeout:` the playbook or a child declares, up to 300 s, NoETL's regression default),
   each concurrent run on a PostgreSQL database of its own, from the file's own
   folder, with the local credentials. The expected outcome is the one NoETL's regression
   configuration (`noetl_e2e_playbook_test_config.yaml`) states — `execution_status` and the
   `result_checks` of `step_validations` — else `completed` (a playbook it gives a
   `requires_setup` runs after that setup playbook of its folder, on the same database; one
   whose setup is not there and that fails without it is skipped), except where NoETL's
   current engine gives another outcome (`NOETL_OUTCOMES`, each with its reason read in
   NoETL's source: a playbook that fails there and here is a match); files under
   `broken_playbooks/`
   (to be rejected), files named broken/should_fail/should_error (to fail) and those the
   configuration expects to fail are written to fail.
4. *Again, alone*: a run that failed (not one cut at its time limit) is run once more after
   the others, with nothing beside it. Some playbooks measure timing — that requests overlap,
   that an answer comes within a deadline — and a second run on a loaded machine can starve
   them; the row says when only the second run passed, with the first run's error.

Prints one line per file and the totals (a failure listed in `KNOWN_DIFFERENCES` is printed
with the reason it is not NoETL's outcome yet); `--json` writes every row. Exit status 0 always
(this is a report); the test `tests/tools/test_corpus_runs.py` asserts on the rows.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SHARED = REPO.parent / "shared"
# corpus folder (relative to the shared folder) -> the prefix NoETL's configuration paths drop
ROOTS = {
    "corpus/noetl": None,
    "noetl-e2e/e2e": "",
    "noetl-e2e/noetl": "tests/",
    "noetl-e2e/noetl@3d6c7cca": "tests/",
    "noetl-e2e/noetl@de0c1f73": "tests/",
}
CONFIG = "corpus/noetl/noetl_e2e_playbook_test_config.yaml"
LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1", "[::1]"}
PG_NAME = re.compile(r"(^|_)(pg|postgres|postgresql|psql)(_|$)|^pg|postgres", re.IGNORECASE)
NATS_NAME = re.compile(r"nats", re.IGNORECASE)
URL = re.compile(r"\bhttps?://([^/\s:'\"{}()<>,]+)")
TEMPLATE = re.compile(r"{{|{%")
# python code that raises depending on a random draw (written to fail some of the time)
CHANCE = re.compile(r"random\.(random|randint|choice)\(.*\n(?:.*\n){0,6}?\s*raise\b")
TEMPLATE_SPAN = re.compile(r"{{.*?}}|{%.*?%}")
WRITTEN_TO_FAIL = re.compile(r"broken|should_fail|should_error|expect_fail", re.IGNORECASE)
RUN_TIMEOUT = 90.0
# the most a playbook's own timeouts may raise its limit to: NoETL's regression default
MAX_TIMEOUT = 300.0
DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
DURATIONS = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h))+")
SHELL_BUILTINS = {
    "echo", "cd", "set", "export", "exit", "true", "false", "test", "[", "if", "then", "else",
    "fi", "for", "do", "done", "while", "case", "esac", "printf", "read", "local", "return",
    "source", ".", "eval", "exec", "shift", "unset", "trap", "wait", "sleep", "cat", "ls",
    "pwd", "mkdir", "rm", "cp", "mv", "touch", "grep", "sed", "awk", "head", "tail", "wc",
    "sort", "uniq", "date", "env", "which", "command", "type", "function", "{", "}", "elif",
    "until", "break", "continue", "let", "declare", "readonly", "time", "tr", "cut", "xargs",
    "tee", "basename", "dirname", "find", "seq",
}  # fmt: skip


# What NoETL's engine (the current one; for an older form, the one of its time) does with a file
# where that is not what its configuration or its name says, read in NoETL's source
# (noetl/noetl, the module named): the run is compared with this outcome (a playbook that
# fails on NoETL and fails here is a match).
NOETL_OUTCOMES: dict[str, tuple[str, str]] = {
    "corpus/noetl/v10__pagination__pipeline__test_pipeline_error_handling.yaml": (
        "failed",
        "NoETL's task sequence gives every error result of the http tool `error.kind: "
        "tool_error` (its http executor sets no `error_kind`: noetl/tools/http/executor.py, "
        "noetl/worker/task_sequence_executor.py), so the `server_error` retry rule of "
        "test_retry_transient never matches and its `output.status == 'error'` rule fails the "
        "step on the flaky endpoint's first 500: the execution fails there, here too",
    ),
    "corpus/noetl/v2case__pagination__pipeline__test_pipeline_error_handling.yaml": (
        "failed",
        "the engine of its time (noetl/noetl 3d6c7cca, noetl/worker/pipeline_executor.py) "
        "classifies a pipe task's error from the tool result's top-level `status_code`, which "
        "the http tool's error result does not have (it is in `data`), so `_err.kind` is "
        "`connection` (noetl/core/errors.py, classify_connection_error), never `server_error`: "
        "test_retry_transient's `else: do: fail` fails the pipe on the flaky endpoint's first "
        "500, and a failed pipe returns without its `finally` (only a pipe that succeeds hands "
        "`finally` on): the step and the execution fail, here too (`_err.kind` is "
        "`tool_error` here)",
    ),
    "corpus/noetl/v2case__pagination__basic__test_pagination_basic.yaml": (
        "failed",
        "after a `case` pagination with `collect`, NoETL's engine keeps the last call's result as "
        "the step's and adds `_pagination` and `_all_collected_items` to it (noetl/noetl "
        "3d6c7cca noetl/core/dsl/v2/engine.py, and noetl/core/dsl/engine/executor/events.py "
        "now); the last call's result is the http envelope, so validate_results takes its "
        "`data` branch (the last page's body, 2 keys) and its `len(data) == 35` assertion "
        "fails, here too",
    ),
    "noetl-e2e/noetl@de0c1f73/tests/fixtures/playbooks/pagination/loop_with_pagination/"
    "test_loop_with_pagination.yaml": (
        "failed",
        "fetch_page's python task reads `{{ fetch_page.fetch }}`, its own step by name before "
        "that step has a result: NoETL's task sequence renders a task with the earlier tasks' "
        "results by their names (`fetch`) over the execution's context, where `fetch_page` is "
        "not yet (noetl/worker/task_sequence_executor.py, `render_ctx.update(ctx.results)`), so "
        "the task fails there on the first page as it does here",
    ),
}
# Files whose outcome here is not NoETL's, and why (gaps and deliberate refusals): still
# counted as failed, the reason printed beside the error.
KNOWN_DIFFERENCES: dict[str, str] = {
    "noetl-e2e/e2e/fixtures/playbooks/pagination/fetch_load_test/test_fetch_load.yaml": (
        "a load test: 500 patients at 5 in flight, each call answered after 2-4 s, is past the "
        "runner's time limit. Its policy `set:` reads `output.data.meta.page` after an http "
        "task (the body is `output.data.data`): the value keeps its template's text, as NoETL "
        "does (noetl/worker/task_sequence_executor.py, `set` rendering), so each patient "
        "stops after page 1 on both"
    ),
    "corpus/noetl/v10__pft_flow_test__test_pft_flow_v2.yaml": (
        "a load test: 10 facilities x 1,000 patients x 5 data types, each patient one "
        "single-record HTTP call and one PostgreSQL write, one at a time (its own "
        "`max_in_flight: 1`, `row_concurrency: 1`), plus the MDS detail calls: over 50,000 "
        "calls, past the runner's time limit (300 s at most) on any engine"
    ),
}


@dataclass
class Row:
    file: str
    dialect: str
    expected: str = "completed"
    expected_checks: list[dict[str, Any]] = field(default_factory=list)
    setup: str | None = None  # NoETL's `requires_setup`: a playbook of its folder run first
    written_to_fail: bool = False
    outcome: str = ""  # skipped | rejected | passed | failed
    reason: str = ""
    status: str | None = None
    migrated: bool = False
    error: str | None = None
    chance: bool = False  # its python code fails at random: completed and failed both match
    again: str | None = None  # failed beside other runs, then passed alone: the first error


def load_config(shared: Path) -> dict[str, dict[str, Any]]:
    path = shared / CONFIG
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(p.get("path")): p for p in data.get("playbooks") or [] if p.get("path")}


def corpus_index(shared: Path) -> dict[str, str]:
    """corpus/noetl file name -> its NoETL path (`fixtures/playbooks/...`), from INDEX.md."""
    index = shared / "corpus" / "noetl" / "INDEX.md"
    out: dict[str, str] = {}
    if not index.is_file():
        return out
    for line in index.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].endswith(".yaml") and ":" in cells[2]:
            out[cells[1]] = cells[2].split(":", 1)[1]
    return out


def config_entry(
    rel: str, root: str, config: dict[str, dict[str, Any]], index: dict[str, str]
) -> dict[str, Any] | None:
    prefix = ROOTS[root]
    if prefix is None:
        source = index.get(Path(rel).name)
        if source is None:
            return None
        rel = source
    elif prefix and rel.startswith(prefix):
        rel = rel[len(prefix) :]
    stem = rel[:-5] if rel.endswith(".yaml") else rel
    for key in (stem, str(Path(stem).parent)):
        if key in config:
            return config[key]
    return None


# --------------------------------------------------------------------------- the service rule


def _walk(node: Any, key: str | None = None) -> Any:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, str(k))
        yield key, node
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v, key)
    else:
        yield key, node


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


PY_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.]+))", re.MULTILINE)


def credential_names(doc: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for key, value in _walk(doc):
        literal = isinstance(value, str) and not TEMPLATE.search(value) and "://" not in value
        if key in ("auth", "credential", "connection") and literal:
            names.add(value)
        if isinstance(value, dict):
            if value.get("source") == "credential" and isinstance(value.get("key"), str):
                names.add(value["key"])
            if value.get("kind") == "secrets":  # the entry is `key:`, else the task's name
                entry = value.get("key") or value.get("secret") or value.get("name")
                if isinstance(entry, str) and not TEMPLATE.search(entry):
                    names.add(entry)
    workload = doc.get("workload") if isinstance(doc.get("workload"), dict) else {}
    for key, value in (workload or {}).items():
        lowered = str(key).lower()
        named = "auth" in lowered or "credential" in lowered
        literal = isinstance(value, str) and not TEMPLATE.search(value) and "://" not in value
        if named and literal and value:
            names.add(value)
    for entry in doc.get("keychain") or []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            names.add(entry["name"])
    return {n for n in names if n and not n.startswith("{")}


def local_credentials(
    names: set[str], pg_dsn: str, nats_url: str
) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    outside: list[str] = []
    for name in sorted(names):
        var = "NOETL_KEYCHAIN_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()
        if NATS_NAME.search(name):
            env[var] = json.dumps({"url": nats_url})
        elif PG_NAME.search(name):
            env[var] = pg_dsn
        else:
            outside.append(name)
    return env, outside


def outside_services(
    doc: dict[str, Any], text: str, path: Path, catalog: dict[str, Path]
) -> list[str]:
    from noetlc.stdlib_tools.kinds import lookup

    reasons: list[str] = []
    for host in sorted({m.group(1).lower() for m in URL.finditer(text)}):
        if host in LOCAL_HOSTS or TEMPLATE.search(host):
            continue
        if re.fullmatch(r"[\w.-]+", host):
            reasons.append(f"HTTP host {host}")
        else:
            reasons.append("an HTTP host computed at run time")
    for key, node in _walk(doc):
        if not isinstance(node, dict) or not isinstance(node.get("kind"), str):
            continue
        if key in ("keychain",) or node is doc:
            continue
        kind = node["kind"]
        record = lookup(kind)
        if record is not None and record.plugin is not None:
            reasons.append(f"tool kind {kind} ({record.summary})")
        elif (
            record is None
            and kind not in ("Playbook", "playbook")
            and ("code" in node or "command" in node or "args" in node or key in (None, "tool"))
        ):
            reasons.append(f"tool kind {kind} (not provided by any installed tool)")
        if kind == "shell":
            for program in _programs(node, path.parent):
                what = "a service client" if program in SERVICE_PROGRAMS else "not installed"
                reasons.append(f"program {program} ({what})")
        if kind == "python" and isinstance(node.get("code"), str):
            for m in PY_IMPORT.finditer(node["code"]):
                module = m.group(1) or m.group(2)
                if not _installed(module):
                    reasons.append(f"python module {module} (not installed)")
        if kind == "python" and isinstance(node.get("libs"), dict):
            for spec in node["libs"].values():
                module = spec.get("from") if isinstance(spec, dict) else spec
                if isinstance(module, str) and not _installed(module):
                    reasons.append(f"python module {module} (not installed)")
        if kind == "playbook":
            target = node.get("path") or node.get("playbook")
            literal = isinstance(target, str) and not TEMPLATE.search(target)
            if literal and _child(path.parent, str(target), catalog) is None:
                reasons.append(f"child playbook {target} (not in this corpus)")
    return list(dict.fromkeys(reasons))


# programs that are clients of a service (a cluster, a daemon, a cloud account; database
# clients connect to the server the command line names, not to the runner's credentials)
SERVICE_PROGRAMS = {
    "kubectl", "helm", "kind", "docker", "docker-compose", "podman", "gcloud", "gsutil", "bq",
    "aws", "az", "terraform", "minikube", "skaffold", "kustomize", "noetl", "gh", "ssh", "scp",
    "psql", "pg_isready", "pg_dump", "pg_restore", "createdb", "dropdb", "mysql", "redis-cli",
}  # fmt: skip
HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


def _programs(node: dict[str, Any], folder: Path) -> list[str]:
    """The programs a shell task runs: the first word of each command (heredoc bodies,
    continuation lines and templates left out); a relative path must exist."""
    lines: list[str] = []
    for key in ("command", "cmd", "cmds", "commands"):
        value = node.get(key)
        for item in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if isinstance(item, str):
                lines.extend(TEMPLATE_SPAN.sub("X", item).splitlines())
    out = []
    ending: str | None = None
    continued = False
    for line in lines:
        if ending is not None:
            if line.strip() == ending:
                ending = None
            continue
        skip, continued = continued, line.rstrip().endswith("\\")
        heredoc = HEREDOC.search(line)
        if heredoc is not None:
            ending = heredoc.group(1)
        if skip:
            continue
        for part in re.split(r"&&|\|\||;|\||\$\(|`", line):
            words = part.strip().split()
            while words and ("=" in words[0] or words[0] in ("sudo", "then", "do", "else", "!")):
                words = words[1:]
            if not words:
                continue
            word = words[0].strip("()")
            if word.startswith(("./", "../")) or (word.startswith("/") and "/" in word[1:]):
                if not (folder / word).exists():
                    out.append(word)
                continue
            if word in SHELL_BUILTINS or not re.fullmatch(r"[a-z][\w.+-]*", word):
                continue
            if word in SERVICE_PROGRAMS or shutil.which(word) is None:
                out.append(word)
    return list(dict.fromkeys(out))


def catalog_of(root: Path) -> dict[str, Path]:
    """`metadata.path` -> file, for every playbook under `root` (NoETL's catalog names)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.yaml")):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError, OSError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
            name = doc["metadata"].get("path")
            if isinstance(name, str):
                out.setdefault(name, path)
        out.setdefault(str(path.relative_to(root)).removesuffix(".yaml"), path)
    return out


def _child(folder: Path, target: str, catalog: dict[str, Path]) -> Path | None:
    for suffix in ("", ".yaml", ".yml"):
        candidate = folder / f"{target}{suffix}"
        if candidate.is_file():
            return candidate
    return catalog.get(target.removesuffix(".yaml"))


# --------------------------------------------------------------------------- running


def _bin(name: str) -> str:
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def _compile(path: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [_bin("noetlc"), "check", str(path), "--format", "json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return [{"code": "CRASH", "message": (done.stderr or done.stdout)[-300:]}]
    return [d for d in report.get("diagnostics", []) if d.get("severity") == "error"]


def _migrate(path: Path, env: dict[str, str]) -> bool:
    done = subprocess.run(
        [_bin("noetlc"), "migrate", str(path), "-i"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    return done.returncode == 0


def check_results(summary: dict[str, Any], checks: list[dict[str, Any]]) -> list[str]:
    """NoETL's `step_validations` result checks against our summary's step results."""
    problems = []
    steps = summary.get("steps") or {}
    for check in checks:
        step = steps.get(check["step"]) or {}
        if check["field"] == "status" and check["value"] == "success":
            # NoETL's result envelope: the step succeeded (its own `status`, not the result's)
            if step.get("status") != "done":
                problems.append(f"{check['step']} did not succeed")
            continue
        value: Any = step.get("result")
        for part in str(check["field"]).split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value != check["value"]:
            problems.append(
                f"{check['step']}.{check['field']} = {value!r}, expected {check['value']!r}"
            )
    return problems


def declared_timeout(doc: Any) -> float:
    """The longest `timeout:` the playbook declares (a tool's or a step's, in seconds or a
    duration string): a playbook that gives a call 20 minutes is not cut at the default."""
    longest = 0.0
    for key, value in _walk(doc):
        if key != "timeout":
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            longest = max(longest, float(value))
        elif isinstance(value, str) and DURATIONS.fullmatch(value.replace(" ", "")):
            unit = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
            total = sum(float(n) * unit[u] for n, u in DURATION.findall(value))
            longest = max(longest, total)
    return longest


def time_limit(doc: Any) -> float:
    """RUN_TIMEOUT, raised to the playbook's own longest timeout up to MAX_TIMEOUT."""
    return max(RUN_TIMEOUT, min(declared_timeout(doc), MAX_TIMEOUT))


def run_one(path: Path, row: Row, env: dict[str, str], limit: float | None = None) -> None:
    limit = RUN_TIMEOUT if limit is None else limit
    try:
        done = subprocess.run(
            [_bin("noetl-vm"), "run", str(path), "--json", "--quiet", "--db", "memory:"],
            capture_output=True, text=True, env=env, cwd=path.parent, timeout=limit,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        row.status, row.outcome = "timeout", "failed"
        row.error = f"did not finish within {limit:g} s"
        return
    lines = done.stdout.strip().splitlines()
    try:
        summary = json.loads(lines[-1])
    except (IndexError, ValueError):
        row.status, row.outcome = "crash", "failed"
        row.error = (
            f"exit {done.returncode}, {len(done.stdout)} bytes of output without a summary "
            f"line; stderr: {done.stderr[-300:]!r}"
        )
        return
    row.status = summary.get("status")
    err = summary.get("error")
    row.error = (err.get("message") if isinstance(err, dict) else err) or None
    if row.error and isinstance(err, dict) and err.get("step"):
        row.error = f"step {err['step']}: {row.error}"
    if row.status != "completed" and "no playbook file" in (row.error or ""):
        # a child named only at run time (a workload value) that is not in this corpus
        row.outcome = "skipped"
        row.reason = "child playbook (named at run time) not in this corpus: " + str(row.error)
        return
    if row.status != "completed" and "cannot read the script" in (row.error or ""):
        row.outcome = "skipped"
        row.reason = "a script file that is not in this corpus: " + str(row.error)
        return
    problems = check_results(summary, row.expected_checks) if row.status == "completed" else []
    if row.status == row.expected and not problems:
        row.outcome = "passed"
    elif row.chance and row.status in ("completed", "failed") and not problems:
        row.outcome, row.reason = "passed", f"{row.status} (its code fails at random)"
    else:
        row.outcome = "failed"
        if problems:
            row.error = "; ".join(problems)


def collect(
    shared: Path, work: Path, only: str | None, standin: str | None = None
) -> list[tuple[Path, Row]]:
    """The playbooks of the corpus (copied into `work`), with NoETL's expectations; the URLs
    of NoETL's e2e test server point at the loopback stand-in `standin`."""
    config = load_config(shared)
    index = corpus_index(shared)
    items: list[tuple[Path, Row]] = []
    for root in ROOTS:
        source = shared / root
        if not source.is_dir():
            continue
        copy = work / root
        shutil.copytree(source, copy)
        for path in sorted(copy.rglob("*.yaml")):
            if standin is not None:
                from tests.standin_api import point_urls

                text = path.read_text(encoding="utf-8")
                pointed = point_urls(text, standin)
                if pointed != text:
                    path.write_text(pointed, encoding="utf-8")
            rel = str(path.relative_to(copy))
            if path.name == "noetl_e2e_playbook_test_config.yaml":
                continue
            if only and only not in f"{root}/{rel}":
                continue
            try:
                doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            except yaml.YAMLError:
                doc = None
            if not isinstance(doc, dict) or doc.get("kind") not in (None, "Playbook", "playbook"):
                continue
            if "workflow" not in doc:
                continue
            legacy = "@" in root or Path(rel).name.startswith("v2case__")
            row = Row(file=f"{root}/{rel}", dialect="legacy" if legacy else "canonical")
            entry = config_entry(rel, root, config, index)
            if entry is not None:
                setup = entry.get("requires_setup")
                if isinstance(setup, str) and setup:
                    row.setup = str(Path(_config_path(config, setup) or setup).name) + ".yaml"
                validation = entry.get("validation") or {}
                row.expected = str(validation.get("execution_status") or "completed")
                for step, spec in (validation.get("step_validations") or {}).items():
                    for check in (spec or {}).get("result_checks") or []:
                        row.expected_checks.append({"step": step, **check})
            if "broken_playbooks" in rel:
                row.expected = "rejected"
            elif WRITTEN_TO_FAIL.search(Path(rel).name) and row.expected == "completed":
                row.expected = "failed"
            noetl = NOETL_OUTCOMES.get(row.file)
            if noetl is not None:
                row.expected = noetl[0]
            row.written_to_fail = row.expected != "completed"
            items.append((path, row))
    return items


def _config_path(config: dict[str, dict[str, Any]], name: str) -> str | None:
    """The path NoETL's configuration gives the playbook named `name` (its `name:`)."""
    for entry in config.values():
        if entry.get("name") == name:
            return str(entry.get("path"))
    return None


def run_setup(path: Path, row: Row, env: dict[str, str]) -> bool:
    """Run the playbook's setup (NoETL's `requires_setup`, from its folder) first, on the
    same database; False (the row says why) when it does not complete. A setup that is not
    in the folder is not run (`missing_setup` judges the outcome)."""
    if row.setup is None or not (path.parent / row.setup).is_file():
        return True
    setup = path.parent / row.setup
    if _compile(setup, env) and not (_migrate(setup, env) and not _compile(setup, env)):
        row.outcome, row.status = "failed", "setup"
        row.error = f"its setup playbook {row.setup} does not compile"
        return False
    first = Row(file=str(setup), dialect=row.dialect)
    run_one(setup, first, env, time_limit(yaml.safe_load(setup.read_text(encoding="utf-8"))))
    if first.outcome != "passed":
        row.outcome, row.status = "failed", "setup"
        row.error = f"its setup playbook {row.setup}: {first.status}: {first.error}"
        return False
    return True


def children_of_others(
    items: list[tuple[Path, Row]], catalogs: dict[str, dict[str, Path]]
) -> dict[Path, list[str]]:
    """Playbooks another playbook of the same corpus runs as its child (a `kind: playbook`
    path, or a workload value naming a catalog entry) -> those parents: a child counts
    through a parent that runs, and runs on its own when none does."""
    out: dict[Path, list[str]] = {}
    for path, row in items:
        root = next(r for r in ROOTS if row.file.startswith(r + "/"))
        catalog = catalogs.get(root, {})
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            continue
        names: list[str] = []
        for _key, value in _walk(doc):
            if isinstance(value, dict) and value.get("kind") == "playbook":
                target = value.get("path") or value.get("playbook")
                if isinstance(target, str):
                    names.append(target)
        workload = doc.get("workload") if isinstance(doc, dict) else None
        if isinstance(workload, dict):
            names.extend(v for v in workload.values() if isinstance(v, str))
        for name in names:
            child = None if TEMPLATE.search(name) else _child(path.parent, name, catalog)
            if child is not None and child.resolve() != path.resolve():
                parents = out.setdefault(child.resolve(), [])
                if row.file not in parents:
                    parents.append(row.file)
    return out


RAN = ("passed", "failed")


def through_parent(row: Row, parents: list[Row]) -> bool:
    """Count a child through the parents that ran (True), else note why none did (False:
    the child then runs on its own). A child counts as passed when a parent that runs it
    passed, as failed when every parent that ran failed."""
    ran = [p for p in parents if p.outcome in RAN]
    if ran:
        best = next((p for p in ran if p.outcome == "passed"), ran[0])
        row.outcome, row.status = best.outcome, best.status
        row.reason = f"runs as the child of {best.file} ({best.outcome})"
        row.error = None if best.outcome == "passed" else f"its parent failed: {best.error}"
        return True
    row.reason = "; ".join(f"its parent {p.file} does not run ({p.outcome}: "
                           f"{(p.reason or p.error or '')[:120]})" for p in parents)  # fmt: skip
    return False


TABLE_MADE = re.compile(
    r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([\w.\"]+)",
    re.IGNORECASE,
)
TABLE_USED = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+([\w.\"]+)", re.IGNORECASE)


def _tables(pattern: re.Pattern[str], text: str) -> set[str]:
    names = {m.group(1).replace('"', "").lower() for m in pattern.finditer(text)}
    return {n.removeprefix("public.") for n in names}


# table -> the playbooks of the corpus that create it (filled by run_corpus)
TABLE_MAKERS: dict[str, list[str]] = {}
MISSING_TABLE = re.compile(
    r"relation \"([\w.]+)\" does not exist|Table with name ([\w.]+) does not exist"
)


def table_makers(items: list[tuple[Path, Row]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path, row in items:
        for table in _tables(TABLE_MADE, path.read_text(encoding="utf-8")):
            out.setdefault(table, []).append(row.file)
    return out


def missing_table(row: Row) -> tuple[str, list[str]] | None:
    """A run that failed on a missing table which other playbooks of the corpus create: the
    table and those playbooks."""
    found = MISSING_TABLE.search(row.error or "") if row.outcome == "failed" else None
    if found is None:
        return None
    table = (found.group(1) or found.group(2)).lower().removeprefix("public.")
    makers = [f for f in TABLE_MAKERS.get(table, []) if f != row.file]
    return (table, makers) if makers else None


def data_from_elsewhere(
    path: Path, row: Row, env: dict[str, str], limit: float, catalog: dict[str, Path],
    pg_dsn: str, nats_url: str,
) -> None:  # fmt: skip
    """A run that failed on a missing table which other playbooks of the corpus create runs
    again after the first of them that runs here made it, on the same database (NoETL's
    suite runs them in one database, one after another); when none runs here, it is skipped:
    its data comes from them."""
    made = missing_table(row)
    if made is None:
        return
    table, makers = made
    root = next((r for r in ROOTS if row.file.startswith(r + "/")), "")
    makers = sorted(makers, key=lambda f: not f.startswith(root + "/"))  # its own tree first
    base = Path(str(path)[: -len(row.file)])
    why = []
    for maker in makers:
        maker_path = base / maker
        doc, needs = _outside_needs(maker_path, catalog, pg_dsn, nats_url)
        if needs:
            why.append(f"{maker_path.name} needs {', '.join(needs)[:120]}")
            continue
        first = Row(file=maker, dialect=row.dialect)
        if _compile(maker_path, env) and not (
            _migrate(maker_path, env) and not _compile(maker_path, env)
        ):
            why.append(f"{maker_path.name} does not compile")
            continue
        run_one(maker_path, first, env, time_limit(doc))
        if first.outcome != "passed":
            why.append(f"{maker_path.name} {first.status}: {(first.error or '')[:120]}")
            continue
        first_error = row.error
        row.outcome, row.status, row.error = "", None, None
        run_one(path, row, env, limit)
        after = f"run after {maker_path.name} made table {table} (before: {first_error})"
        row.reason = f"{row.reason} ({after})" if row.outcome == "skipped" else after
        return
    row.outcome = "skipped"
    row.reason = f"uses table {table}, made by {Path(makers[0]).name} (another playbook)"
    if why:
        row.reason += ", which does not run here: " + "; ".join(why)


def _outside_needs(
    path: Path, catalog: dict[str, Path], pg_dsn: str, nats_url: str
) -> tuple[Any, list[str]]:
    """Another playbook's document and what it needs that this machine does not have:
    outside services, and credentials no local service stands in for."""
    text = path.read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    needs = outside_services(doc, text, path, catalog)
    needs += [
        f"credential {n}" for n in local_credentials(credential_names(doc), pg_dsn, nats_url)[1]
    ]
    return doc, needs


DB_FILE = re.compile(r"(?<![\w.])(/[\w./-]+\.(?:duckdb|sqlite3?|db))\b")
CREATES = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?TABLE\b", re.IGNORECASE)


def data_producers(
    items: list[tuple[Path, Row]], catalogs: dict[str, dict[str, Path]], pg_dsn: str, nats: str
) -> dict[Path, str]:
    """Playbooks that read a database file (an absolute path) whose tables another playbook
    of the corpus creates -> why they cannot run, when that playbook needs an outside
    service: the data they read is made there."""
    texts = {path: path.read_text(encoding="utf-8") for path, _ in items}
    files = {path: set(DB_FILE.findall(text)) for path, text in texts.items()}
    out: dict[Path, str] = {}
    for reader, _row in items:
        if not files[reader] or CREATES.search(texts[reader]):
            continue
        for writer, row in items:
            shared = files[reader] & files[writer]
            if writer == reader or not shared or not CREATES.search(texts[writer]):
                continue
            root = next(r for r in ROOTS if row.file.startswith(r + "/"))
            doc = yaml.safe_load(texts[writer])
            needs = outside_services(doc, texts[writer], writer, catalogs.get(root, {}))
            needs += local_credentials(credential_names(doc), pg_dsn, nats)[1]
            if needs:
                out[reader.resolve()] = (
                    f"reads {sorted(shared)[0]}, made by {Path(row.file).name}, which needs "
                    + ", ".join(needs)
                )
                break
    return out


def _static_children(doc: Any, path: Path, catalog: dict[str, Path]) -> list[Path]:
    out = []
    for _key, node in _walk(doc):
        if isinstance(node, dict) and node.get("kind") == "playbook":
            target = node.get("path") or node.get("playbook")
            if isinstance(target, str) and not TEMPLATE.search(target):
                child = _child(path.parent, target, catalog)
                if child is not None and child.resolve() != path.resolve():
                    out.append(child)
    return list(dict.fromkeys(out))


def evaluate(
    path: Path,
    row: Row,
    root_copy: Path,
    catalog: dict[str, Path],
    base_env: dict[str, str],
    pg_dsn: str,
    nats_url: str,
) -> Row:
    text = path.read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    reasons = outside_services(doc, text, path, catalog)
    cred_env, outside = local_credentials(credential_names(doc), pg_dsn, nats_url)
    reasons += [f"credential {name}" for name in outside]
    for child in _static_children(doc, path, catalog):  # a child's needs are the parent's too
        _, needs = _outside_needs(child, catalog, pg_dsn, nats_url)
        if needs:
            reasons.append(f"its child {child.name} needs " + ", ".join(needs))
    if reasons:
        row.outcome, row.reason = "skipped", "; ".join(reasons)
        return row
    env = {**base_env, **cred_env}
    row.chance = bool(CHANCE.search(text))
    errors = _compile(path, env)
    if errors and row.dialect == "legacy" and _migrate(path, env):
        row.migrated = True
        errors = _compile(path, env)
    if errors:
        first = errors[0]
        where = f"{first.get('line')}:{first.get('column')}" if first.get("line") else ""
        row.error = f"{first.get('code')} {where} {first.get('message')}".strip()
        row.outcome = "passed" if row.expected == "rejected" else "rejected"
        row.status = "rejected"
        return row
    if row.expected == "rejected":
        row.outcome, row.status = "failed", "accepted"
        row.error = "written to be rejected, but it checks clean"
        return row
    limit = max([time_limit(doc)] + [time_limit(yaml.safe_load(c.read_text(encoding="utf-8")))
                                      for c in _static_children(doc, path, catalog)])  # fmt: skip
    if run_setup(path, row, env):
        run_one(path, row, env, limit)
        data_from_elsewhere(path, row, env, limit, catalog, pg_dsn, nats_url)
        if row.setup and row.outcome == "failed" and not (path.parent / row.setup).is_file():
            row.outcome = "skipped"  # it ran without the setup NoETL gives it, and failed
            row.reason = f"needs its setup playbook {row.setup} (NoETL's requires_setup), "
            row.reason += f"not in its folder: {row.error}"
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--only", default=None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per run (90; a playbook's own timeouts raise it, up to 300)",
    )
    args = parser.parse_args(argv)
    if args.timeout is not None:
        global RUN_TIMEOUT
        RUN_TIMEOUT = args.timeout
    rows = run_corpus(args.shared, only=args.only, jobs=args.jobs)
    known = 0
    for row in rows:
        detail = row.reason if row.outcome == "skipped" else (row.error or "")
        mark = " (written to fail)" if row.written_to_fail else ""
        if row.file in NOETL_OUTCOMES:
            mark = f" (NoETL: {NOETL_OUTCOMES[row.file][0]})"
        if row.outcome in ("failed", "rejected") and row.file in KNOWN_DIFFERENCES:
            known += 1
            detail = f"{detail[:120]} [known: {KNOWN_DIFFERENCES[row.file][:200]}]"
        if row.again:
            detail = f"passed when run again alone; beside other runs: {row.again[:200]}"
        print(f"{row.outcome:8} {row.file}{mark}  {detail[:360]}")
    totals: dict[str, int] = {}
    for row in rows:
        totals[row.outcome] = totals.get(row.outcome, 0) + 1
    print(
        "totals: "
        + ", ".join(f"{k} {v}" for k, v in sorted(totals.items()))
        + (f" ({known} of them known differences, listed in KNOWN_DIFFERENCES)" if known else "")
    )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


def own_databases(pg_dsn: str, count: int) -> list[str]:
    """One PostgreSQL database per concurrent run (`createdb`), so that two playbooks running
    at the same time never see each other's tables (many create and drop the same names).
    The shared DSN when they cannot be created."""
    url = urllib.parse.urlsplit(pg_dsn)
    createdb = shutil.which("createdb")
    if url.scheme not in ("postgres", "postgresql") or createdb is None:
        return [pg_dsn] * count
    where = ["-h", url.hostname or "127.0.0.1", "-p", str(url.port or 5432)]
    where += ["-U", urllib.parse.unquote(url.username or "postgres")]
    out = []
    for k in range(count):
        name = f"noetl_corpus_{os.getpid()}_{k}"
        done = subprocess.run([createdb, *where, name], capture_output=True, text=True)
        if done.returncode != 0:
            _drop_databases(pg_dsn, out)
            return [pg_dsn] * count
        out.append(url._replace(path="/" + name).geturl())
    return out


def _drop_databases(pg_dsn: str, dsns: list[str]) -> None:
    url = urllib.parse.urlsplit(pg_dsn)
    dropdb = shutil.which("dropdb")
    if dropdb is None:
        return
    where = ["-h", url.hostname or "127.0.0.1", "-p", str(url.port or 5432)]
    where += ["-U", urllib.parse.unquote(url.username or "postgres")]
    for dsn in dsns:
        name = urllib.parse.urlsplit(dsn).path.lstrip("/")
        if dsn != pg_dsn:
            subprocess.run([dropdb, *where, "--force", name], capture_output=True, text=True)


def _with_database(dsns: queue.Queue[str], path: Path, row: Row, *rest: Any) -> Row:
    """`evaluate` with a database of its own for the time of the run."""
    dsn = dsns.get()
    try:
        return evaluate(path, row, *rest[:3], dsn, rest[3])
    finally:
        dsns.put(dsn)


def run_corpus(shared: Path, *, only: str | None = None, jobs: int = 2) -> list[Row]:
    from tests.standin_api import serve

    with serve() as (standin, _state):
        return _run_corpus(shared, only, jobs, standin)


def _run_corpus(shared: Path, only: str | None, jobs: int, standin: str) -> list[Row]:
    pg_dsn = os.environ.get("NOETLC_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
    nats_url = os.environ.get("NOETLC_TEST_NATS_URL", "nats://127.0.0.1:4222")
    with tempfile.TemporaryDirectory(prefix="noetl-corpus-") as tmp:
        work = Path(tmp)
        items = collect(shared, work, only, standin)
        catalogs = {root: catalog_of(work / root) for root in ROOTS if (work / root).is_dir()}
        parents = children_of_others(items, catalogs)
        producers = data_producers(items, catalogs, pg_dsn, nats_url)
        TABLE_MAKERS.clear()
        TABLE_MAKERS.update(table_makers(items))
        home = work / "home"
        home.mkdir()
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("NOETL_KEYCHAIN_")}
        base_env["NOETL_PLAYBOOK_PATH"] = ""
        rows: list[Row] = []
        databases = own_databases(pg_dsn, max(1, jobs))
        dsns: queue.Queue[str] = queue.Queue()
        for dsn in databases:
            dsns.put(dsn)
        by_file = {row.file: row for _, row in items}
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:

            def submit(path: Path, row: Row) -> concurrent.futures.Future[Row]:
                root = next(r for r in ROOTS if row.file.startswith(r + "/"))
                env = {**base_env, "NOETL_PLAYBOOK_PATH": str(work / root)}
                return pool.submit(
                    _with_database,
                    dsns,
                    path,
                    row,
                    work / root,
                    catalogs.get(root, {}),
                    env,
                    nats_url,
                )

            futures = []
            children: list[tuple[Path, Row]] = []
            for path, row in items:
                if path.resolve() in producers:
                    row.outcome, row.reason = "skipped", producers[path.resolve()]
                    rows.append(row)
                elif path.resolve() in parents and row.expected == "completed":
                    children.append((path, row))
                else:
                    futures.append(submit(path, row))
            try:
                for future in futures:
                    rows.append(future.result())
                # A playbook that measures timing (overlapping requests, a deadline) can fail
                # while another run loads the machine: a failure is tried once more alone, and
                # a pass then is reported as such, with the first error.
                paths = {row.file: path for path, row in items}
                for row in [r for r in rows if r.outcome == "failed" and r.status != "timeout"]:
                    first = row.error
                    submit(paths[row.file], row).result()
                    if row.outcome == "passed":
                        row.again = first or row.status or "failed"
                # children after their parents (a child's parent may be a child too)
                while children:
                    ready = [
                        (path, row)
                        for path, row in children
                        if all(by_file[p].outcome for p in parents[path.resolve()])
                    ] or children  # a cycle of children: the rest run on their own
                    alone = []
                    for path, row in ready:
                        children.remove((path, row))
                        family = [by_file[p] for p in parents[path.resolve()]]
                        if through_parent(row, family):
                            rows.append(row)
                        else:
                            alone.append((path, row, row.reason))
                    for path, row, why in alone:
                        done = submit(path, row).result()
                        done.reason = f"{why}; run on its own: {done.reason}".rstrip(": ")
                        rows.append(done)
            finally:
                _drop_databases(pg_dsn, databases)
    order = {row.file: i for i, (_, row) in enumerate(items)}
    return sorted(rows, key=lambda row: order[row.file])


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
