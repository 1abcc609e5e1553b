"""Print the long explanation of a diagnostic code, with an example (`noetlc explain NOE101`).

Without a code, lists every code with its severity and title.
"""

from __future__ import annotations

import argparse
import sys

from noetlc.diagnostics.codes import registry


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("code", nargs="?", help="a diagnostic code such as NOE101")


def run(args: argparse.Namespace) -> int:
    table = registry()
    if not args.code:
        for entry in table.values():
            print(f"{entry.code}  {entry.severity.value:<7}  {entry.title}")
        return 0
    code = args.code.strip().upper()
    if code.startswith("NOE") is False and code.isdigit():
        code = f"NOE{int(code):03d}"
    info = table.get(code)
    if info is None:
        print(f"error[NOE801]: unknown diagnostic code {args.code!r}", file=sys.stderr)
        print("  hint: `noetlc explain` lists every code", file=sys.stderr)
        return 2
    print(f"{info.code} ({info.severity.value}): {info.title}\n")
    print(info.explain)
    if info.hint:
        print(f"\nhint: {info.hint}")
    return 0
