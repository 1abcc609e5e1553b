"""The python tool: in-process forms, the `assert:` contract, keychain `auth:`, and
`spec.isolation: subprocess` with its timeout."""

from __future__ import annotations

from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.registry import ToolContext, call_tool

ISOLATED = {"isolation": "subprocess", "timeout": 20}


def test_main_result_and_top_level_return() -> None:
    assert (
        call_tool("python", {"code": "def main(a, b=2):\n  return a * b", "input": {"a": 3}})[
            "result"
        ]
        == 6
    )
    assert call_tool("python", {"code": "result = x + 1", "args": {"x": 1}})["result"] == 2
    assert call_tool("python", {"code": "return input_data['x']", "input": {"x": 5}})["result"] == 5


def test_exceptions_are_error_outcomes() -> None:
    out = call_tool("python", {"code": "raise KeyError('k')"})
    assert out["status"] == "error" and out["py"]["exception_type"] == "KeyError"


def test_a_result_that_contains_itself_is_an_error_outcome() -> None:
    # a cycle reached the stores' encoders (no cycle bookkeeping) and crashed the run (NOE900)
    for spec in (None, ISOLATED):
        out = call_tool("python", {"code": "a = {}\na['self'] = a\nresult = a"}, spec)
        assert out["status"] == "error", out
        if spec is None:
            assert "reference cycle" in out["error"]["message"]


def test_the_assert_contract() -> None:
    code = "def main(t):\n  return {'hot': t > 25}"
    ok = call_tool(
        "python",
        {"code": code, "input": {"t": 30}, "assert": {"expects": ["t"], "returns": ["hot"]}},
    )
    assert ok["status"] == "ok"
    no_input = call_tool("python", {"code": code, "input": {}, "assert": {"expects": ["t"]}})
    assert no_input["error"]["type"] == "AssertionError" and "`t`" in no_input["error"]["message"]
    no_key = call_tool("python", {"code": code, "input": {"t": 1}, "assert": {"returns": ["cold"]}})
    assert no_key["error"]["type"] == "AssertionError" and no_key["result"] == {"hot": False}


def test_auth_binds_resolved_keychain_values() -> None:
    chain = Keychain(env={"NOETL_KEYCHAIN_API": "tok-abcdef"})
    out = call_tool(
        "python", {"code": "result = auth['api'][:3]", "auth": {"api": "api"}}, None,
        ToolContext(keychain=chain),
    )  # fmt: skip
    assert out["result"] == "tok"


def test_isolated_code_runs_in_a_child_and_its_prints_do_not_break_the_outcome() -> None:
    code = "import os\nprint('chatter')\ndef main(n):\n    return {'n': n, 'pid': os.getpid()}"
    out = call_tool("python", {"code": code, "input": {"n": 4}}, ISOLATED)
    assert out["status"] == "ok", out
    assert out["result"]["n"] == 4 and out["result"]["pid"] != __import__("os").getpid()
    assert out["py"]["stdout"] == "chatter\n"


def test_isolated_exceptions_and_libs() -> None:
    out = call_tool("python", {"code": "result = m.sqrt(16)", "libs": {"m": "math"}}, ISOLATED)
    assert out["result"] == 4.0
    bad = call_tool("python", {"code": "1/0"}, ISOLATED)
    assert bad["error"]["type"] == "ZeroDivisionError"
    assert bad["py"]["exception_type"] == "ZeroDivisionError"


def test_isolated_code_over_its_timeout_is_killed() -> None:
    out = call_tool(
        "python", {"code": "while True:\n    pass"}, {"isolation": "subprocess", "timeout": 0.5}
    )
    assert out["status"] == "error" and out["error"]["type"] == "Timeout"
    assert out["error"]["retryable"] is True


def test_a_child_that_dies_without_an_outcome() -> None:
    out = call_tool("python", {"code": "import os\nos._exit(9)"}, ISOLATED)
    assert out["error"]["type"] == "SubprocessError" and out["py"]["exit_code"] == 9


def test_arguments_are_validated() -> None:
    out = call_tool("python", {"input": {}})
    assert out["error"]["type"] == "ToolArgumentError" and "code" in out["error"]["message"]
