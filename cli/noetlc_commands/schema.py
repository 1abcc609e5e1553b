"""Print the JSON Schema of the playbook surface language (for editors' YAML language servers).

See docs/editor-setup.md for wiring it into VS Code.
"""

from __future__ import annotations

import argparse
import json
import sys

from noetlc.compiler.surface.models import Playbook


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="FILE", help="write the schema to FILE")


def json_schema() -> dict[str, object]:
    schema = Playbook.model_json_schema(by_alias=True)
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return schema


def run(args: argparse.Namespace) -> int:
    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            print(
                f"noetlc schema: error[NOE800]: cannot write {args.output}: {reason}",
                file=sys.stderr,
            )
            return 2
    else:
        print(text, end="")
    return 0
