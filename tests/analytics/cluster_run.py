"""A real run to analyse: three controllers, three broker agents, a burst of admin
changes, one broker killed (SIGKILL) and restarted, all over real gRPC.

The data directories are laid out as `make run` lays out `data/`
(`controller-N/`, `broker-N/`), so the notebook reads either.
"""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))

from controller_cluster import Cluster

from quorum.gen import admin_pb2 as api

BROKERS = (101, 102, 103)
KILLED = 102
SESSION_MS = 2000
HEARTBEAT_MS = 300


@dataclass
class ClusterRun:
    cluster: Cluster
    root: Path
    killed_at_ms: int
    restarted_at_ms: int
    online_again_at_ms: int
    topics: int


def brokers_state(cluster: Cluster) -> dict[int, api.BrokerDescription]:
    reply = cluster.call("admin", "DescribeCluster", api.DescribeClusterRequest(), deadline_s=20)
    return {b.broker_id: b for b in reply.brokers}


def create_topics(cluster: Cluster, names: list[str], partitions: int = 3) -> None:
    request = api.CreateTopicsRequest(
        topics=[
            api.CreatableTopic(name=n, num_partitions=partitions, replication_factor=2)
            for n in names
        ]
    )
    reply = cluster.call("admin", "CreateTopics", request, deadline_s=20)
    assert all(t.error.error_code == 0 for t in reply.topics), reply


def alter_config(cluster: Cluster, topic: str, value: str) -> None:
    request = api.IncrementalAlterConfigsRequest(
        resources=[
            api.AlterConfigsResource(
                resource_type=api.TOPIC,
                resource_name=topic,
                configs=[api.AlterableConfig(name="retention.ms", op=api.SET, value=value)],
            )
        ]
    )
    cluster.call("admin", "IncrementalAlterConfigs", request, deadline_s=20)


def wait_all_online(cluster: Cluster, timeout_s: float = 30) -> None:
    cluster.wait_until(
        lambda: (
            all(b.state == "ONLINE" for b in brokers_state(cluster).values())
            and len(brokers_state(cluster)) == len(BROKERS)
        ),
        timeout_s,
        "every broker ONLINE",
    )


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def run_cluster(root: Path) -> ClusterRun:
    """Start everything, make the changes, kill and restart one broker; the caller
    stops the cluster (`cluster.stop_all()`)."""
    cluster = Cluster.create(root, extra={"broker.session.timeout.ms": str(SESSION_MS)})
    cluster.start()
    cluster.wait_for_leader()
    cluster.add_brokers(
        *BROKERS,
        broker__heartbeat__interval__ms=str(HEARTBEAT_MS),
        broker__session__timeout__ms=str(SESSION_MS),
    )
    cluster.start_brokers()
    wait_all_online(cluster)
    topics = 0
    for round_ in range(4):  # the burst: topics, then config changes on them
        names = [f"burst-{round_}-{i}" for i in range(5)]
        create_topics(cluster, names)
        topics += len(names)
        for n in names:
            alter_config(cluster, n, str(3_600_000 + round_))
    killed = cluster.brokers[KILLED]
    assert killed.popen is not None
    killed.popen.send_signal(signal.SIGKILL)
    killed.popen.wait(10)
    killed_at = now_ms()
    for round_ in range(3):  # changes the killed broker misses
        names = [f"missed-{round_}-{i}" for i in range(5)]
        create_topics(cluster, names)
        topics += len(names)
        time.sleep(0.3)
    cluster.wait_until(
        lambda: brokers_state(cluster)[KILLED].fenced, SESSION_MS / 1000 + 10, "broker fenced"
    )
    restarted_at = now_ms()
    cluster.start_brokers(KILLED)
    wait_all_online(cluster)
    online_again = now_ms()
    names = [f"after-{i}" for i in range(5)]
    create_topics(cluster, names)
    topics += len(names)
    time.sleep(1.0)  # every broker applies the last changes
    return ClusterRun(cluster, root, killed_at, restarted_at, online_again, topics)
