"""The playbook catalog, straight in the store (no service needed).

    noetl-vm catalog register FILE.yaml... [--db URL] [--json]
    noetl-vm catalog list [--kind playbook] [--path P] [--db URL] [--json]
    noetl-vm catalog show PATH [--version N] [--source] [--db URL] [--json]

`register` compiles each playbook first: one with errors is refused with its located
diagnostics (exit 1); registering the same content again gives the same version. `kind:
playbook` tasks of executions on the same store name catalog paths (`catalog://PATH@VERSION`,
or a path that is not a file).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any

from noetlc.cli.vm_commands.history import add_db, require_existing
from noetlc.diagnostics.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    reg = sub.add_parser("register", help="add playbook files (a new version when changed)")
    reg.add_argument("files", nargs="+", metavar="FILE")
    lst = sub.add_parser("list", help="the entries, newest first")
    lst.add_argument("--kind", default=None, help="only this kind (playbook, credential, ...)")
    lst.add_argument("--path", default=None, help="only the versions of this path")
    show = sub.add_parser("show", help="one entry: the latest version, or --version N")
    show.add_argument("path")
    show.add_argument("--version", type=int, default=None)
    show.add_argument("--source", action="store_true", help="print the playbook's text")
    for q in (reg, lst, show):
        add_db(q)
        q.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from noetlc.runtime.store_url import open_catalog

    if args.action != "register":  # list and show only read: a mistyped path creates nothing
        require_existing(args.db)
    catalog = open_catalog(args.db)
    try:
        if args.action == "register":
            return _register(catalog, args)
        if args.action == "list":
            rows = catalog.entries(args.kind, args.path)
            if args.json:
                print(json.dumps([_row(r) for r in rows]))
            for r in [] if args.json else rows:
                print(f"{r['path']}  v{r['version']}  {r['kind']:<9} {_when(r)}  {r['catalog_id']}")
            return 0
        entry = catalog.entry(path=args.path, version=args.version)
        if entry is None:
            which = f" version {args.version}" if args.version else ""
            raise UserError(
                "NOE871",
                f"no catalog entry {args.path!r}{which} in {args.db}",
                "`noetl-vm catalog list` shows the paths",
            )
        if args.json:
            print(json.dumps({**_row(entry), "content": entry["content"]}))
        elif args.source:
            print(entry["content"], end="" if entry["content"].endswith("\n") else "\n")
        else:
            print(f"{entry['path']} v{entry['version']} ({entry['kind']}) {entry['catalog_id']}")
            print(f"registered {_when(entry)}")
            for f in entry["findings"]:
                print(f"  {f['line']}:{f['column']}: {f['severity']}[{f['code']}]: {f['message']}")
        return 0
    finally:
        catalog.close()


def _register(catalog: Any, args: argparse.Namespace) -> int:
    from noetlc.service.errors import ApiError
    from noetlc.service.registry import register

    failed = 0
    for file in args.files:
        try:
            with open(file, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            print(f"{file}:1:1: error[NOE004]: cannot read the file: {exc}", file=sys.stderr)
            failed += 1
            continue
        try:
            entry, created = register(catalog, text, "Playbook")
        except ApiError as exc:
            failed += 1
            for d in exc.extra.get("diagnostics") or []:
                where = f"{file}:{d.get('line') or 1}:{d.get('column') or 1}"
                print(f"{where}: {d['severity']}[{d['code']}]: {d['message']}", file=sys.stderr)
            if not exc.extra.get("diagnostics"):
                print(f"{file}: error[{exc.code}]: {exc.message}", file=sys.stderr)
            continue
        if args.json:
            print(json.dumps({**_row(entry), "file": file, "created": created}))
        else:
            note = "" if created else " (unchanged)"
            print(f"{file} -> {entry['path']} v{entry['version']}{note}")
    return 1 if failed else 0


def _when(entry: dict[str, Any]) -> str:
    return dt.datetime.fromtimestamp(entry["created_at"], dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _row(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        k: entry[k] for k in ("catalog_id", "path", "version", "kind", "findings", "created_at")
    }
