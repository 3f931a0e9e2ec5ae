"""Unavailability under a leader partition, and commit latency beside a slow
follower: this quorum and etcd, both behind the same Toxiproxy-compatible proxy.

Both systems run three members on loopback with default settings, driven by the
clients of `bench/writes.py` (each write returns once durable on a majority,
100 ms per attempt, moving to the next member on a failure). Their peer traffic
goes through proxies served by `tests/faults/fault_proxy.py` (or a real
`toxiproxy-server` on PATH), driven with `toxiproxy-python`; the clients talk to
the members directly.

etcd's members all dial a peer at the one URL it advertises, so its proxies are
per member: one in front of each member's peer port. This quorum's proxies are
per directed link, so the same fault is put on every link *into* a member.

Faults, each measured the same way on both:

* `leader_inbound_cut`: every connection to the leader's peer port blackholed,
  both ways (Toxiproxy's `timeout` toxic at 0: data dropped, nothing refused or
  reset, no process killed). `partition_unavailable_s` is the time from the cut
  to the first write acknowledged again; then the cut heals and the cluster
  settles before the next run.
* `leader_isolated` (this quorum only, since its proxies are per link): every
  link to and from the leader cut, scenario 1 of the fault tests.
* `leader_stall` (the price of detecting a silent leader sooner): the idle
  leader's process group is stopped (SIGSTOP) for `pause_ms`, then resumed;
  `leader_stall_changed_leader` is the fraction of runs after which another
  member leads. No network fault: a stall long enough to be taken for a
  partition costs an election on either system.
* `slow_follower`: 200 ms ± 50 ms latency on every connection into one
  follower's peer port; `commit_latency_p99_ms` of writes at concurrency 1
  over 5 s, beside the same without the fault.

    .venv/bin/python bench/partition_failover.py [--runs 5] [--systems quorum,etcd]
        [--stalls 600,900,1000,1200]

One JSON object per measurement on stdout (median, min, max over the runs);
progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import itertools
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # process_logs
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "faults"))

from netfaults import DOWN, UP, Network
from report import emit, percentile, say
from toxiproxy import Toxiproxy
from toxiproxy_server import toxiproxy_server
from write_systems import (
    Client,
    EtcdSystem,
    QuorumSystem,
    ensure_etcd,
    wait_for,
)

ATTEMPT_S = 0.1
SETTLE_S = 3.0


class ProxiedQuorum(QuorumSystem):
    """QuorumSystem with every controller-to-controller link through a proxy."""

    def __init__(self, root: Path, net: Network) -> None:
        super().__init__(root)
        self.net = net

    def peer_address(self, node: int, peer: int) -> str:
        """Peers through the proxy of the link `node` -> `peer`, made on first use."""
        if peer == node:
            return self.address(node)
        link = (f"q{node}", f"q{peer}")
        if link in self.net.links:
            return str(self.net.links[link].listen)
        return self.net.link(*link, self.address(peer))

    def leader(self) -> int:
        from quorum.client import QuorumClient

        async def ask() -> int:
            client = QuorumClient(self.addresses(), self.cluster_id)
            try:
                for node in self.ports:
                    try:
                        view = await client.describe_quorum(self.address(node), timeout_s=0.5)
                    except Exception:
                        continue
                    if view.role == "leader" and view.high_watermark > 0:
                        return node
                return -1
            finally:
                await client.close()

        return asyncio.run(ask())

    def inbound(self, member: int) -> list[tuple[str, str]]:
        return [(f"q{src}", f"q{member}") for src in self.ports if src != member]

    async def client(self) -> Client:
        return _UnaryQuorumClient(self)


class _UnaryQuorumClient:
    """Unary `QuorumLog.Write` calls, each with its own gRPC deadline, to the
    members' real addresses; a NOT_LEADER hint is followed by the leader's id
    (its address in the hint is the answering member's proxy to it). Like the
    etcd client: one attempt per call, the next member on a failure. (The
    library client's kept-open calls can hang on a blackholed new connection,
    see tests/faults/test_client_faults.py.)"""

    def __init__(self, system: ProxiedQuorum) -> None:
        import grpc

        from quorum.gen import raft_pb2_grpc

        self._cluster_id = system.cluster_id
        self._ids = sorted(system.ports)
        self._channels = {n: grpc.aio.insecure_channel(system.address(n)) for n in system.ports}
        self._stubs = {n: raft_pb2_grpc.QuorumLogStub(c) for n, c in self._channels.items()}
        self._current = self._ids[0]

    async def write(self, key: bytes, value: bytes, attempt_timeout_s: float | None) -> None:
        import grpc

        from quorum.controller.record_codec import noop
        from quorum.gen import raft_pb2
        from quorum.rpc.wire_errors import wire_error

        request = raft_pb2.WriteRequest(cluster_id=self._cluster_id, records=[noop(key + value)])
        while True:
            try:
                await self._stubs[self._current].Write(request, timeout=attempt_timeout_s or 10)
                return
            except grpc.aio.AioRpcError as err:
                hinted = wire_error(err).leader_id
                if hinted in self._stubs and hinted != self._current:
                    self._current = hinted
                else:
                    self._current = self._ids[(self._ids.index(self._current) + 1) % 3]

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()


class ProxiedEtcd(EtcdSystem):
    """EtcdSystem whose members advertise (and dial each other at) a proxy in
    front of each one's peer port."""

    def __init__(self, root: Path, net: Network) -> None:
        super().__init__(root)
        self.net = net

    def start(self) -> None:
        etcd = ensure_etcd()
        advertised = {
            i: self.net.link("peers", f"e{i}", f"127.0.0.1:{p}") for i, p in self.peer_ports.items()
        }
        cluster = ",".join(f"e{i}=http://{a}" for i, a in advertised.items())
        for i in (1, 2, 3):
            client_url = f"http://127.0.0.1:{self.client_ports[i]}"
            self.members.launch(
                i,
                [etcd, "--name", f"e{i}", "--data-dir", str(self.root / f"etcd-{i}"),
                 "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                 "--listen-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
                 "--initial-advertise-peer-urls", f"http://{advertised[i]}",
                 "--initial-cluster", cluster, "--initial-cluster-token", "bench",
                 "--initial-cluster-state", "new"],
            )  # fmt: skip
        wait_for(lambda: self.leader() > 0, 30, "an etcd leader")

    def inbound(self, member: int) -> list[tuple[str, str]]:
        return [("peers", f"e{member}")]


System = ProxiedQuorum | ProxiedEtcd


def cut(net: Network, links: list[tuple[str, str]]) -> None:
    for src, dst in links:
        for stream in (UP, DOWN):
            net.add(src, dst, stream, "timeout", timeout=0)


def slow(net: Network, links: list[tuple[str, str]]) -> None:
    for src, dst in links:
        for stream in (UP, DOWN):
            net.add(src, dst, stream, "latency", latency=200, jitter=50)


async def steady(client: Client, seconds: float, counter: itertools.count[int]) -> list[float]:
    """Writes one after another for `seconds`; their latencies."""
    latencies = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.monotonic()
        await client.write(b"p%012d" % next(counter), b"x" * 80, ATTEMPT_S)
        latencies.append(time.monotonic() - start)
    return latencies


async def unavailable_once(system: System, fault: Callable[[int], None], net: Network) -> float:
    client = await system.client()
    counter = itertools.count()
    try:
        await steady(client, 1.0, counter)
        leader = await asyncio.to_thread(system.leader)
        await asyncio.to_thread(fault, leader)
        cut_at = time.monotonic()
        say(f"   cut around leader {leader}")
        await client.write(b"p%012d" % next(counter), b"x" * 80, ATTEMPT_S)
        took = time.monotonic() - cut_at
        say(f"   written again after {took:.3f}s")
        await asyncio.to_thread(net.heal)
        await asyncio.sleep(SETTLE_S)
        await steady(client, 0.5, counter)  # settled: writes go through again
        return took
    finally:
        await client.close()


async def latency_p99(system: System, net: Network, faulty: bool) -> float:
    client = await system.client()
    try:
        leader = await asyncio.to_thread(system.leader)
        follower = next(m for m in (1, 2, 3) if m != leader)
        if faulty:
            await asyncio.to_thread(slow, net, system.inbound(follower))
        counter = itertools.count()
        await steady(client, 1.0, counter)
        latencies = await steady(client, 5.0, counter)
        return percentile(latencies, 0.99) * 1000
    finally:
        await asyncio.to_thread(net.heal)
        await client.close()


STALLS_MS = (600, 900, 1000, 1200)


def stall_changes_leader(system: System, pause_ms: int) -> bool:
    """Stop the idle leader for `pause_ms`, resume it, let the cluster settle:
    does another member lead now?"""
    leader = system.leader()
    group = system.members.procs[leader].pid
    os.killpg(group, signal.SIGSTOP)
    time.sleep(pause_ms / 1000)
    os.killpg(group, signal.SIGCONT)
    time.sleep(SETTLE_S)
    wait_for(lambda: system.leader() > 0, 30, "a leader after the stall")
    return system.leader() != leader


def figures(values: list[float]) -> dict[str, float | list[float]]:
    return {
        "value": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "runs": [round(v, 3) for v in values],
    }


def run_system(
    name: str, toxiproxy: Toxiproxy, runs: int, root: Path, stalls: tuple[int, ...]
) -> None:
    for proxy in list(toxiproxy.proxies().values()):
        proxy.destroy()
    net = Network(toxiproxy)
    system: System = ProxiedQuorum(root, net) if name == "quorum" else ProxiedEtcd(root, net)
    say(f"== {name}: three members under {root}, peer links through proxies")
    system.start()
    try:
        faults: dict[str, Callable[[int], None]] = {
            "leader_inbound_cut": lambda leader: cut(net, system.inbound(leader))
        }
        if isinstance(system, ProxiedQuorum):
            faults["leader_isolated"] = lambda leader: net.isolate(f"q{leader}")
        for fault, apply in faults.items():
            values = []
            for run in range(runs):
                took = asyncio.run(unavailable_once(system, apply, net))
                say(f"   {fault} run {run + 1}: unavailable {took:.3f} s")
                values.append(took)
            emit(metric="partition_unavailable_s", system=name, fault=fault, **figures(values))
        for pause_ms in stalls:
            changed = [stall_changes_leader(system, pause_ms) for _ in range(runs)]
            say(f"   leader stall {pause_ms} ms: leader changed in {sum(changed)}/{runs} runs")
            emit(
                metric="leader_stall_changed_leader",
                system=name,
                pause_ms=pause_ms,
                value=round(sum(changed) / runs, 2),
                runs=runs,
            )
        for faulty in (False, True):
            values = [asyncio.run(latency_p99(system, net, faulty)) for _ in range(runs)]
            fault = "slow_follower" if faulty else "none"
            say(f"   commit latency p99 ({fault}): {values}")
            emit(metric="commit_latency_p99_ms", system=name, fault=fault, **figures(values))
    finally:
        system.stop()


def main() -> None:
    if os.environ.get("BENCH_STACK_DUMP_S"):  # where a hung run is stuck
        faulthandler.dump_traceback_later(float(os.environ["BENCH_STACK_DUMP_S"]), exit=True)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--systems", default="quorum,etcd")
    parser.add_argument(
        "--stalls",
        default=",".join(map(str, STALLS_MS)),
        help="leader stall lengths in ms, comma-separated",
    )
    args = parser.parse_args()
    stalls = tuple(int(ms) for ms in args.stalls.split(",") if ms)
    with toxiproxy_server() as toxiproxy:
        for name in args.systems.split(","):
            with tempfile.TemporaryDirectory(prefix=f"partition-{name}-") as root:
                emit(metric="load_average", system=name, phase="start", value=os.getloadavg())
                run_system(name, toxiproxy, args.runs, Path(root), stalls)
                emit(metric="load_average", system=name, phase="end", value=os.getloadavg())


if __name__ == "__main__":
    main()
