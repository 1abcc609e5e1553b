"""`noetl-vm run catalog://PATH[@VERSION]`: run a playbook registered in the catalog of the
store named by `--db` (`noetl-vm catalog register`, or the service's `register`), the latest
version or the one given, as NoETL's client names it (`noetl run catalog://PATH@VERSION`).

The catalog's stored program is used (verified on load); an entry registered without one is
compiled from its text. A missing entry or a malformed reference is a usage error (NOE871 /
NOE800, exit 2) naming what the catalog has.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

from noetlc.cli.common import UsageError
from noetlc.cli.vm_commands.history import require_existing

if TYPE_CHECKING:
    from noetlc.ir.program import Program

PREFIX = "catalog://"
_REF = re.compile(r"catalog://(?P<path>[^@\s]+?)(?:@(?P<version>[^@\s]*))?")


def is_catalog_ref(text: str) -> bool:
    return text.startswith(PREFIX)


def parse_ref(text: str) -> tuple[str, int | None]:
    """`catalog://a/b@3` -> ("a/b", 3); `catalog://a/b` -> ("a/b", None)."""
    m = _REF.fullmatch(text)
    version = m.group("version") if m else None
    if m is None or (version is not None and not (version.isdigit() and int(version) >= 1)):
        raise UsageError(
            "NOE800",
            f"not a catalog reference: {text!r}",
            "write catalog://PATH or catalog://PATH@VERSION (VERSION a number from 1)",
        )
    return m.group("path").strip("/"), int(version) if version else None


def catalog_program(ref: str, db: str) -> Program | None:
    """The program of catalog entry `ref` in the store `db`; None after printing the errors
    of an entry whose text does not compile."""
    from noetlc.runtime.store_url import open_catalog

    path, version = parse_ref(ref)
    require_existing(db)
    catalog = open_catalog(db)
    try:
        entry = catalog.entry(path=path, version=version)
        if entry is None:
            known = sorted({e["path"] for e in catalog.entries()})
            which = f" version {version}" if version else ""
            shown = ", ".join(known[:10]) or "none"
            raise UsageError(
                "NOE871",
                f"no catalog entry {path!r}{which} in {db}",
                f"`noetl-vm catalog list --db {db}` shows the entries (paths: {shown})",
            )
    finally:
        catalog.close()
    if entry.get("program"):
        from noetlc.runtime.stored_program import decode_program

        return decode_program(entry["program"])
    from noetlc.compiler.pipeline import compile_source
    from noetlc.diagnostics.report import render_text

    name = f"{PREFIX}{path}@{entry['version']}"
    unit = compile_source(entry["content"], file=name)
    if unit.reporter.has_errors or unit.program is None:
        print(render_text(unit.reporter.sorted(), {name: entry["content"]}), file=sys.stderr)
        return None
    return unit.program
