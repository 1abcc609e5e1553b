"""Print the JSON Schema of the playbook surface language (for editors' YAML language servers).

    noetlc schema -o .vscode/noetl-playbook.schema.json

`-o` creates the missing folders of FILE. In VS Code (the YAML extension), map the schema to
your playbooks in .vscode/settings.json:

    {"yaml.schemas": {".vscode/noetl-playbook.schema.json": ["playbooks/**/*.yaml"]}}
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from noetlc.cli.common import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="FILE", help="write the schema to FILE")


def json_schema() -> dict[str, object]:
    from noetlc.compiler.surface.models import Playbook

    schema = Playbook.model_json_schema(by_alias=True)
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return schema


def run(args: argparse.Namespace) -> int:
    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    if args.output:
        out = Path(args.output)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise UsageError("NOE802", f"cannot write {args.output}: {reason}", None) from None
    else:
        print(text, end="")
    return 0
