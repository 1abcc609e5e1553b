"""One private event loop on a background thread, for tools built on async libraries (asyncpg).

The tool interface is synchronous (the pipeline VM calls `call_tool` and waits); a tool submits
its coroutine with `run(coro, timeout)` (`asyncio.run_coroutine_threadsafe`), so it works the
same whether or not the calling thread runs an event loop of its own. Resources that live on
the loop (connection pools) register a closer with `on_close`; at interpreter exit the closers
run on the loop and the loop stops.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
CLOSE_TIMEOUT = 5.0

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_closers: list[Callable[[], Awaitable[None]]] = []


def loop() -> asyncio.AbstractEventLoop:
    """The shared loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            new = asyncio.new_event_loop()
            thread = threading.Thread(target=new.run_forever, name="noetl-tools-aio", daemon=True)
            thread.start()
            _loop, _thread = new, thread
        return _loop


CANCEL_POLL = 0.1  # seconds between looks at the caller's cancel flag


class Cancelled(Exception):
    """The caller's cancel flag turned true: the coroutine was cancelled."""


def run(
    coro: Coroutine[Any, Any, T],
    timeout: float | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> T:
    """Run `coro` on the shared loop and wait for it; on timeout it is cancelled and
    `TimeoutError` is raised. With `cancelled`, the flag is read every `CANCEL_POLL` seconds;
    once it is true the coroutine is cancelled (asyncpg then cancels the statement on the
    server) and `Cancelled` is raised once the coroutine has unwound (at most
    `CLOSE_TIMEOUT` seconds later), so the statement is no longer running."""
    ended = threading.Event()

    async def tracked() -> T:
        try:
            return await coro
        finally:
            ended.set()

    future = asyncio.run_coroutine_threadsafe(tracked(), loop())
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        step = CANCEL_POLL if cancelled is not None else None
        if deadline is not None:
            left = max(0.0, deadline - time.monotonic())
            step = left if step is None else min(step, left)
        try:
            return future.result(step)
        except concurrent.futures.TimeoutError:
            if deadline is not None and time.monotonic() >= deadline:
                future.cancel()
                raise TimeoutError(f"no answer within {timeout:g} s") from None
            if cancelled is not None and cancelled():
                future.cancel()
                ended.wait(CLOSE_TIMEOUT)
                raise Cancelled("the action was cancelled") from None


def on_close(closer: Callable[[], Awaitable[None]]) -> None:
    """Call `closer()` on the loop when the process exits (or `shutdown()` is called)."""
    with _lock:
        _closers.append(closer)


def shutdown() -> None:
    """Run the closers and stop the loop (idempotent; a later `run` starts a new loop)."""
    global _loop, _thread
    with _lock:
        current, thread, closers = _loop, _thread, list(_closers)
        _loop, _thread = None, None
        _closers.clear()
    if current is None or current.is_closed():
        return

    async def close_all() -> None:
        for closer in closers:
            # closing at exit: a broken connection must not stop the rest
            with contextlib.suppress(Exception):
                await asyncio.wait_for(closer(), CLOSE_TIMEOUT)

    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(close_all(), current).result(CLOSE_TIMEOUT * 2)
    current.call_soon_threadsafe(current.stop)
    if thread is not None:
        thread.join(CLOSE_TIMEOUT)
    if not current.is_running():
        current.close()


atexit.register(shutdown)
