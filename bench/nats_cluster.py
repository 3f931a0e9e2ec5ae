"""Three NATS servers with JetStream, clustered on loopback: the peer of `bench/produce.py`.

Debian's `nats-server` (`make nats-server` installs it), each server with free
ports (client, route, monitoring) and its own store directory under `root`,
routes to the other two, JetStream on. Defaults everywhere else, as the
brokers run with theirs. Always stopped (SIGTERM, then SIGKILL) on the way out.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.integration.controller_cluster import free_port


@dataclass
class NatsServer:
    name: str
    client_port: int
    route_port: int
    monitor_port: int
    popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.client_port}"


def nats_server_binary() -> str:
    found = shutil.which("nats-server") or (
        "/usr/sbin/nats-server" if os.path.exists("/usr/sbin/nats-server") else None
    )
    if found is None:
        raise RuntimeError("nats-server is not installed: run `make nats-server`")
    return found


@contextmanager
def nats_cluster(root: Path, size: int = 3) -> Iterator[list[NatsServer]]:
    binary = nats_server_binary()
    servers = [NatsServer(f"n{i + 1}", free_port(), free_port(), free_port()) for i in range(size)]
    root.mkdir(parents=True, exist_ok=True)
    try:
        for server in servers:
            routes = ",".join(
                f"nats://127.0.0.1:{s.route_port}" for s in servers if s is not server
            )
            store = root / server.name
            log = (root / f"{server.name}.log").open("ab")
            server.popen = subprocess.Popen(
                [
                    binary, "-a", "127.0.0.1", "-p", str(server.client_port),
                    "-n", server.name, "--cluster_name", "bench",
                    "--cluster", f"nats://127.0.0.1:{server.route_port}",
                    "--routes", routes, "-m", str(server.monitor_port),
                    "-js", "-sd", str(store),
                ],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        wait_ready(servers)
        yield servers
    finally:
        for server in servers:
            if server.popen is not None and server.popen.poll() is None:
                server.popen.send_signal(signal.SIGTERM)
        for server in servers:
            if server.popen is None:
                continue
            try:
                server.popen.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(server.popen.pid, signal.SIGKILL)
                server.popen.wait(5)


def wait_ready(servers: list[NatsServer], timeout_s: float = 60) -> None:
    """Until every server answers /healthz with JetStream's meta leader elected."""
    deadline = time.monotonic() + timeout_s
    pending = list(servers)
    while pending:
        server = pending[0]
        try:
            url = f"http://127.0.0.1:{server.monitor_port}/healthz?js-enabled-only=true"
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    pending.pop(0)
                    continue
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"nats-server {server.name} not healthy in {timeout_s} s")
        time.sleep(0.1)


def create_stream(servers: list[NatsServer], name: str, subject: str, replicas: int = 3) -> None:
    """A file-backed stream of `replicas` replicas (retried while JetStream's meta
    group is still electing its leader)."""

    async def go() -> None:
        import nats

        nc = await nats.connect(servers=[s.url for s in servers])
        try:
            jsm = nc.jsm()
            deadline = time.monotonic() + 60
            while True:
                try:
                    await jsm.add_stream(
                        name=name, subjects=[subject], storage="file", num_replicas=replicas
                    )
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
            while True:  # the stream's own Raft group has a leader
                info = await jsm.stream_info(name)
                if info.cluster is not None and info.cluster.leader:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"stream {name} has no leader")
                await asyncio.sleep(0.1)
        finally:
            await nc.close()

    asyncio.run(go())


def stream_messages(servers: list[NatsServer], name: str) -> int:
    async def go() -> int:
        import nats

        nc = await nats.connect(servers=[s.url for s in servers])
        try:
            return int((await nc.jsm().stream_info(name)).state.messages)
        finally:
            await nc.close()

    return asyncio.run(go())


def delete_stream(servers: list[NatsServer], name: str) -> None:
    async def go() -> None:
        import nats

        nc = await nats.connect(servers=[s.url for s in servers])
        try:
            await nc.jsm().delete_stream(name)
        finally:
            await nc.close()

    asyncio.run(go())
