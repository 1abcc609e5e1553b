"""Separate network hosts on one machine, for partition tests.

Each host is a Linux network namespace joined to the root namespace by a veth pair
(`HOST.addr` inside, `HOST.gateway` on the root side). The root namespace plays the database
host: PostgreSQL listens on 127.0.0.1 only (and is shared with other tests, so it is not
reconfigured), so each host reaches it through its own link proxy, a TCP relay listening on
the host's gateway address and forwarding to PostgreSQL. Faults:

* a partition cuts the veth (`ip link set ... down`): the kernel drops the host's packets
  silently, TCP connections stall and retransmit, and resume when the link is healed;
* latency and loss: `tc qdisc ... netem` on both ends of the veth where the kernel has
  `sch_netem`; where it does not (this machine's Firecracker kernel has no netem), the link
  proxy shapes the stream: every chunk is delivered `delay` seconds after it was read, in
  order, and with probability `loss` a chunk waits a retransmission timeout more (200 ms,
  doubling while the dice say lost again) — what a lost segment costs a TCP stream.

`Hosts` skips the test with the reason when namespaces cannot be made (not root, no
CAP_NET_ADMIN, no `ip`).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from noetlc.runtime.postgres.cluster_testing import Cluster

RTO = 0.2  # Linux's minimum retransmission timeout


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def namespaces_reason() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if shutil.which("ip") is None:
        return "no `ip` command (apt-get install -y iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"nrt-probe-{os.getpid()}"
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


def netem_available(device: str) -> bool:
    added = subprocess.run(
        ["tc", "qdisc", "add", "dev", device, "root", "netem", "delay", "1ms"],
        capture_output=True,
        text=True,
    )
    if added.returncode != 0:
        return False
    subprocess.run(["tc", "qdisc", "del", "dev", device, "root"], capture_output=True)
    return True


class LinkProxy:
    """A TCP relay from `listen` to `upstream`, shaped by `delay` and `loss` (see above)."""

    def __init__(self, listen: str, upstream: tuple[str, int], seed: int) -> None:
        self.listen = listen
        self.upstream = upstream
        self.delay = 0.0
        self.loss = 0.0
        self.stalls = 0  # emulated lost segments
        self.connections = 0
        self._random = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._accept, self.listen, 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(deliver())
        try:
            while True:
                data = await reader.read(65536)
                due = time.monotonic() + self.delay
                if data and self.loss:
                    rto = RTO
                    while self._random.random() < self.loss:
                        self.stalls += 1
                        due += rto
                        rto *= 2
                await queue.put((due, data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()
            writer.close()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


class Host:
    def __init__(self, name: str, index: int, base: int, upstream: tuple[str, int]) -> None:
        self.name = name
        self.outside = f"{name}-h"  # the veth end in the root namespace
        self.inside = f"{name}-n"
        self.gateway = f"10.{base}.{index}.1"
        self.addr = f"10.{base}.{index}.2"
        _ip("link", "add", self.outside, "type", "veth", "peer", "name", self.inside)
        _ip("netns", "add", name)
        _ip("link", "set", self.inside, "netns", name)
        _ip("addr", "add", f"{self.gateway}/30", "dev", self.outside)
        _ip("link", "set", self.outside, "up")
        for args in (
            ("addr", "add", f"{self.addr}/30", "dev", self.inside),
            ("link", "set", self.inside, "up"),
            ("link", "set", "lo", "up"),
        ):
            _ip("netns", "exec", name, "ip", *args)
        self.proxy = LinkProxy(self.gateway, upstream, seed=index)
        self.netem = False
        self.cuts = 0

    def cut(self) -> None:
        """Partition this host from the others (and from the database)."""
        self.cuts += 1
        _ip("link", "set", self.outside, "down")

    def heal(self) -> None:
        _ip("link", "set", self.outside, "up")

    def shape(self, delay: float, loss: float) -> str:
        """Latency (seconds, one way per end) and loss (a probability) on the link; returns
        how: `netem` or `proxy`."""
        if netem_available(self.outside):
            for device, ns in ((self.outside, None), (self.inside, self.name)):
                prefix = [] if ns is None else ["ip", "netns", "exec", ns]
                subprocess.run(
                    [*prefix, "tc", "qdisc", "add", "dev", device, "root", "netem",
                     "delay", f"{int(delay * 1000)}ms", "loss", f"{loss * 100:g}%"],
                    check=True, capture_output=True,
                )  # fmt: skip
            self.netem = True
            return "netem"
        self.proxy.delay = delay
        self.proxy.loss = loss
        return "proxy"

    def url(self, url: str) -> str:
        """`url` as this host reaches the database: through its link."""
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0] + "@" if len(netloc) == 2 else ""
        return urlunsplit(parts._replace(netloc=f"{user}{self.gateway}:{self.proxy.port}"))

    def close(self) -> None:
        self.proxy.close()
        _ip("link", "del", self.outside, check=False)
        _ip("netns", "del", self.name, check=False)


class Hosts:
    """Hosts for one test, removed at the end (their processes first)."""

    def __init__(self, cluster: Cluster) -> None:
        reason = namespaces_reason()
        if reason is not None:
            pytest.skip(reason)
        self.cluster = cluster
        upstream = urlsplit(cluster.url)
        self.upstream = (upstream.hostname or "127.0.0.1", upstream.port or 5432)
        self.base = 200 + os.getpid() % 50  # 10.200.0.0 - 10.249.0.0: apart from parallel runs
        self.prefix = f"nrt{uuid.uuid4().hex[:5]}"
        self.hosts: list[Host] = []

    def host(self) -> Host:
        index = len(self.hosts) + 1
        made = Host(f"{self.prefix}{index}", index, self.base, self.upstream)
        self.hosts.append(made)
        return made

    def start(self, host: Host, role: str, *args: str) -> subprocess.Popen[str]:
        """`noetl-vm ROLE ARGS... --db URL` inside `host`'s namespace (logged like the
        cluster's own processes)."""
        c = self.cluster
        url = host.url(c.url_for(role))
        name = f"{c.application_name}-{role}-{len(c.procs)}"
        with open(c.tmp / f"{name}.out", "w") as out, open(c.tmp / f"{name}.err", "w") as err:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", host.name, sys.executable, "-m",
                 "noetlc.cli.vm_main", role, *args, "--db", url],
                cwd=c.tmp, stdout=out, stderr=err, text=True,
            )  # fmt: skip
        c.procs.append(proc)
        c.logs[proc.pid] = name
        return proc

    def close(self) -> None:
        self.cluster.stop()
        for host in self.hosts:
            host.heal()
            host.close()


def effects(path: Path) -> dict[str, list[str]]:
    """item -> the pids that performed its effect (one line `ITEM PID` per effect)."""
    out: dict[str, list[str]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            item, _, pid = line.partition(" ")
            out.setdefault(item, []).append(pid)
    return out


def wait_for(predicate: Any, what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds} s"
        time.sleep(0.1)
