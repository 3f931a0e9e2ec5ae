"""Real controller processes on loopback for integration tests.

Each cluster gets free ports and a temporary directory, is formatted and started
with the console scripts an operator uses (`quorumctl storage format`,
`quorum-controller --config`), and is always stopped (SIGKILL as a last resort)
when the test ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from process_logs import watch

from quorum.admin_client import AdminClient
from quorum.client import QuorumClient
from quorum.common.config import render_properties
from quorum.common.meta_properties import random_uuid, read_meta_properties
from quorum.common.tls import TlsSettings
from quorum.controller.record_codec import noop
from quorum.gen import admin_pb2 as admin_pb
from quorum.gen import raft_pb2 as pb

BIN = Path(sys.executable).parent


# Ports handed to processes that bind them later. Taken at random below Linux's
# ephemeral range (32768+): the kernel gives every bind-to-0 and outgoing
# connection a port from that range, so a port found free there was often taken
# by another test's process before ours started ("Address already in use").
PORT_RANGE = (20000, 32000)


_HANDED_OUT: set[int] = set()

# Drawn from the OS's entropy, not from `random`'s global state: pytest-randomly
# reseeds that before every test from the run's seed, and two runs with the same
# seed (a replay beside another run on one machine) must not pick the same ports.
_PORT_PICKER = random.SystemRandom()


def free_port() -> int:
    """A port free now and not handed out before by this process: two calls
    before anything binds (a node's listener and metrics ports) must not get
    the same one (a CI run did)."""
    for _ in range(200):
        port = _PORT_PICKER.randrange(*PORT_RANGE)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _HANDED_OUT.add(port)
            return port
    raise AssertionError(f"no free port in {PORT_RANGE}")


def quorumctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "quorumctl"), *args], capture_output=True, text=True, timeout=60, check=False
    )


@dataclass
class Proc:
    node_id: int
    port: int
    metrics_port: int
    config: Path
    data_dir: Path
    log_file: Path
    popen: subprocess.Popen[bytes] | None = None
    host: str = "127.0.0.1"
    launcher: tuple[str, ...] = ()  # a command prefix, e.g. `ip netns exec NS`
    env: dict[str, str] = field(default_factory=dict)  # added to the test's environment

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def metrics(self) -> dict[str, float]:
        """The /metrics page as {'name{labels}': value}."""
        url = f"http://{self.host}:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values

    def log_text(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""


@dataclass
class Cluster:
    root: Path
    cluster_id: str
    procs: dict[int, Proc] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)
    brokers: dict[int, Proc] = field(default_factory=dict)
    client_tls: TlsSettings | None = None  # what the test's own clients present
    directory_ids: dict[int, str] = field(default_factory=dict)  # kraft.version 1 only

    @classmethod
    def create(
        cls,
        root: Path,
        voters: int = 3,
        observers: int = 0,
        extra: Mapping[str, str] | None = None,
        node_extra: Mapping[int, Mapping[str, str]] | None = None,
        hosts: Mapping[int, str] | None = None,
        kraft_version: int = 0,
    ) -> Cluster:
        """`kraft_version` 1 (KIP-853): the voters are formatted with
        `--initial-controllers` (directory ids in `directory_ids`), the observers
        with `--no-initial-controllers`."""
        cluster_id = random_uuid()  # what `quorumctl storage random-uuid` prints
        cluster = cls(root, cluster_id, extra=dict(extra or {}))
        ids = list(range(1, voters + observers + 1))
        for node_id in ids:
            cluster.procs[node_id] = Proc(
                node_id,
                free_port(),
                free_port(),
                root / "config" / f"controller-{node_id}.properties",
                root / f"controller-{node_id}",
                root / "logs" / f"controller-{node_id}.log",
                host=(hosts or {}).get(node_id, "127.0.0.1"),
            )
        voter_ids = ids[:voters]
        voter_list = ",".join(f"{n}@{cluster.procs[n].address}" for n in voter_ids)
        (root / "config").mkdir(parents=True, exist_ok=True)
        (root / "logs").mkdir(parents=True, exist_ok=True)
        for node_id, proc in cluster.procs.items():
            props = {
                "node.id": str(node_id),
                "process.roles": "controller" if node_id in voter_ids else "broker",
                "controller.quorum.voters": voter_list,
                "listeners": f"CONTROLLER://{proc.address}",
                "metadata.log.dir": str(proc.data_dir),
                "metrics.listener": f"http://{proc.host}:{proc.metrics_port}",
                **cluster.extra,
                **(node_extra or {}).get(node_id, {}),
            }
            proc.config.write_text(render_properties(props))
        flags: dict[Path, list[str]] = {}
        if kraft_version:
            cluster.directory_ids = {n: random_uuid() for n in ids}
            initial = ",".join(
                f"{n}@{cluster.procs[n].address}:{cluster.directory_ids[n]}" for n in voter_ids
            )
            for node_id, proc in cluster.procs.items():
                flags[proc.config] = (
                    ["--initial-controllers", initial]
                    if node_id in voter_ids
                    else ["--no-initial-controllers"]
                )
        cluster._format_all([p.config for p in cluster.procs.values()], flags=flags)
        if kraft_version:  # the observers' directory ids are the ones format chose
            cluster.directory_ids = {
                n: read_meta_properties(p.data_dir).directory_id or ""
                for n, p in cluster.procs.items()
            }
        return cluster

    def format(self, node_id: int, cluster_id: str | None = None) -> None:
        self._format(self.procs[node_id].config, cluster_id)

    def _format(self, config: Path, cluster_id: str | None = None) -> None:
        self._format_all([config], cluster_id)

    def _format_all(
        self,
        configs: list[Path],
        cluster_id: str | None = None,
        flags: Mapping[Path, list[str]] | None = None,
    ) -> None:
        """`quorumctl storage format` for each, run side by side (each is a
        process start of a second or more on a busy machine)."""
        cluster_id = cluster_id or self.cluster_id
        command = [str(BIN / "quorumctl"), "storage", "format", "--cluster-id", cluster_id]
        running = [
            subprocess.Popen(
                [*command, "--config", str(config), *(flags or {}).get(config, [])],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for config in configs
        ]
        for popen in running:
            _, stderr = popen.communicate(timeout=60)
            assert popen.returncode == 0, stderr

    # ------------------------------------------------------------------ brokers

    def add_brokers(self, *broker_ids: int, **extra: str) -> None:
        """Configure and format broker agents (ids must not be controller ids)."""
        voters = ",".join(
            f"{n}@127.0.0.1:{p.port}" for n, p in self.procs.items() if n not in self.brokers
        )
        for broker_id in broker_ids:
            proc = Proc(
                broker_id, free_port(), free_port(),
                self.root / "config" / f"broker-{broker_id}.properties",
                self.root / f"broker-{broker_id}",
                self.root / "logs" / f"broker-{broker_id}.log",
            )  # fmt: skip
            props = {
                "node.id": str(broker_id),
                "process.roles": "broker",
                "controller.quorum.voters": voters,
                "listeners": f"PLAINTEXT://127.0.0.1:{proc.port}",
                "metadata.log.dir": str(proc.data_dir),
                "metrics.listener": f"http://127.0.0.1:{proc.metrics_port}",
                **{k.replace("__", "."): v for k, v in extra.items()},
            }
            proc.config.write_text(render_properties(props))
            self.brokers[broker_id] = proc
        self._format_all([self.brokers[b].config for b in broker_ids])

    def start_brokers(self, *broker_ids: int, flags: tuple[str, ...] = ()) -> None:
        for broker_id in broker_ids or tuple(self.brokers):
            proc = self.brokers[broker_id]
            assert not proc.alive()
            watch(proc.log_file, f"broker {broker_id}")
            with proc.log_file.open("ab") as out:
                proc.popen = subprocess.Popen(
                    [str(BIN / "broker-agent"), "--config", str(proc.config), *flags],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env={**os.environ, **proc.env} if proc.env else None,
                )

    def start(self, *node_ids: int) -> None:
        for node_id in node_ids or tuple(self.procs):
            proc = self.procs[node_id]
            assert not proc.alive()
            watch(proc.log_file, f"controller {node_id}")
            with proc.log_file.open("ab") as out:
                proc.popen = subprocess.Popen(
                    [*proc.launcher, str(BIN / "quorum-controller"), "--config", str(proc.config)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

    def kill(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[node_id]
        assert proc.popen is not None
        proc.popen.send_signal(sig)

    def wait_exit(self, node_id: int, timeout_s: float = 15.0) -> int:
        popen = self.procs[node_id].popen
        assert popen is not None
        return popen.wait(timeout_s)

    def stop_all(self) -> None:
        """Brokers first (their controlled shutdown needs the controllers), then
        controllers; SIGKILL for whatever outlives its grace period."""
        for group in (self.brokers.values(), self.procs.values()):
            for proc in group:
                if proc.alive():
                    assert proc.popen is not None
                    proc.popen.send_signal(signal.SIGTERM)
            for proc in group:
                if proc.popen is None:
                    continue
                try:
                    proc.popen.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.popen.pid, signal.SIGKILL)
                    proc.popen.wait(5)

    def voter_addresses(self) -> list[str]:
        return [p.address for p in self.procs.values()]

    def client(self) -> QuorumClient:
        return QuorumClient(self.voter_addresses(), self.cluster_id, tls=self.client_tls)

    # ------------------------------------------------------------ observations

    def describe(self, node_id: int) -> pb.DescribeQuorumResponse:
        return run(self._describe(node_id))

    async def _describe(self, node_id: int) -> pb.DescribeQuorumResponse:
        client = self.client()
        try:
            return await client.describe_quorum(
                self.procs[node_id].address, timeout_s=2, include_digest=True
            )
        finally:
            await client.close()

    def wait_for_leader(
        self, among: Iterator[int] | list[int] | None = None, timeout_s: float = 15.0
    ) -> pb.DescribeQuorumResponse:
        """The leader's view once one of `among` leads and has committed its epoch."""
        ids = list(among) if among is not None else list(self.procs)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for node_id in ids:
                if not self.procs[node_id].alive():
                    continue
                try:
                    view = self.describe(node_id)
                except Exception:
                    continue
                if view.role == "leader" and view.high_watermark > 0:
                    return view
            time.sleep(0.05)
        raise AssertionError(f"no leader among {ids} within {timeout_s}s:\n{self.logs()}")

    def wait_until(self, predicate: object, timeout_s: float = 15.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                if predicate():  # type: ignore[operator]
                    return
            except Exception as err:  # a node still starting
                last = err
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what} ({last})\n{self.logs()}")

    def write(self, count: int, size: int = 100, prefix: bytes = b"r") -> list[int]:
        """`count` committed single-record writes; returns their offsets."""

        async def go() -> list[int]:
            client = self.client()
            try:
                offsets = []
                for i in range(count):
                    payload = (prefix + b"%08d" % i).ljust(size, b".")
                    result = await client.write([noop(payload)], deadline_s=15)
                    offsets.append(result.last_offset)
                return offsets
            finally:
                await client.close()

        return run(go())

    def call(self, kind: str, method: str, request: Any, deadline_s: float = 30.0) -> Any:
        """One admin (`kind="admin"`) or broker call; the active controller is asked
        first, so a test reads its own writes and sees broker sessions."""
        active = self.procs[self.wait_for_leader().leader_id].address
        bootstrap = [active] + [a for a in self.voter_addresses() if a != active]

        async def go() -> Any:
            client = AdminClient(bootstrap, self.cluster_id, tls=self.client_tls)
            try:
                return await getattr(client, kind)(method, request, deadline_s=deadline_s)
            finally:
                await client.close()

        return run(go())

    def logs(self) -> str:
        parts = []
        for kind, procs in (("controller", self.procs), ("broker", self.brokers)):
            for proc in procs.values():
                tail = "\n".join(proc.log_text().splitlines()[-15:])
                parts.append(f"--- {kind} {proc.node_id} ---\n{tail}")
        return "\n".join(parts)


T = TypeVar("T")


@contextmanager
def running_cluster(root: Path, **create: Any) -> Iterator[Cluster]:
    """A started cluster with a leader, always stopped afterwards (the usual fixture)."""
    cluster = Cluster.create(root, **create)
    cluster.start()
    try:
        cluster.wait_for_leader()
        yield cluster
    finally:
        cluster.stop_all()


@contextmanager
def cluster_with_online_brokers(
    root: Path,
    *broker_ids: int,
    extra: Mapping[str, str] | None = None,
    **broker_extra: str,
) -> Iterator[Cluster]:
    """A running cluster with these broker agents (heartbeat 500 ms) all ONLINE;
    `extra` goes to the controllers' properties, `broker_extra` (dots as `__`)
    to the brokers'."""
    with running_cluster(root, extra=extra) as cluster:
        cluster.add_brokers(
            *broker_ids, **{"broker__heartbeat__interval__ms": "500", **broker_extra}
        )
        cluster.start_brokers()

        def online() -> list[int]:
            # In process (a quorumctl per poll costs seconds of CPU on a busy machine).
            reply = cluster.call("admin", "DescribeCluster", admin_pb.DescribeClusterRequest())
            return sorted(b.broker_id for b in reply.brokers if b.state == "ONLINE")

        cluster.wait_until(lambda: online() == sorted(broker_ids), 60, "the brokers ONLINE")
        yield cluster


def ctl(
    cluster: Cluster, *args: str, flag: str = "--bootstrap-controller"
) -> subprocess.CompletedProcess[str]:
    """`quorumctl ARGS` against `cluster` (`flag` names how the bootstrap is given)."""
    return quorumctl(*args, flag, ",".join(cluster.voter_addresses()))


def ctl_json(cluster: Cluster, *args: str, flag: str = "--bootstrap-controller") -> Any:
    """`quorumctl ARGS --output json` against `cluster`, which must succeed."""
    done = ctl(cluster, *args, "--output", "json", flag=flag)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)
