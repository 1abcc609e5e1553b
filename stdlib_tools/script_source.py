"""`script: {uri, source: {type, ...}}`: the code of a python task or the SQL of a postgres task,
read when the task runs.

`type: file` reads `uri` (or `source.path`) relative to the playbook's folder, else to a folder
of `NOETL_PLAYBOOK_PATH` (the local catalog); `type: http`
(or `https`) fetches `source.endpoint`, else `uri`, with `source.headers` and `source.timeout`
(default 30 s) and needs a 2xx answer; `type: inline` takes `source.code`. Object stores (`gcs`, `s3`) need a plugin: the
task fails with a `ScriptError` that says so. Every failure is a `ScriptError` naming the
source, never an exception out of the tool.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from noetlc.stdlib_tools.context import ToolContext

if TYPE_CHECKING:  # the executor takes pydantic models or `shape_check.Args`
    from noetlc.stdlib_tools.schemas import ScriptRef

HTTP_TIMEOUT = 30.0
NEEDS_PLUGIN = {"gcs": "Google Cloud Storage", "s3": "Amazon S3"}


class ScriptError(Exception):
    """The script could not be read."""


def load(ref: ScriptRef, ctx: ToolContext) -> str:
    source = ref.source
    extra: dict[str, Any] = source.model_extra or {}
    kind = source.type
    if kind == "inline":
        if source.code is None:
            raise ScriptError("`script.source.type: inline` needs `script.source.code`")
        return source.code
    uri = ref.uri or extra.get("path") or extra.get("uri")
    endpoint = extra.get("endpoint")
    if kind in ("http", "https") and isinstance(endpoint, str) and endpoint:
        # NoETL's http source fetches `source.endpoint`, else `uri`
        # (noetl/core/script/sources/http.py, `fetch_from_http`)
        uri = endpoint
    if not isinstance(uri, str) or not uri:
        raise ScriptError(f"`script:` of type {kind} needs `uri:`")
    if kind == "file":
        path = locate(uri.removeprefix("file://"), ctx.workdir)
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ScriptError(f"cannot read the script {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ScriptError(f"the script {path} is not UTF-8 text: {exc}") from None
    if kind in ("http", "https"):
        return _fetch(uri, extra)
    raise ScriptError(
        f"no installed tool reads scripts from {kind} ({NEEDS_PLUGIN.get(kind, kind)}): "
        f"cannot load {uri}; use `source.type: file` or `http`, or install a plugin for {kind}"
    )


def locate(relative: str, workdir: Path) -> Path:
    """A relative script path: from the playbook's folder, else from a catalog folder of
    `NOETL_PLAYBOOK_PATH` (NoETL resolves them from the root its playbooks are registered
    from), else the playbook's folder (for the error message)."""
    first = workdir / relative
    if Path(relative).is_absolute() or first.exists():
        return first
    for root in os.environ.get("NOETL_PLAYBOOK_PATH", "").split(os.pathsep):
        if root and (Path(root) / relative).exists():
            return Path(root) / relative
    return first


def _fetch(uri: str, extra: dict[str, Any]) -> str:
    import httpx

    headers = extra.get("headers") if isinstance(extra.get("headers"), dict) else None
    timeout = extra.get("timeout")
    seconds = float(timeout) if isinstance(timeout, int | float) else HTTP_TIMEOUT
    try:
        answer = httpx.get(uri, headers=headers, timeout=seconds, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise ScriptError(f"cannot fetch the script {uri}: {exc}") from None
    if not answer.is_success:
        raise ScriptError(f"cannot fetch the script {uri}: HTTP {answer.status_code}")
    return answer.text
