"""Scenario 1's unavailability and scenario 4's commit latency one level below
the TCP proxy: each controller in its own network namespace, the faults on the
packets of the veth links (tc netem where the kernel has it, else the packet
wire of tests/faults/netns), measured exactly as `bench/partition_failover.py`
measures them through the proxy (same unary client, 100 ms per attempt, in the
root namespace over links of its own that stay intact).

* `leader_isolated`: every packet between the leader and both followers
  dropped; `partition_unavailable_s` from the cut to the first write
  acknowledged again; then healed and settled before the next run.
* `slow_follower`: 200 ms ± 50 ms on every packet to and from one follower
  (both its links to the other controllers); `lossy_follower`: 8% of them
  lost; `commit_latency_p99_ms` of writes at concurrency 1 over 5 s, beside
  the same without a fault.

    .venv/bin/python bench/netns_failover.py [--runs 5] [--links auto|wire|netem]

Needs root and `ip` (network namespaces). One JSON object per measurement on
stdout (median, min, max over the runs); progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "faults"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "faults" / "netns"))

from links import Impairment, Links, namespaced_links
from partition_failover import ProxiedQuorum, figures, steady, unavailable_once
from report import emit, percentile, say
from write_systems import QuorumSystem

SLOW = Impairment(delay_ms=200, jitter_ms=50)
LOSSY = Impairment(loss=0.08)


def node_name(member: int) -> str:
    return f"c{member}"


class NamespacedQuorum(ProxiedQuorum):
    """Three controllers, each started in its own namespace and listening on that
    namespace's address; the voters dial one another directly."""

    def __init__(self, root: Path, links: Links) -> None:
        QuorumSystem.__init__(self, root)
        self.links = links
        self.net = links  # what `unavailable_once` heals

    def address(self, node: int) -> str:
        return f"{self.links.topology.address(node_name(node))}:{self.ports[node]}"

    def peer_address(self, node: int, peer: int) -> str:
        return self.address(peer)  # the voters dial one another directly

    def launch_prefix(self, node: int) -> list[str]:
        return list(self.links.topology.prefix(node_name(node)))


async def latency_p99(system: NamespacedQuorum, impairment: Impairment | None) -> float:
    client = await system.client()
    try:
        leader = await asyncio.to_thread(system.leader)
        follower = next(m for m in (1, 2, 3) if m != leader)
        if impairment is not None:
            await asyncio.to_thread(system.links.impair_node, node_name(follower), impairment)
        counter = itertools.count()
        await steady(client, 1.0, counter)
        latencies = await steady(client, 5.0, counter)
        return percentile(latencies, 0.99) * 1000
    finally:
        await asyncio.to_thread(system.links.heal)
        await client.close()


def run(runs: int, root: Path, kind: str) -> None:
    with namespaced_links(tuple(node_name(n) for n in (1, 2, 3)), root, kind) as links:
        layer = f"namespaces ({links.topology.mode})"
        say(f"== quorum: three controllers in namespaces under {root}, links by {layer}")
        system = NamespacedQuorum(root, links)
        system.start()
        try:
            values = []
            for number in range(runs):
                isolate = lambda leader: links.isolate(node_name(leader))  # noqa: E731
                took = asyncio.run(unavailable_once(system, isolate, links))  # type: ignore[arg-type]
                say(f"   leader_isolated run {number + 1}: unavailable {took:.3f} s")
                values.append(took)
            emit(metric="partition_unavailable_s", system="quorum", fault="leader_isolated",
                 links=layer, **figures(values))  # fmt: skip
            for fault, impairment in (("none", None), ("slow_follower", SLOW),
                                      ("lossy_follower", LOSSY)):  # fmt: skip
                values = [asyncio.run(latency_p99(system, impairment)) for _ in range(runs)]
                say(f"   commit latency p99 ({fault}): {values}")
                emit(metric="commit_latency_p99_ms", system="quorum", fault=fault,
                     links=layer, **figures(values))  # fmt: skip
        finally:
            system.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--links", default="auto", choices=["auto", "wire", "netem"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="netns-failover-") as root:
        run(args.runs, Path(root), args.links)


if __name__ == "__main__":
    main()
