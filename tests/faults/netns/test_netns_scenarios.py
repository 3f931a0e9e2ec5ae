"""Scenarios 1 and 4 of the fault tests again, one level down: each controller in
its own network namespace, the faults on the links' packets (tc netem where the
kernel has it, the packet wire here), TCP end to end between the controllers.
The client workload runs in the test's own namespace over links of its own,
which stay intact; the same checkers judge the history after healing.

Each scenario prints one JSON line like tests/faults/test_scenarios.py: writes
attempted, acknowledged, refused, in doubt, lost (must be 0) and the longest
stretch without an acknowledged write.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkers import OK, check_linearizable
from controller_cluster import Cluster
from fault_cluster import FaultCluster, describe, name, to_thread
from links import Impairment, Links, namespaced_links
from topology import NamespacesUnavailable
from workload import REGISTER_INITIAL, Workload, running

pytestmark = pytest.mark.slow

CONTROLLERS = (1, 2, 3)
FOLLOWER_STATES = {"resigned", "follower", "prospective", "candidate", "unattached"}


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Links]:
    with contextlib.ExitStack() as stack:
        try:
            nodes = tuple(name(n) for n in CONTROLLERS)
            workdir = tmp_path_factory.mktemp("netns")
            links = stack.enter_context(namespaced_links(nodes, workdir))
        except NamespacesUnavailable as err:
            pytest.skip(f"network namespaces unavailable: {err}")
        yield links


@pytest.fixture
def fc(tmp_path: Path, links: Links) -> Iterator[FaultCluster[Links]]:
    """Three controllers, each started inside its namespace and listening on its
    namespace's address; voters dial one another directly (no proxy)."""
    topology = links.topology
    hosts = {n: topology.address(name(n)) for n in CONTROLLERS}
    cluster = Cluster.create(tmp_path, hosts=hosts)
    for node, proc in cluster.procs.items():
        proc.launcher = topology.prefix(name(node))
    fc = FaultCluster(cluster, links)
    try:
        cluster.start()
        fc.leader()
        yield fc
    finally:
        links.heal()
        fc.stop()


async def role_of(fc: FaultCluster[Links], node: int) -> str:
    try:
        view = await describe(fc.cluster.procs[node].address, fc.cluster.cluster_id)
    except Exception:
        return "unreachable"
    return str(view.role)


async def wait_role(fc: FaultCluster[Links], node: int, roles: set[str], timeout_s: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if await role_of(fc, node) in roles:
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"node {node} not {roles} within {timeout_s}s")


# ---------------------------------------------------------------- scenario 1


def test_1_isolated_leader_in_its_namespace_is_replaced_resigns_and_rejoins(
    fc: FaultCluster[Links],
) -> None:
    """Every packet between the leader and both followers dropped (the client's
    links to it intact): a new leader, the old one resigns by check-quorum and
    acknowledges nothing issued after the cut, and rejoins as a follower once
    the packets flow again (TCP's own retransmissions resume the connections).
    The planted stale reads from the old leader are caught here too."""
    old = fc.leader()
    others = [n for n in fc.ids if n != old]

    async def scenario() -> tuple[Workload, Workload, float, float, float, float]:
        workload, stale = fc.workload(), fc.workload(appenders=0, stale_reads_from=old)
        async with running(workload):
            await asyncio.sleep(2)
            cut = time.monotonic()
            await to_thread(fc.net.isolate, name(old))
            cut_done = time.monotonic()
            async with running(stale):
                resigned = await wait_role(fc, old, FOLLOWER_STATES, 10)
                new = await to_thread(fc.leader, others)
                await asyncio.sleep(2)
            tail = await describe(fc.cluster.procs[old].address, fc.cluster.cluster_id)
            heal = time.monotonic()
            await to_thread(fc.net.heal)
            await asyncio.sleep(3)
        print(
            f"old leader {old} resigned {resigned:.2f}s after the cut; new leader {new}; "
            f"its log end {tail.log_end_offset}, high watermark {tail.high_watermark}"
        )
        return workload, stale, cut, cut_done, heal, resigned

    workload, stale, cut, cut_done, heal, resigned = asyncio.run(scenario())
    late = [
        op for op in workload.appends if op.node == old and op.outcome == OK and op.call > cut_done
    ]
    assert not late, f"the isolated leader acknowledged writes issued after the cut: {late[:3]}"
    assert resigned < 6.0
    figures = fc.check(workload, "1 leader isolation (namespaces)", (cut, heal))
    views = fc.wait_converged()
    assert views[old].role == "follower" and views[old].leader_id != old
    assert figures["writes_lost"] == 0
    planted = check_linearizable(workload.register + stale.register, REGISTER_INITIAL)
    assert not planted.ok, "stale reads from the partitioned old leader went unnoticed"


