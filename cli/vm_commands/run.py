"""Run a playbook in embedded mode (one process; events in a SQLite file by default).

    noetl-vm run playbook.yaml [--set key=value ...] [--workload FILE] [--db URL] [--json]

A `.yaml` file is compiled first (its diagnostics are printed); a `.nbc` file is loaded. On a
terminal a live progress line is drawn on standard error. `--json` prints the summary as the
last line of standard output. Exit status: 0 completed, 1 failed, 2 usage errors, 3 cancelled.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from noetlc.cli.vm_commands.history import open_or_report
from noetlc.runtime.store import DEFAULT_URL

EXIT_FOR_STATUS = {"completed": 0, "failed": 1, "cancelled": 3}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="FILE.yaml or FILE.nbc")
    add_workload(p)
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    add_keychain(p)
    p.add_argument(
        "--db",
        default=DEFAULT_URL,
        metavar="URL",
        help=f"event store: sqlite:///FILE or memory: (default {DEFAULT_URL})",
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


def add_keychain(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keychain",
        metavar="FILE",
        help="a YAML/JSON file of keychain entries (default .noetl/keychain.yaml if present;"
        " NOETL_KEYCHAIN_<NAME> variables win)",
    )


def workload_overrides(args: argparse.Namespace) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    if args.workload:
        import yaml

        try:
            with open(args.workload, encoding="utf-8") as fh:
                loaded = yaml.safe_load(fh)
        except (OSError, yaml.YAMLError) as exc:
            print(
                f"{args.workload}:1:1: error[NOE800]: cannot read the workload file: {exc}",
                file=sys.stderr,
            )
            return None
        if not isinstance(loaded, dict):
            print(
                f"{args.workload}:1:1: error[NOE800]: the workload file must hold a mapping",
                file=sys.stderr,
            )
            return None
        out.update(loaded)
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            print(f"error[NOE800]: --set needs KEY=VALUE, got {item!r}", file=sys.stderr)
            return None
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


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


def report(result: dict[str, Any], payload: dict[str, Any], as_json: bool) -> int:
    """Print the outcome (summary line or a table) and return the exit status."""
    if as_json:
        write_all(json.dumps(result, default=str) + "\n")
    else:
        for name, step in result["steps"].items():
            print(f"{step['status'] or '-':<8} {name} (runs {step['runs']})")
        print(f"execution {result['execution_id']}: {result['status']} ({result['events']} events)")
    error = result.get("error")
    if error and result["status"] != "completed":
        where = _step_location(payload, error.get("step"))
        prefix = f"{where}: " if where else ""
        step = f" (step {error['step']})" if error.get("step") else ""
        print(f"{prefix}error[{error['code']}]: {error['message']}{step}", file=sys.stderr)
    return EXIT_FOR_STATUS.get(result["status"], 1)


def _step_location(payload: dict[str, Any], step: str | None) -> str | None:
    """The failing step's YAML file:line:column, through the debug map."""
    if not step:
        return None
    names = [s["name"] for s in payload.get("steps", [])]
    if step not in names:
        return None
    path = f"workflow[{names.index(step)}]"
    for file, line, column, where in payload.get("positions", []):
        if where == path:
            return f"{file}:{line}:{column}"
    return None


def run(args: argparse.Namespace) -> int:
    from noetlc.cli.noetlc_commands.artifacts import load_program
    from noetlc.runtime.embedded import run_embedded

    overrides = workload_overrides(args)
    if overrides is None:
        return 2
    if args.db.startswith(("postgresql://", "postgres://")):
        print(
            "error[NOE803]: `run` is embedded; a PostgreSQL database runs distributed mode",
            file=sys.stderr,
        )
        print(
            "  hint: `noetl-vm submit FILE --db URL --wait` with `noetl-vm server` and"
            " `noetl-vm worker` running, or `run --db sqlite:///.noetl/noetl.db`",
            file=sys.stderr,
        )
        return 2
    program = load_program(args.file)
    if program is None:
        return 1
    store = open_or_report(args.db)
    if store is None:
        return 2
    progress = progress_for(args, len(program.steps))
    try:
        result = run_embedded(
            program, overrides, store, on_events=progress, keychain_file=args.keychain
        )
    except KeyboardInterrupt:
        print("\ninterrupted: `noetl-vm resume ID` finishes the execution", file=sys.stderr)
        return 130
    finally:
        if progress is not None:
            progress.close()
        store.close()
    return report(result, program.to_payload() if result.get("error") else {}, args.json)
