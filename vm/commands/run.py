"""Run a playbook in embedded mode (one process, in-memory event log).

    noetl-vm run playbook.yaml [--set key=value ...] [--workload FILE] [--json]

A `.yaml` file is compiled first (its diagnostics are printed); a `.nbc` file is loaded.
`--json` prints the summary as the last line of standard output. Exit status: 0 completed,
1 failed, 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.store import DEFAULT_URL, StoreError, open_store


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="FILE.yaml or FILE.nbc")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="workload override (VALUE is JSON, else a string)",
    )
    p.add_argument("--workload", metavar="FILE", help="a JSON or YAML file of workload overrides")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    p.add_argument(
        "--db",
        default=DEFAULT_URL,
        metavar="URL",
        help=f"event store: sqlite:///FILE or memory: (default {DEFAULT_URL})",
    )


def _overrides(args: argparse.Namespace) -> dict[str, Any] | None:
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


def run(args: argparse.Namespace) -> int:
    from noetlc.compiler.commands.artifacts import load_payload

    overrides = _overrides(args)
    if overrides is None:
        return 2
    payload = load_payload(args.file)
    if payload is None:
        return 1
    try:
        store = open_store(args.db)
    except StoreError as exc:
        print(f"error[{exc.code}]: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 2
    try:
        result = run_embedded(payload, overrides, store)
    finally:
        store.close()
    if args.json:
        print(json.dumps(result, default=str))
    else:
        for name, step in result["steps"].items():
            print(f"{step['status'] or '-':<8} {name} (runs {step['runs']})")
        print(f"execution {result['execution_id']}: {result['status']} ({result['events']} events)")
        if result["error"]:
            print(
                f"error[{result['error']['code']}]: {result['error']['message']} (step {result['error']['step']})",
                file=sys.stderr,
            )
    return 0 if result["status"] == "completed" else 1