# ---------------------------------------------------------------- scenario 4


def slow_follower(fc: FaultCluster[Links], impairment: Impairment, label: str) -> dict[str, float]:
    """One follower's links to both other controllers impaired for 6 s under one
    appender; returns commit latency figures before and during the fault."""
    leader = fc.leader()
    follower = next(n for n in fc.ids if n != leader)

    def dropped() -> int:
        links = [(name(follower), name(n)) for n in fc.ids if n != follower]
        return sum(fc.net.dropped(a, b) + fc.net.dropped(b, a) for a, b in links)

    async def scenario() -> tuple[Workload, float, float, int]:
        workload = fc.workload(appenders=1, registers=0)
        async with running(workload):
            await asyncio.sleep(3)
            start = time.monotonic()
            before = await to_thread(dropped)  # counts since the wire started
            await to_thread(fc.net.impair_node, name(follower), impairment)
            await asyncio.sleep(6)
            lost = await to_thread(dropped) - before
            heal = time.monotonic()
            await to_thread(fc.net.heal)
            await asyncio.sleep(2)
        return workload, start, heal, lost

    workload, start, heal, lost = asyncio.run(scenario())

    def latencies(begin: float, end: float) -> list[float]:
        return sorted(
            op.ret - op.call
            for op in workload.appends
            if op.outcome == OK and op.ret and begin + 0.5 < op.call < end
        )

    fast, slowed = latencies(0, start), latencies(start, heal)
    figures = {
        "p50_fast_ms": statistics.median(fast) * 1000,
        "p50_ms": statistics.median(slowed) * 1000,
        "p99_ms": slowed[int(0.99 * (len(slowed) - 1))] * 1000,
        "frames_dropped": lost,
    }
    print(f"{label} on follower {follower}'s links: commit latency p50 "
          f"{figures['p50_fast_ms']:.1f} ms before, {figures['p50_ms']:.1f} ms during "
          f"(p99 {figures['p99_ms']:.1f} ms); {lost} of its frames dropped")  # fmt: skip
    checked = fc.check(workload, f"4 {label} (namespaces)", (start, heal))
    assert checked["writes_lost"] == 0
    return figures


def test_4_delayed_follower_packets_leave_commit_latency_near_the_fast_path(
    fc: FaultCluster[Links],
) -> None:
    figures = slow_follower(fc, Impairment(delay_ms=200, jitter_ms=50), "200±50 ms")
    assert figures["frames_dropped"] == 0
    assert figures["p50_ms"] < max(3 * figures["p50_fast_ms"], figures["p50_fast_ms"] + 30)
    assert figures["p99_ms"] < 150


def test_4_lossy_follower_packets_leave_commit_latency_near_the_fast_path(
    fc: FaultCluster[Links],
) -> None:
    """8% of the follower's packets lost both ways: TCP retransmits its share of
    replication, the other follower keeps the majority on the fast path."""
    figures = slow_follower(fc, Impairment(loss=0.08), "8% loss")
    assert figures["frames_dropped"] > 0, "the loss never hit the follower's links"
    assert figures["p50_ms"] < max(3 * figures["p50_fast_ms"], figures["p50_fast_ms"] + 30)
    assert figures["p99_ms"] < 150
