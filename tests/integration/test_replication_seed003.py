"""Seed 003's scenarios on real broker processes: a partition with two replicas,
replica-0 on broker 10 (the preferred leader) and replica-1 on broker 11,
`min.insync.replicas=2`, producers asking `acks=all`, unclean election off.

1. replica-0 crashes: broker 11 leads with ISR (1); writes fail with
   NOT_ENOUGH_REPLICAS, reads go on; `min.insync.replicas=1` restores writes.
2. replica-0 crashes, then replica-1: no leader. replica-0 coming back alone
   changes nothing (only the ISR may lead, and replica-1 left it last); once
   replica-1 is back it leads, reads go on, and writes return when replica-0
   has caught up and rejoined the ISR.
3. The same with writes acknowledged while replica-0 was away, then
   `unclean.leader.election.enable=true`: the stale replica-0 leads, and exactly
   the records it never had are lost, although each was acknowledged.

Crashes are SIGKILLs; the controllers fence a silent broker after 2 s.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from tests.broker_agent.partitions.partitions_cluster import make_batch
from tests.integration import replica_ops as ops
from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers

pytestmark = pytest.mark.slow
REPLICA_0, REPLICA_1 = 10, 11
SESSION_MS = "2000"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_online_brokers(
        tmp_path_factory.mktemp("seed003"), REPLICA_0, REPLICA_1,
        extra={"broker.session.timeout.ms": SESSION_MS},
    ) as c:  # fmt: skip
        yield c


@pytest.fixture(autouse=True)
def both_brokers_up(cluster: Cluster) -> None:
    """Each test starts from two live, unfenced brokers (whatever an earlier one did)."""
    for b in (REPLICA_0, REPLICA_1):
        if not cluster.brokers[b].alive():
            ops.restart(cluster, b)
    ops.wait(lambda: all(ops.online(cluster, b) for b in (REPLICA_0, REPLICA_1)), "both ONLINE")


def new_topic(cluster: Cluster, name: str) -> str:
    ops.create_topic(cluster, name, [(REPLICA_0, REPLICA_1)], min__insync__replicas="2")
    assert ops.partition(cluster, name).leader == REPLICA_0
    return name


def write(cluster: Cluster, broker: int, topic: str, *values: bytes) -> ErrorCode:
    """One acks=all Produce per value; the first error, or none."""
    for value in values:
        error, _ = ops.produce(cluster, broker, topic, 0, make_batch(value))
        if error != ErrorCode.none:
            return error
    return ErrorCode.none


def values_on(cluster: Cluster, broker: int, topic: str) -> list[bytes | None]:
    return [v for _, v in ops.read_all(cluster, broker, topic, 0)]


def wait_state(cluster: Cluster, topic: str, leader: int, isr: list[int]) -> None:
    """The committed partition state, and the new leader serving it."""

    def reached() -> bool:
        p = ops.partition(cluster, topic)
        if p.leader != leader or sorted(p.isr) != isr:
            return False
        return leader < 0 or ops.leader_in_metadata(cluster, leader, topic, 0)[0] == leader

    ops.wait(reached, f"{topic}: leader {leader}, ISR {isr}")


def compare_replicas(cluster: Cluster, topic: str, below: int) -> subprocess.CompletedProcess[str]:
    """The operators' compare tool, run as they would."""
    dirs = [str(cluster.brokers[b].data_dir / f"{topic}-0") for b in (REPLICA_0, REPLICA_1)]
    return subprocess.run(
        [sys.executable, "-m", "broker_agent.partitions.compare", *dirs, "--below", str(below)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_one_replica_down_refuses_writes_serves_reads_and_min_isr_1_restores_writes(
    cluster: Cluster,
) -> None:
    topic = new_topic(cluster, "seed003-one-down")
    before = [b"a0", b"a1", b"a2"]
    assert write(cluster, REPLICA_0, topic, *before) == ErrorCode.none

    ops.kill(cluster, REPLICA_0)
    wait_state(cluster, topic, REPLICA_1, [REPLICA_1])
    # The new leader has a new epoch: a client on the one before is fenced, one ahead of
    # the broker is told its epoch is unknown (Fetch, ListOffsets, OffsetsForLeaderEpoch).
    epoch = ops.partition(cluster, topic).leader_epoch
    assert epoch >= 1
    fenced, unknown = ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch
    assert ops.epoch_errors(cluster, REPLICA_1, topic, 0, epoch - 1) == (fenced,) * 3
    assert ops.epoch_errors(cluster, REPLICA_1, topic, 0, epoch + 1) == (unknown,) * 3
    assert ops.epoch_errors(cluster, REPLICA_1, topic, 0, epoch) == (ErrorCode.none,) * 3
    assert write(cluster, REPLICA_1, topic, b"refused") == ErrorCode.not_enough_replicas
    assert values_on(cluster, REPLICA_1, topic) == before  # reads go on; nothing appended
    # acks=1 is not what min.insync.replicas guards (Kafka's rule too).
    error, offset = ops.produce(cluster, REPLICA_1, topic, 0, make_batch(b"acks-1"), acks=1)
    assert (error, offset) == (ErrorCode.none, 3)

    # The seed's remedy when replica-0 cannot come back: min.insync.replicas=1.
    ops.alter_topic_config(cluster, topic, "min.insync.replicas", "1")
    ops.wait(lambda: write(cluster, REPLICA_1, topic, b"a4") == ErrorCode.none, "writes again")
    assert values_on(cluster, REPLICA_1, topic) == [*before, b"acks-1", b"a4"]

    # replica-0 back: it catches up and rejoins; both hold the same bytes.
    ops.restart(cluster, REPLICA_0)
    wait_state(cluster, topic, REPLICA_1, [REPLICA_0, REPLICA_1])
    done = compare_replicas(cluster, topic, below=5)
    assert done.returncode == 0, done.stdout + done.stderr


def test_both_down_only_the_replica_that_left_the_isr_last_may_lead(cluster: Cluster) -> None:
    topic = new_topic(cluster, "seed003-both-down")
    before = [b"b0", b"b1", b"b2"]
    assert write(cluster, REPLICA_0, topic, *before) == ErrorCode.none

    ops.kill(cluster, REPLICA_0)
    wait_state(cluster, topic, REPLICA_1, [REPLICA_1])
    ops.kill(cluster, REPLICA_1)
    wait_state(cluster, topic, -1, [REPLICA_1])  # offline; the ISR keeps its last member

    # replica-0 back alone: unclean election is off, so it may not lead.
    ops.restart(cluster, REPLICA_0)
    ops.wait(lambda: ops.online(cluster, REPLICA_0), "replica-0 ONLINE")
    p = ops.partition(cluster, topic)
    assert (p.leader, list(p.isr)) == (-1, [REPLICA_1])
    error, _, _ = ops.fetch(cluster, REPLICA_0, topic, 0)
    assert error == ErrorCode.not_leader_or_follower
    assert write(cluster, REPLICA_0, topic, b"nobody") == ErrorCode.not_leader_or_follower

    # replica-1 back: it leads, every acknowledged record is there, reads go on;
    # writes return once replica-0 caught up and the ISR holds two again.
    ops.restart(cluster, REPLICA_1)
    ops.wait(lambda: ops.partition(cluster, topic).leader == REPLICA_1, "replica-1 leads")
    ops.wait(lambda: values_on(cluster, REPLICA_1, topic) == before, "reads from replica-1")
    wait_state(cluster, topic, REPLICA_1, [REPLICA_0, REPLICA_1])
    ops.wait(lambda: write(cluster, REPLICA_1, topic, b"b3") == ErrorCode.none, "writes again")
    assert values_on(cluster, REPLICA_1, topic) == [*before, b"b3"]


def test_unclean_election_elects_the_stale_replica_and_loses_what_it_lacks(
    cluster: Cluster,
) -> None:
    topic = new_topic(cluster, "seed003-unclean")
    both_have = [b"c0", b"c1", b"c2", b"c3"]
    assert write(cluster, REPLICA_0, topic, *both_have) == ErrorCode.none

    ops.kill(cluster, REPLICA_0)
    wait_state(cluster, topic, REPLICA_1, [REPLICA_1])
    ops.alter_topic_config(cluster, topic, "min.insync.replicas", "1")
    ops.wait(lambda: write(cluster, REPLICA_1, topic, b"d0") == ErrorCode.none, "writes again")
    only_replica_1 = [b"d0", b"d1", b"d2"]
    assert write(cluster, REPLICA_1, topic, *only_replica_1[1:]) == ErrorCode.none  # acked
    assert values_on(cluster, REPLICA_1, topic) == both_have + only_replica_1

    ops.kill(cluster, REPLICA_1)
    wait_state(cluster, topic, -1, [REPLICA_1])
    ops.alter_topic_config(cluster, topic, "unclean.leader.election.enable", "true")
    ops.restart(cluster, REPLICA_0)
    wait_state(cluster, topic, REPLICA_0, [REPLICA_0])  # the stale replica leads

    acknowledged = both_have + only_replica_1
    survived = values_on(cluster, REPLICA_0, topic)
    lost = [v for v in acknowledged if v not in survived]
    assert survived == both_have
    assert lost == only_replica_1 and len(lost) == 3

    # replica-1 returns as a follower: it cuts the records nobody else has (by
    # leader epoch) and takes the new leader's; both replicas agree again.
    ops.restart(cluster, REPLICA_1)
    assert write(cluster, REPLICA_0, topic, b"e0") == ErrorCode.none
    wait_state(cluster, topic, REPLICA_0, [REPLICA_0, REPLICA_1])
    assert values_on(cluster, REPLICA_0, topic) == [*both_have, b"e0"]
    done = compare_replicas(cluster, topic, below=5)
    assert done.returncode == 0, done.stdout + done.stderr
