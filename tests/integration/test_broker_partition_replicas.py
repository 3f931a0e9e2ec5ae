"""Real broker processes host the partition replicas committed metadata assigns
them: a created topic's replicas appear under `log.dirs` in Kafka's
`topic-partition` layout on exactly the brokers in its replica lists, and a
deleted topic's go with their files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import Cluster

from quorum.gen import admin_pb2 as api

BROKERS = (21, 22, 23)
TOPIC = "payments"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster.create(Path(tmp_path_factory.mktemp("replicas")))
    c.start()
    try:
        c.wait_for_leader()
        c.add_brokers(*BROKERS)
        c.start_brokers()
        yield c
    finally:
        c.stop_all()


def replica_dirs(cluster: Cluster) -> dict[int, set[str]]:
    return {
        b: {p.name for p in cluster.brokers[b].data_dir.glob(f"{TOPIC}-*") if p.is_dir()}
        for b in BROKERS
    }


def test_created_and_deleted_topics_create_and_delete_replica_directories(
    cluster: Cluster,
) -> None:
    def online() -> bool:
        reply = cluster.call(
            "admin", "DescribeCluster", api.DescribeClusterRequest(), deadline_s=20
        )
        return sum(b.state == "ONLINE" for b in reply.brokers) == len(BROKERS)

    cluster.wait_until(online, 30, "brokers ONLINE")
    reply = cluster.call("admin", "CreateTopics", api.CreateTopicsRequest(topics=[
        api.CreatableTopic(name=TOPIC, num_partitions=3, replication_factor=2)
    ]), deadline_s=20)  # fmt: skip
    assert reply.topics[0].error.error_code == 0, reply
    described = cluster.call(
        "admin", "DescribeTopics", api.DescribeTopicsRequest(names=[TOPIC]), deadline_s=20
    )
    expected: dict[int, set[str]] = {b: set() for b in BROKERS}
    for p in described.topics[0].partitions:
        for replica in p.replicas:
            expected[replica].add(f"{TOPIC}-{p.partition}")
    assert sum(len(v) for v in expected.values()) == 6
    cluster.wait_until(lambda: replica_dirs(cluster) == expected, 20, "replica directories")
    reply = cluster.call(
        "admin", "DeleteTopics", api.DeleteTopicsRequest(names=[TOPIC]), deadline_s=20
    )
    cluster.wait_until(
        lambda: all(not v for v in replica_dirs(cluster).values()), 20, "directories deleted"
    )
