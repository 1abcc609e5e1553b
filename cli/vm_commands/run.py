"""Run a playbook in embedded mode (one process; events in a SQLite file by default).

    noetl-vm run playbook.yaml [--set key=value ...] [--workload FILE] [--db URL] [--json]

A `.yaml` file is compiled first (its diagnostics are printed); a `.nbc` file is loaded. The
execution id is printed on standard error when it starts (on a terminal), and on a terminal a
live progress line follows. `--json` prints the summary as the last line of standard output.
The process owns the execution while it runs: `noetl-vm resume` refuses it until the process
is gone. Exit status: 0 completed, 1 failed, 2 usage errors, 3 cancelled, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING, Any

from noetlc.cli.common import EXIT_CANCELLED, EXIT_ERRORS, EXIT_OK, UsageError
from noetlc.cli.vm_commands.history import DEFAULT_URL, default_db
from noetlc.vm.budgets import NAMES as BUDGET_NAMES

if TYPE_CHECKING:
    from noetlc.ir.program import Program

EXIT_FOR_STATUS = {"completed": EXIT_OK, "failed": EXIT_ERRORS, "cancelled": EXIT_CANCELLED}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        metavar="FILE",
        help="FILE.yaml, FILE.nbc or catalog://PATH[@VERSION] (the catalog of --db)",
    )
    add_workload(p)
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    add_keychain(p)
    p.add_argument(
        "--db",
        default=default_db(),
        metavar="URL",
        help=f"event store: sqlite:///FILE or memory: (default $NOETL_DB, else {DEFAULT_URL})",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the compile cache (also NOETLC_NO_CACHE=1)",
    )


def add_workload(p: argparse.ArgumentParser) -> None:
    """`--set KEY=VALUE` and `--workload FILE` (read by `workload_overrides`)."""
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="workload override (VALUE is JSON, else a string)",
    )
    p.add_argument("--workload", metavar="FILE", help="a JSON or YAML file of workload overrides")
    p.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="NAME=N",
        help=f"an execution budget, one of {', '.join(BUDGET_NAMES)} (0: none)",
    )


def budget_options(args: argparse.Namespace) -> dict[str, int]:
    """`--budget NAME=N` options (raises `UsageError` NOE800 when one is malformed)."""
    from noetlc.vm.budgets import BudgetError, parse_option

    out: dict[str, int] = {}
    for item in getattr(args, "budget", []):
        try:
            name, value = parse_option(item)
        except BudgetError as exc:
            raise UsageError("NOE800", str(exc)) from None
        out[name] = value
    return out


def add_keychain(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keychain",
        metavar="FILE",
        help="a YAML/JSON file of keychain entries (default .noetl/keychain.yaml if present;"
        " NOETL_KEYCHAIN_<NAME> variables win)",
    )


def workload_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The overrides of `--workload FILE` then `--set KEY=VALUE` (raises `UsageError`)."""
    out: dict[str, Any] = {}
    if args.workload:
        from noetlc.diagnostics.yaml_safe import YamlError, read_data_file

        try:
            loaded = read_data_file(args.workload, "workload file")
        except YamlError as exc:  # unreadable, not UTF-8, bad YAML, an alias bomb: located
            raise UsageError(exc.code, str(exc), exc.hint) from None
        if not isinstance(loaded, dict):
            raise UsageError(
                "NOE800",
                f"the workload file {args.workload} must hold a mapping, not {_kind(loaded)}",
                "write `key: value` lines",
            )
        out.update(loaded)
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError("NOE800", f"--set needs KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, an integer too long, too deep
            out[key] = raw
        value = out[key]
        if isinstance(value, float) and not math.isfinite(value):
            warn(f"--set {key}={raw} is {value} (not a finite number)")
    return out


def check_keychain_file(path: str | None) -> None:
    """A `--keychain FILE` that does not exist is a usage error before anything runs."""
    import os

    if path and not os.path.isfile(path):
        raise UsageError("NOE800", f"cannot read the keychain file {path}: no such file")


def warn(message: str) -> None:
    """A warning about the command line (the command goes on)."""
    print(f"warning[NOE830]: {message}", file=sys.stderr)


def warn_undeclared(overrides: dict[str, Any], workload: dict[str, Any] | None) -> None:
    """Overrides of keys the playbook's `workload:` does not declare are probably typos."""
    declared = set(workload or {})
    for key in overrides:
        if key not in declared:
            near = [k for k in sorted(declared) if _close(k, key)]
            hint = f" (did you mean `{near[0]}`?)" if near else ""
            warn(f"the playbook's workload does not declare `{key}`{hint}")


def _close(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.75


def _kind(value: Any) -> str:
    names = {str: "a string", int: "a number", float: "a number", list: "a list", bool: "a boolean"}
    return "nothing" if value is None else names.get(type(value), type(value).__name__)


def announce(execution_id: str, as_json: bool) -> None:
    """The execution id, as soon as it is known, on a terminal's standard error."""
    if not as_json and sys.stderr.isatty():
        print(f"execution {execution_id}", file=sys.stderr, flush=True)


def progress_for(args: argparse.Namespace, total_steps: int) -> Any:
    if args.json or getattr(args, "quiet", False) or not sys.stderr.isatty():
        return None
    from noetlc.runtime.progress import Progress

    return Progress(total_steps)


def write_all(text: str) -> None:
    """Write `text` to standard output completely. After the embedded runtime's event loop
    (uvloop) has run, a large write to a pipe can come back short (64 KiB written, the rest
    silently dropped by `print`), so the bytes are written in a loop until all are out."""
    import os
    import select

    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a captured or replaced stdout
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    view = memoryview(text.encode("utf-8"))
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        view = view[written:]


def report(
    result: dict[str, Any],
    program: Program | None,
    as_json: bool,
    keychain_file: str | None = None,
) -> int:
    """Print the outcome (summary line or a table) and return the exit status."""
    if as_json:
        write_all(json.dumps(result, default=str) + "\n")
    else:
        for name, step in result["steps"].items():
            shown = _short_result(step.get("result"))
            print(f"{step['status'] or '-':<8} {name} (runs {step['runs']}){shown}")
        print(f"execution {result['execution_id']}: {result['status']} ({result['events']} events)")
    error = result.get("error")
    if error and result["status"] != "completed":
        print(failure_text(error, program), file=sys.stderr)
        for line in unset_keychain(program, keychain_file):
            print(line, file=sys.stderr)
    return EXIT_FOR_STATUS.get(result["status"], 1)


def unset_keychain(program: Program | None, keychain_file: str | None) -> list[str]:
    """Notes for the playbook's declared keychain entries that no provider has: templates see
    them undefined, so a failed run may come from one (where to set each, as NOE812 says)."""
    declared = list(program.keychain) if program is not None else []
    if not declared:
        return []
    from noetlc.stdlib_tools.keychain import DEFAULT_FILE, Keychain, KeychainError, env_var

    try:
        chain = Keychain(declared, file=keychain_file)
    except KeychainError:
        return []
    where = keychain_file or DEFAULT_FILE
    return [
        f"  note: keychain entry `{name}` is declared but not set (templates see it undefined):"
        f" set {env_var(name)}, or add `{name}:` to {where}"
        for name in chain.declared
        if not chain.has(name)
    ]


def _short_result(value: Any, limit: int = 72) -> str:
    """A step's result on its line of the table (cut to `limit` characters), or ''."""
    if value is None:
        return ""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return "  " + (text if len(text) <= limit else text[: limit - 3] + "...")


def failure_text(error: dict[str, Any], program: Program | None) -> str:
    """`FILE:LINE:COL: error[CODE]: Type: message`, then where: the task, the step and the
    line of the task's code that raised."""
    where = _step_location(program, error.get("step"), error.get("task"))
    yaml = error.get("yaml")
    if isinstance(yaml, dict) and yaml.get("line"):  # the line that raised
        where = f"{yaml.get('file') or ''}:{yaml['line']}:{yaml.get('column') or 1}"
    prefix = f"{where}: " if where else ""
    kind = error.get("type")
    shown = f"{kind}: " if kind and kind not in ("Cancelled",) else ""
    text = f"{prefix}error[{error['code']}]: {shown}{error['message']}"
    place = []
    if error.get("task"):
        place.append(f"task `{error['task']}`")
    if error.get("step"):
        place.append(f"step `{error['step']}`")
    if place:
        text += "\n  in " + " of ".join(place)
        if error.get("line"):
            code = f": {error['code_line']}" if error.get("code_line") else ""
            text += f", line {error['line']} of its code{code}"
    frames = error.get("traceback")
    if isinstance(frames, list) and len(frames) > 1:  # the task's own frames only
        text += "\n  traceback (the task's code, most recent call last):"
        for frame in frames:
            if isinstance(frame, dict):
                at = frame.get("yaml_line") or frame.get("line")
                text += f"\n    line {at}, in {frame.get('function')}: {frame.get('text') or ''}"
    if error.get("hint"):
        text += f"\n  hint: {error['hint']}"
    return text


def _step_location(program: Program | None, step: Any, task: Any = None) -> str | None:
    """The YAML file:line:column of the failing task (else of its step), through the debug
    map (`Program.position_of`)."""
    if program is None or not isinstance(step, str):
        return None
    found = program.position_of(step, task if isinstance(task, str) else None)
    return None if found is None else f"{found.file}:{found.line}:{found.column}"


def run(args: argparse.Namespace) -> int:
    from noetlc.cli.common import EXIT_INTERRUPTED, loading

    with loading():  # imports, compile or decode, the store: no collection meanwhile
        from noetlc.cli.noetlc_commands.artifacts import load_program
        from noetlc.cli.vm_commands.catalog_ref import catalog_program, is_catalog_ref
        from noetlc.runtime.embedded import run_embedded
        from noetlc.runtime.ids import snowflake
        from noetlc.runtime.ownership import ExecutionLease
        from noetlc.runtime.store_url import open_store

        overrides = workload_overrides(args)
        check_keychain_file(args.keychain)
        if args.db.startswith(("postgresql://", "postgres://")):
            raise UsageError(
                "NOE803",
                "`run` is embedded; a PostgreSQL database runs distributed mode",
                "`noetl-vm submit FILE --db URL --wait` with `noetl-vm server` and"
                " `noetl-vm worker` running, or `run --db sqlite:///.noetl/noetl.db`",
            )
        budgets = budget_options(args)
        from noetlc.cli import compile_cache

        if is_catalog_ref(args.file):
            program = catalog_program(args.file, args.db)
        else:
            program = load_program(args.file, compile_cache.enabled(args.no_cache))
        if program is None:
            return EXIT_ERRORS
        if budgets:
            from noetlc.vm.budgets import spec_with_budgets

            program = program.with_executor_spec(spec_with_budgets(program.executor_spec, budgets))
        warn_undeclared(overrides, program.workload)
        store = open_store(args.db)
    execution_id = snowflake()
    lease = ExecutionLease.for_url(args.db, execution_id)
    try:
        if lease is not None:
            lease.claim()
            lease.fence(store)
        announce(execution_id, args.json)
        progress = progress_for(args, len(program.steps))
        try:
            result = run_embedded(
                program,
                overrides,
                store,
                execution_id=execution_id,
                on_events=progress,
                keychain_file=args.keychain,
            )
        except KeyboardInterrupt:
            print(
                f"\ninterrupted: `noetl-vm resume {execution_id}` finishes the execution",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
        finally:
            if progress is not None:
                progress.close()
        output = None if args.json else failed_output(store, execution_id, result.get("error"))
    finally:
        if lease is not None:
            lease.release()
        store.close()
    code = report(result, program, args.json, args.keychain)
    if output:
        print(output, file=sys.stderr)
    return code


OUTPUT_LINES = 20


def failed_output(store: Any, execution_id: str, error: Any) -> str | None:
    """The end of what the failed step printed (its task log: tasks print nowhere else)."""
    if not isinstance(error, dict) or not error.get("step"):
        return None
    rows = store.read_logs(execution_id, step=str(error["step"]), limit=5000)
    text = "".join(r["text"] for r in rows)
    if not text.strip():
        return None
    lines = text.rstrip("\n").split("\n")
    shown = lines[-OUTPUT_LINES:]
    more = f", its last {len(shown)} of {len(lines)} lines" if len(lines) > len(shown) else ""
    body = "\n".join(f"    {line}" for line in shown)
    return f"  output of step `{error['step']}`{more}:\n{body}"
