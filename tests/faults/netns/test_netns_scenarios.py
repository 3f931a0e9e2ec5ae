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

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster
from fault_cluster import FaultCluster, name
from links import Impairment, Links, namespaced_links
from shared_scenarios import impaired_follower, leader_isolation
from topology import NamespacesUnavailable

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


# ---------------------------------------------------------------- scenario 1


def test_1_isolated_leader_in_its_namespace_is_replaced_resigns_and_rejoins(
    fc: FaultCluster[Links],
) -> None:
    """Every packet between the leader and both followers dropped (the client's
    links to it intact); healed, TCP's own retransmissions resume the connections."""
    leader_isolation(fc, "1 leader isolation (namespaces)")


# ---------------------------------------------------------------- scenario 4


def slow_follower(fc: FaultCluster[Links], impairment: Impairment, label: str) -> dict[str, float]:
    """Scenario 4 with `impairment` on every packet of one follower's links."""

    def dropped(follower: int) -> int:  # counts since the wire started
        links = [(name(follower), name(n)) for n in fc.ids if n != follower]
        return sum(fc.net.dropped(a, b) + fc.net.dropped(b, a) for a, b in links)

    return impaired_follower(
        fc,
        lambda follower: fc.net.impair_node(follower, impairment),
        f"4 {label} (namespaces)",
        dropped,
    )


def test_4_delayed_follower_packets_leave_commit_latency_near_the_fast_path(
    fc: FaultCluster[Links],
) -> None:
    figures = slow_follower(fc, Impairment(delay_ms=200, jitter_ms=50), "200±50 ms")
    assert figures["frames_dropped"] == 0


def test_4_lossy_follower_packets_leave_commit_latency_near_the_fast_path(
    fc: FaultCluster[Links],
) -> None:
    """8% of the follower's packets lost both ways: TCP retransmits its share of
    replication, the other follower keeps the majority on the fast path."""
    figures = slow_follower(fc, Impairment(loss=0.08), "8% loss")
    assert figures["frames_dropped"] > 0, "the loss never hit the follower's links"
