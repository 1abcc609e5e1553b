"""NOE508: keychain entries nothing uses.

An entry is used when a template reads `keychain.<name>` (or `keychain['<name>']`), or when a
scalar anywhere outside `keychain:` is exactly its name (`auth: pg_main`, a workload value
passed on as `auth: "{{ workload.pg_auth }}"`). A template that indexes `keychain` with a
computed key may use any entry, so then none is reported.
"""

from __future__ import annotations

import re

from noetlc.analysis.context import LintContext
from noetlc.compiler.ynodes import YMap, walk_scalars

_DYNAMIC = re.compile(r"keychain\s*\[\s*(?!['\"])")


def run(ctx: LintContext) -> None:
    entries = ctx.playbook.keychain
    document = ctx.unit.canonical or ctx.unit.document
    if not entries or not isinstance(document, YMap):
        return
    texts: list[str] = []
    for key, value in document.items:
        if key.value == "keychain":
            continue
        texts.extend(str(s.value) for _, s in walk_scalars(value) if s.value is not None)
    if any(_DYNAMIC.search(t) for t in texts):
        return
    exact = set(texts)
    for entry in entries:
        name = re.escape(entry.name)
        reference = re.compile(rf"keychain\s*(\.\s*{name}\b|\[\s*['\"]{name}['\"]\s*\])")
        if entry.name in exact or any(reference.search(t) for t in texts):
            continue
        ctx.report(
            "NOE508",
            f"keychain entry `{entry.name}` ({entry.kind}) is never used",
            entry.span,
        )
