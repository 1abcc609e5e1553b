"""The shell tool: output capture, non-zero exits, timeouts, env and cwd."""

from __future__ import annotations

from pathlib import Path

from noetlc.stdlib_tools.registry import ToolContext, call_tool


def test_a_command_line_captures_both_streams() -> None:
    out = call_tool("shell", {"command": "echo out; echo err >&2"})
    assert out["status"] == "ok"
    assert out["result"] == {"stdout": "out\n", "stderr": "err\n", "returncode": 0}


def test_an_argument_vector_needs_no_quoting() -> None:
    out = call_tool("shell", {"command": ["printf", "%s|", "a b", "$HOME;"]})
    assert out["result"]["stdout"] == "a b|$HOME;|"


def test_a_non_zero_exit_is_an_error_that_keeps_the_output() -> None:
    out = call_tool("shell", {"command": "echo partial; echo 'no such thing' >&2; exit 3"})
    assert out["status"] == "error" and out["error"]["type"] == "ShellError"
    assert out["error"]["returncode"] == 3 and "no such thing" in out["error"]["message"]
    assert out["result"]["stdout"] == "partial\n"


def test_a_missing_program_exits_127(tmp_path: Path) -> None:
    out = call_tool("shell", {"command": [str(tmp_path / "missing-program")]})
    assert out["error"]["returncode"] == 127


def test_cmds_run_in_order_and_stop_at_the_first_failure() -> None:
    out = call_tool("shell", {"cmds": ["echo one", "false", "echo never"]})
    assert out["status"] == "error" and out["result"]["stdout"] == "one\n"
    ok = call_tool("shell", {"commands": ["echo one", "echo two"]})
    assert ok["result"]["stdout"] == "one\ntwo\n"


def test_timeout_kills_the_whole_process_group() -> None:
    # the background sleep keeps the pipes open: only killing the group ends the wait
    out = call_tool("shell", {"command": "sleep 30 & sleep 30", "timeout": 0.3})
    assert out["status"] == "error" and out["error"]["type"] == "Timeout"
    spec = call_tool("shell", {"command": "sleep 30"}, {"timeout": 0.3})
    assert spec["error"]["type"] == "Timeout"


def test_env_and_cwd_relative_to_the_playbook(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    ctx = ToolContext(workdir=tmp_path)
    out = call_tool(
        "shell", {"command": "pwd; echo $GREETING", "cwd": "sub", "env": {"GREETING": "hi"}},
        None, ctx,
    )  # fmt: skip
    assert out["result"]["stdout"] == f"{(tmp_path / 'sub').resolve()}\nhi\n"
    missing = call_tool("shell", {"command": "true", "cwd": "nope"}, None, ctx)
    assert missing["error"]["type"] == "ToolArgumentError"


def test_a_command_line_runs_in_bash_as_in_noetl() -> None:
    # bash-only syntax: `[[ ]]`, arrays, `read -s` (a POSIX sh rejects all three)
    script = 'a=(x y); [[ ${#a[@]} == 2 ]] && echo "two"; read -s line < /dev/null || true'
    out = call_tool("shell", {"command": script})
    assert out["status"] == "ok", out
    assert out["result"]["stdout"] == "two\n"
