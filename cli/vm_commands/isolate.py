"""Task isolation for the long-running commands that run other people's task code (`serve`,
`worker`): the `--task-*` limits and the start of the warm runner pool
(stdlib_tools/isolation.py; docs/runtime.md, "Task isolation")."""

from __future__ import annotations

import argparse
import os
from typing import Any
from urllib.parse import urlsplit

from noetlc.cli.common import UsageError

SECRET_ENV = ("NOETL_CREDENTIAL_KEY", "NOETL_API_TOKEN")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task-memory-mb",
        type=int,
        default=2048,
        metavar="MB",
        help="address space of a task's process (2048)",
    )
    p.add_argument(
        "--task-cpu-seconds",
        type=float,
        default=600.0,
        metavar="S",
        help="CPU seconds of one task (600)",
    )
    p.add_argument(
        "--task-open-files", type=int, default=1024, metavar="N", help="open files of a task (1024)"
    )
    p.add_argument(
        "--task-output-mb",
        type=int,
        default=16,
        metavar="MB",
        help="what one task may print and return (16)",
    )
    p.add_argument(
        "--task-spare",
        type=int,
        default=1,
        metavar="N",
        help="python task processes kept started ahead (1)",
    )


def start(args: argparse.Namespace, secrets: list[str]) -> Any:
    """Check the limits, start the runner pool, and wipe `secrets` (and the secrets of the
    environment and the database URL) from what /proc shows of this process. Returns the
    isolation policy that was before, for `stop`."""
    from noetlc.stdlib_tools import isolation

    for flag, value, least in (
        ("--task-memory-mb", args.task_memory_mb, 64),
        ("--task-cpu-seconds", args.task_cpu_seconds, 1),
        ("--task-open-files", args.task_open_files, 16),
        ("--task-output-mb", args.task_output_mb, 1),
        ("--task-spare", args.task_spare, 0),
    ):
        if value < least:
            raise UsageError("NOE800", f"{flag} must be at least {least}, got {value}")
    limits = isolation.TaskLimits(
        memory_bytes=args.task_memory_mb * 1024**2,
        cpu_seconds=float(args.task_cpu_seconds),
        open_files=args.task_open_files,
        output_bytes=args.task_output_mb * 1024**2,
    )
    before = isolation.policy()
    isolation.configure("process", limits, spare=args.task_spare)
    hidden = list(secrets)
    hidden += [os.environ[name] for name in SECRET_ENV if os.environ.get(name)]
    hidden += [v for k, v in os.environ.items() if k.startswith("NOETL_KEYCHAIN_")]
    db = getattr(args, "db", None)
    if isinstance(db, str) and "://" in db:
        try:
            password = urlsplit(db).password
        except ValueError:
            password = None
        if password:
            hidden.append(password)
    isolation.scrub_process(hidden)
    return before


def stop(before: Any) -> None:
    """Close the runners `start` made and put back the policy that was before it: a command
    that returns leaves its process as it found it (an embedding that calls `main`, the
    tests), where the next task code would otherwise run in a runner it did not ask for."""
    from noetlc.stdlib_tools import isolation

    isolation.pool().close()
    isolation.configure(before.mode, before.limits, before.spare)
