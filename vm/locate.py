"""Where in the YAML a failed task failed: the file line and column that raised.

A python error says the line of the task's code (`line`, 1-based in the code block) and the
frames of the task's own code (`traceback`); the compiler stores the code with the file
position of its first line (compiler/passes/expressions.py, `where` of its pool entry), so
`yaml = {file, line, column}` is that position moved down by the code line, at the code
line's own indentation. A template error (`TemplateError`) is located at the expression's
position. Other tool errors keep what the tool said (`http_status`, `body`, `position`...).
"""

from __future__ import annotations

from typing import Any

from noetlc.vm.loaded_program import LoadedProgram


def where(text: Any) -> tuple[str, int, int] | None:
    """A stored `where` (`file:line:column`) as a triple, else None."""
    if not isinstance(text, str):
        return None
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return parts[0], int(parts[1]), int(parts[2])


def code_origin(program: LoadedProgram, args_index: int | None) -> tuple[str, int, int] | None:
    """The file position of the first line of a task's `code:` argument, if it has one."""
    if args_index is None:
        return None
    value = program.values[args_index]
    if isinstance(value, dict) and len(value) == 1 and "$lit" in value:
        value = value["$lit"]
    code = value.get("code") if isinstance(value, dict) else None
    if not (isinstance(code, dict) and isinstance(code.get("$e"), int)):
        return None
    entries = program.image.expressions
    index = code["$e"]
    return where(entries[index].where) if 0 <= index < len(entries) else None


def locate_code_error(
    program: LoadedProgram, args_index: int | None, code: Any, error: dict[str, Any]
) -> None:
    """Add `yaml` (and `yaml_line` to each traceback frame) to a python error, in place."""
    line = error.get("line")
    if not isinstance(line, int) or isinstance(line, bool) or "yaml" in error:
        return
    origin = code_origin(program, args_index)
    if origin is None:
        return
    file, first, column = origin
    lines = code.splitlines() if isinstance(code, str) else []

    def column_of(number: int) -> int:
        if 0 < number <= len(lines):
            text = lines[number - 1]
            return column + len(text) - len(text.lstrip())
        return column

    error["yaml"] = {"file": file, "line": first + line - 1, "column": column_of(line)}
    frames = error.get("traceback")
    if isinstance(frames, list):
        for frame in frames:
            if isinstance(frame, dict) and isinstance(frame.get("line"), int):
                frame["yaml_line"] = first + frame["line"] - 1


def locate_template_error(exc: BaseException, error: dict[str, Any]) -> None:
    """A failing template's position (`ExpressionError.where`), in place."""
    found = where(getattr(exc, "where", None))
    if found is not None:
        error["yaml"] = {"file": found[0], "line": found[1], "column": found[2]}
        source = getattr(exc, "source", None)
        if isinstance(source, str):
            error["expression"] = source[:500]
