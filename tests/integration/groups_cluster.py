"""A running cluster of three brokers set up for consumer-group tests, and the
raw-request helpers those tests share (FindCoordinator until it answers,
the coordinator's socket, a dump of an `__consumer_offsets` partition)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from broker_agent.groups import records as rec
from broker_agent.groups.coordinator import _parse_batches
from broker_agent.groups.placement import OFFSETS_TOPIC, partition_for
from broker_agent.kafka.versions import ApiKey
from tests.integration.controller_cluster import Cluster, ctl_json, running_cluster
from tests.integration.kafka_wire import KafkaSocket

BROKERS = (101, 102, 103)
OFFSETS_PARTITIONS = 5
GROUP_SETTINGS = {
    "broker__heartbeat__interval__ms": "500",
    "group__initial__rebalance__delay__ms": "0",
    "group__min__session__timeout__ms": "1000",
    "offsets__topic__num__partitions": str(OFFSETS_PARTITIONS),
}


@contextmanager
def groups_cluster(root: Path) -> Iterator[Cluster]:
    with running_cluster(root) as cluster:
        cluster.add_brokers(*BROKERS, **GROUP_SETTINGS)
        cluster.start_brokers()
        wait_all_online(cluster)
        yield cluster


def wait_all_online(cluster: Cluster, timeout_s: float = 60) -> None:
    """Every broker registered and ONLINE (after a restart, too)."""
    cluster.wait_until(
        lambda: (
            sorted(r["Id"] for r in ctl_json(cluster, "brokers", "list") if r["State"] == "ONLINE")
            == sorted(BROKERS)
        ),
        timeout_s,
        "the brokers ONLINE",
    )


def bootstrap(cluster: Cluster, brokers: tuple[int, ...] = BROKERS) -> str:
    return ",".join(f"127.0.0.1:{cluster.brokers[b].port}" for b in brokers)


def live_brokers(cluster: Cluster) -> list[int]:
    return [b for b in BROKERS if cluster.brokers[b].alive()]


def find_coordinator(cluster: Cluster, group: str, via: int | None = None) -> int:
    """FindCoordinator v1 until it names a broker (the first one creates the topic)."""
    deadline = time.monotonic() + 60
    last: Any = None
    while time.monotonic() < deadline:
        broker = via if via is not None else live_brokers(cluster)[0]
        with KafkaSocket("127.0.0.1", cluster.brokers[broker].port) as s:
            last = s.request(ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
        if last.error_code == ErrorCode.none:
            return int(last.node_id)
        time.sleep(0.2)
    raise AssertionError(f"no coordinator for {group}: {last}")


def offsets_leader(cluster: Cluster, partition: int) -> int:
    with KafkaSocket("127.0.0.1", cluster.brokers[live_brokers(cluster)[0]].port) as s:
        answer = s.request(
            ApiKey.METADATA,
            12,
            {
                "topics": [{"name": OFFSETS_TOPIC, "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    [p] = [p for p in answer.topics[0].partitions if p.partition_index == partition]
    return int(p.leader_id)


def dump_offsets_partition(
    cluster: Cluster, group: str
) -> list[tuple[rec.OffsetKey | rec.GroupKey, bytes | None]]:
    """Every record of the group's `__consumer_offsets` partition, read with a
    consumer Fetch from its leader, keys parsed as Kafka's dump tool would."""
    partition = partition_for(group, OFFSETS_PARTITIONS)
    leader = offsets_leader(cluster, partition)
    out: list[tuple[bytes, bytes | None]] = []
    offset = 0
    with KafkaSocket("127.0.0.1", cluster.brokers[leader].port) as s:
        while True:
            answer = s.request(
                ApiKey.FETCH,
                12,
                {
                    "replica_id": -1,
                    "max_wait": 0,
                    "min_bytes": 0,
                    "max_bytes": 1 << 24,
                    "isolation_level": 0,
                    "session_id": 0,
                    "session_epoch": -1,
                    "topics": [
                        {
                            "topic": OFFSETS_TOPIC,
                            "partitions": [
                                {
                                    "partition": partition,
                                    "current_leader_epoch": -1,
                                    "fetch_offset": offset,
                                    "last_fetched_epoch": -1,
                                    "log_start_offset": -1,
                                    "partition_max_bytes": 1 << 24,
                                }
                            ],
                        }
                    ],
                    "forgotten_topics_data": [],
                    "rack_id": "",
                },
            )
            data = answer.responses[0].partitions[0].records
            if not data:
                break
            offset = _parse_batches(bytes(data), out, offset)
    return [(rec.parse_key(k), v) for k, v in out]
