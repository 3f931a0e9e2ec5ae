"""The ISR moves with replication lag on real broker processes (seed 000).

A follower frozen with SIGSTOP stops fetching: once it has not caught up for
`replica.lag.time.max.ms` (1 s here) its leader asks the controller to drop it
from the ISR, and `acks=all` then needs only the replicas left. The frozen
broker's controller session (15 s) has not run out meanwhile, so it is the lag
rule that removed it, not fencing. Thawed, it catches up and is added back.
An AlterPartition based on a partition epoch that is no longer current is
refused by the controller and changes nothing. An ISR shrinking below
`min.insync.replicas` under a waiting `acks=all` write answers it
NOT_ENOUGH_REPLICAS_AFTER_APPEND.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from quorum.gen import admin_pb2 as api
from tests.broker_agent.partitions.partitions_cluster import make_batch
from tests.integration import replica_ops as ops
from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers

pytestmark = pytest.mark.slow
BROKERS = (20, 21, 22)
LAG_MS = "1000"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_online_brokers(
        tmp_path_factory.mktemp("isr-lag"), *BROKERS,
        extra={"broker.session.timeout.ms": "15000"},
        replica__lag__time__max__ms=LAG_MS,
    ) as c:  # fmt: skip
        yield c


def isr(cluster: Cluster, topic: str) -> list[int]:
    return sorted(ops.partition(cluster, topic).isr)


def test_a_frozen_follower_leaves_the_isr_by_lag_and_rejoins_once_caught_up(
    cluster: Cluster,
) -> None:
    topic = "isr-lag"
    ops.create_topic(cluster, topic, [BROKERS], min__insync__replicas="2")
    leader, frozen = BROKERS[0], BROKERS[2]
    ops.wait(lambda: isr(cluster, topic) == list(BROKERS), "the full ISR")
    assert ops.produce(cluster, leader, topic, 0, make_batch(b"before"))[0] == ErrorCode.none

    popen = cluster.brokers[frozen].popen
    assert popen is not None
    popen.send_signal(signal.SIGSTOP)
    try:
        # acks=all waits for the frozen follower until the leader drops it for lag.
        error, offset = ops.produce(
            cluster, leader, topic, 0, make_batch(b"while-frozen"), timeout_ms=30_000
        )
        assert (error, offset) == (ErrorCode.none, 1)
        assert isr(cluster, topic) == [leader, BROKERS[1]]
        assert ops.online(cluster, frozen)  # its session is alive: lag, not fencing
        assert ops.leader_in_metadata(cluster, leader, topic, 0) == (leader, [leader, BROKERS[1]])
        assert ops.produce(cluster, leader, topic, 0, make_batch(b"more"))[0] == ErrorCode.none
    finally:
        popen.send_signal(signal.SIGCONT)

    ops.wait(lambda: isr(cluster, topic) == list(BROKERS), "the thawed follower back in the ISR")
    hw = ops.fetch(cluster, leader, topic, 0)[1]
    assert hw == 3
    dirs = [str(cluster.brokers[b].data_dir / f"{topic}-0") for b in BROKERS]
    done = subprocess.run(
        [sys.executable, "-m", "broker_agent.partitions.compare", *dirs, "--below", str(hw)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_isr_shrinking_below_min_insync_while_waiting_is_not_enough_replicas_after_append(
    cluster: Cluster,
) -> None:
    """Seed 003 with min.insync.replicas=3: the write was appended and waits for the
    frozen follower; the ISR shrinks to two, so the HW passes it but the answer is
    NOT_ENOUGH_REPLICAS_AFTER_APPEND; the next write is refused before appending."""
    topic = "isr-after-append"
    ops.create_topic(cluster, topic, [BROKERS], min__insync__replicas="3")
    leader, frozen = BROKERS[0], BROKERS[1]
    ops.wait(lambda: isr(cluster, topic) == list(BROKERS), "the full ISR")
    assert ops.produce(cluster, leader, topic, 0, make_batch(b"all-three"))[0] == ErrorCode.none

    popen = cluster.brokers[frozen].popen
    assert popen is not None
    popen.send_signal(signal.SIGSTOP)
    try:
        answer = ops.produce(cluster, leader, topic, 0, make_batch(b"appended"), timeout_ms=30_000)
        assert answer[0] == ErrorCode.not_enough_replicas_after_append
        assert isr(cluster, topic) == [leader, BROKERS[2]]
        assert ops.produce(cluster, leader, topic, 0, make_batch(b"refused"))[0] == (
            ErrorCode.not_enough_replicas
        )
        assert [v for _, v in ops.read_all(cluster, leader, topic, 0)] == [
            b"all-three",
            b"appended",
        ]
    finally:
        popen.send_signal(signal.SIGCONT)
    ops.wait(lambda: isr(cluster, topic) == list(BROKERS), "the thawed follower back in the ISR")
    assert ops.produce(cluster, leader, topic, 0, make_batch(b"again")) == (ErrorCode.none, 2)


def alter_partition(
    cluster: Cluster, topic: str, new_isr: list[int], partition_epoch: int
) -> api.AlterPartitionResult:
    """AlterPartition to the active controller, as the partition's leader sends it."""
    p = ops.partition(cluster, topic)
    topic_id = (
        cluster.call(
            "admin", "DescribeTopics", api.DescribeTopicsRequest(names=[topic]), deadline_s=10
        )
        .topics[0]
        .topic_id
    )
    request = api.AlterPartitionRequest(
        broker_id=p.leader,
        broker_epoch=ops.brokers(cluster)[p.leader].broker_epoch,
        partitions=[api.AlterPartitionItem(
            topic_id=topic_id, partition=0, leader_epoch=p.leader_epoch,
            new_isr=new_isr, partition_epoch=partition_epoch,
        )],
    )  # fmt: skip
    (result,) = cluster.call("admin", "AlterPartition", request, deadline_s=10).results
    return result


def test_a_stale_alter_partition_changes_nothing(cluster: Cluster) -> None:
    topic = "isr-stale"
    ops.create_topic(cluster, topic, [BROKERS])
    ops.wait(lambda: isr(cluster, topic) == list(BROKERS), "the full ISR")
    leader = BROKERS[0]
    first = ops.partition(cluster, topic)

    # A current one is applied (the ISR shrinks, the partition epoch moves on);
    # the leader then sees the dropped follower caught up and adds it back.
    shrink = alter_partition(cluster, topic, [leader, BROKERS[1]], first.partition_epoch)
    assert shrink.error.error_code == 0, shrink.error
    ops.wait(
        lambda: (
            isr(cluster, topic) == list(BROKERS)
            and ops.partition(cluster, topic).partition_epoch >= first.partition_epoch + 2
        ),
        "the leader's own expand",
    )
    current = ops.partition(cluster, topic)

    # The same change again, on the epoch it was based on: refused, nothing moves.
    stale = alter_partition(cluster, topic, [leader, BROKERS[1]], first.partition_epoch)
    assert stale.error.error_name == "INVALID_UPDATE_VERSION", stale.error
    assert stale.partition_epoch == current.partition_epoch
    after = ops.partition(cluster, topic)
    assert (after.partition_epoch, list(after.isr), after.leader, after.leader_epoch) == (
        current.partition_epoch, list(current.isr), current.leader, current.leader_epoch,
    )  # fmt: skip
    assert ops.leader_in_metadata(cluster, leader, topic, 0) == (leader, list(BROKERS))
