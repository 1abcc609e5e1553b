"""The `hash` tool kind: the record noetlc finds through the `noetlc.tools` entry point.

Importing this module must stay cheap (the compiler imports it to check arguments): the schema
is here, the executor is in `run.py`, imported by the workers on the first call.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from noetlc.stdlib_tools.kinds import ToolKind
from noetlc.stdlib_tools.schemas import ToolArgs


class HashArgs(ToolArgs):
    """Arguments of the `hash` kind (unknown ones are errors: `ToolArgs` forbids extras)."""

    text: str | None = Field(None, description="the text to digest (UTF-8)")
    file: str | None = Field(None, description="a file to digest, relative to the playbook")
    algorithm: Literal["sha256", "sha1", "md5", "blake2b"] = "sha256"

    @model_validator(mode="after")
    def _one_input(self) -> HashArgs:
        if (self.text is None) == (self.file is None):
            raise ValueError("give exactly one of `text` and `file`")
        return self


KIND = ToolKind(
    name="hash",
    schema=HashArgs,
    module="noetlc_hash_tool.run",
    summary="the hex digest of a text or a file",
)
