"""Root `name:` / `path:` (an older NoETL form) -> `metadata.name` / `metadata.path`."""

from __future__ import annotations

from noetlc.compiler.ynodes import YMap, YScalar
from noetlc.diagnostics.report import Reporter


def run(doc: YMap, reporter: Reporter) -> YMap:
    legacy = [k for k in ("name", "path") if k in doc]
    if not legacy:
        return doc
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, YMap) else YMap((), doc.span)
    for key in legacy:
        value = doc.get(key)
        key_node = doc.key_node(key)
        assert value is not None and key_node is not None
        reporter.report("NOE402", f"root `{key}:` belongs in `metadata.{key}`", key_node.span)
        if key not in meta:
            meta = meta.with_item(key, value, key_node.span)
    out = doc.without(*legacy)
    if "metadata" in out:
        return out.with_item("metadata", meta)
    # Keep `metadata` near the top, where it was written.
    items = list(out.items)
    position = next(
        (i for i, (k, _) in enumerate(items) if k.value == "workload" or k.value == "workflow"),
        len(items),
    )
    items.insert(position, (YScalar("metadata", meta.span), meta))
    return YMap(tuple(items), out.span)
