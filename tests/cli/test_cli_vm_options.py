"""Option values that cannot work are usage errors (NOE800, exit 2) before anything starts:
a poll of 0 (a busy loop), a lease of 0 or less, non-finite seconds, no worker slots."""

from __future__ import annotations

import pytest

from noetlc.cli import vm_main

URL = "postgresql://u@127.0.0.1:1/x"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["server", "--poll", "0"], "busy loop"),
        (["server", "--poll", "-1"], "at least 0.01"),
        (["server", "--ttl", "-1"], "longer than 0"),
        (["server", "--ttl", "0"], "longer than 0"),
        (["server", "--ttl", "nan"], "finite"),
        (["worker", "--poll", "0"], "busy loop"),
        (["worker", "--ttl", "inf"], "finite"),
        (["worker", "--grace", "-2"], "0 or more"),
        (["worker", "--concurrency", "0"], "at least 1"),
    ],
)
def test_values_that_cannot_work_are_refused(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert vm_main.main([*args, "--db", URL]) == 2
    err = capsys.readouterr().err
    assert "error[NOE800]" in err and says in err


def test_the_smallest_poll_is_accepted() -> None:
    from noetlc.cli.vm_commands.server import MIN_POLL, poll_seconds

    assert poll_seconds(str(MIN_POLL)) == MIN_POLL
