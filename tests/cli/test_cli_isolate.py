"""`serve` and `worker` run task code in runner processes while they run; when the command
returns, its process is as it found it (an embedding or a test that calls `main` next runs
task code where it did before, not in a runner started for the command)."""

from __future__ import annotations

import argparse

from noetlc.cli.vm_commands import isolate
from noetlc.stdlib_tools import isolation


def test_a_command_that_returns_puts_back_the_isolation_it_found() -> None:
    parser = argparse.ArgumentParser()
    isolate.add_arguments(parser)
    args = parser.parse_args(["--task-spare", "0"])
    found = isolation.policy()
    assert found.mode == "inline"
    before = isolate.start(args, [])
    try:
        assert isolation.policy().mode == "process"
    finally:
        isolate.stop(before)
    assert isolation.policy() == found
