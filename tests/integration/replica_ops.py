"""What the replication tests do to real broker processes and ask of them.

Kill a broker (SIGKILL, as a crash), restart it on the same files, read a
partition's committed state from the active controller, produce a batch and read
a partition back over raw Kafka requests. Waits are on conditions, never sleeps.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker_agent.kafka.versions import ApiKey
from broker_agent.partitions.record_batch import split_batches
from broker_agent.partitions.record_codec import records_of, value_of
from quorum.gen import admin_pb2 as api
from tests.integration.controller_cluster import Cluster, ctl
from tests.integration.kafka_wire import KafkaSocket, fetch_values, produce_values

WAIT_S = 60.0  # generous: seven helpers share two cores


def wait(predicate: Callable[[], object], what: str, timeout_s: float = WAIT_S) -> Any:
    """Poll `predicate` until it returns something truthy (returned); errors while
    nodes start or stop count as "not yet"."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as err:
            last = err
        else:
            if value:
                return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last error: {last})")


# ----------------------------------------------------------------- processes


def kill(cluster: Cluster, broker_id: int) -> None:
    """SIGKILL, as a crash: no controlled shutdown, nothing flushed."""
    popen = cluster.brokers[broker_id].popen
    assert popen is not None and popen.poll() is None, f"broker {broker_id} is not running"
    popen.send_signal(signal.SIGKILL)
    popen.wait(15)


def restart(cluster: Cluster, broker_id: int) -> None:
    """The same broker on the same files (it registers once its old session expired)."""
    cluster.start_brokers(broker_id)


# ------------------------------------------------------- the committed state


def brokers(cluster: Cluster) -> dict[int, api.BrokerDescription]:
    reply = cluster.call("admin", "DescribeCluster", api.DescribeClusterRequest(), deadline_s=10)
    return {b.broker_id: b for b in reply.brokers}


def online(cluster: Cluster, broker_id: int) -> bool:
    b = brokers(cluster).get(broker_id)
    return b is not None and b.state == "ONLINE" and cluster.brokers[broker_id].alive()


def describe(cluster: Cluster, topic: str) -> dict[int, api.PartitionDescription]:
    reply = cluster.call(
        "admin", "DescribeTopics", api.DescribeTopicsRequest(names=[topic]), deadline_s=10
    )
    (t,) = reply.topics
    assert t.error.error_code == 0, t.error
    return {p.partition: p for p in t.partitions}


def partition(cluster: Cluster, topic: str, index: int = 0) -> api.PartitionDescription:
    return describe(cluster, topic)[index]


def create_topic(
    cluster: Cluster, topic: str, replicas: list[tuple[int, ...]], **configs: str
) -> None:
    """One partition per entry of `replicas` (its replica list, the first the
    preferred leader), configs' dots as `__`; returns once every leader leads."""
    reply = cluster.call("admin", "CreateTopics", api.CreateTopicsRequest(topics=[
        api.CreatableTopic(
            name=topic,
            assignments=[api.ReplicaAssignment(partition_index=i, broker_ids=r)
                         for i, r in enumerate(replicas)],
            configs={k.replace("__", "."): v for k, v in configs.items()},
        )
    ]), deadline_s=20)  # fmt: skip
    assert reply.topics[0].error.error_code == 0, reply
    wait(lambda: all(leads(cluster, topic, p) for p in range(len(replicas))), f"{topic}'s leaders")


def alter_topic_config(cluster: Cluster, topic: str, key: str, value: str) -> None:
    """As an operator would: `quorumctl configs alter` (IncrementalAlterConfigs)."""
    done = ctl(cluster, "configs", "alter", "--entity-type", "topics", "--entity-name", topic,
               "--add-config", f"{key}={value}")  # fmt: skip
    assert done.returncode == 0, done.stderr


def leads(cluster: Cluster, topic: str, index: int) -> bool:
    """The committed leader serves the partition as leader (its Metadata agrees)."""
    leader = partition(cluster, topic, index).leader
    if leader < 0 or not cluster.brokers[leader].alive():
        return False
    return leader_in_metadata(cluster, leader, topic, index)[0] == leader


def leader_in_metadata(
    cluster: Cluster, broker_id: int, topic: str, index: int
) -> tuple[int, list[int]]:
    """(leader, ISR) as broker `broker_id`'s Kafka Metadata answer gives them."""
    with socket_to(cluster, broker_id) as s:
        answer = s.request(ApiKey.METADATA, 12, {
            "topics": [{"name": topic, "topic_id": None}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
        })  # fmt: skip
    (p,) = [p for p in answer.topics[0].partitions if p.partition_index == index]
    return int(p.leader_id), sorted(int(r) for r in p.isr_nodes)


# --------------------------------------------------------- raw Kafka requests


def socket_to(cluster: Cluster, broker_id: int) -> KafkaSocket:
    return KafkaSocket("127.0.0.1", cluster.brokers[broker_id].port)


def produce(
    cluster: Cluster,
    broker_id: int,
    topic: str,
    index: int,
    batch: bytes,
    acks: int = -1,
    timeout_ms: int = 10_000,
) -> tuple[ErrorCode, int]:
    """(error, base offset) of one Produce v9 holding `batch`."""
    values = produce_values(topic, index, acks=acks)
    values["timeout"] = timeout_ms
    values["topic_data"] = [{"name": topic, "partition_data": [{"index": index,
                                                                "records": batch}]}]  # fmt: skip
    with socket_to(cluster, broker_id) as s:
        s.sock.settimeout(timeout_ms / 1000 + 10)
        answer = s.request(ApiKey.PRODUCE, 9, values)
    (r,) = answer.responses[0].partition_responses
    return r.error_code, int(r.base_offset)


def fetch(
    cluster: Cluster, broker_id: int, topic: str, index: int, offset: int = 0
) -> tuple[ErrorCode, int, list[tuple[int, bytes | None]]]:
    """A consumer's Fetch v12 at `offset`: (error, high watermark, [(offset, value)])."""
    values = fetch_values(topic, index)
    values["topics"][0]["partitions"][0]["fetch_offset"] = offset  # type: ignore[index]
    with socket_to(cluster, broker_id) as s:
        answer = s.request(ApiKey.FETCH, 12, values)
    (r,) = answer.responses[0].partitions
    records: list[tuple[int, bytes | None]] = []
    if r.records:
        for _, data in split_batches(bytes(r.records)):
            records.extend((rec.offset, value_of(rec)) for rec in records_of(data)[1])
    return r.error_code, int(r.high_watermark), records


def epoch_errors(
    cluster: Cluster, broker_id: int, topic: str, index: int, current_leader_epoch: int
) -> tuple[ErrorCode, ErrorCode, ErrorCode]:
    """The errors of a consumer's Fetch, ListOffsets and OffsetsForLeaderEpoch that
    each carry `current_leader_epoch`, asked of broker `broker_id`."""
    values = fetch_values(topic, index)
    values["topics"][0]["partitions"][0]["current_leader_epoch"] = current_leader_epoch  # type: ignore[index]
    with socket_to(cluster, broker_id) as s:
        fetched = s.request(ApiKey.FETCH, 12, values).responses[0].partitions[0]
        listed = s.request(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": index,
                "current_leader_epoch": current_leader_epoch, "timestamp": -1}]}],
        }).topics[0].partitions[0]  # fmt: skip
        ended = s.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
            "replica_id": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": index,
                "current_leader_epoch": current_leader_epoch, "leader_epoch": 0}]}],
        }).topics[0].partitions[0]  # fmt: skip
    return fetched.error_code, listed.error_code, ended.error_code


def replica_log_end(cluster: Cluster, broker_id: int, topic: str, index: int) -> int:
    """The end of broker `broker_id`'s own replica log (ListOffsets latest from
    Kafka's DEBUGGING_REPLICA_ID), whether it leads or follows."""
    with socket_to(cluster, broker_id) as s:
        answer = s.request(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -2, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": index, "current_leader_epoch": -1, "timestamp": -1}]}],
        }).topics[0].partitions[0]  # fmt: skip
    assert answer.error_code == ErrorCode.none, (broker_id, answer)
    return int(answer.offset)


def replica_high_watermark(cluster: Cluster, broker_id: int, topic: str, index: int) -> int:
    """The HW broker `broker_id`'s replica holds (its partition HW gauge)."""
    labels = f'partition="{index}",topic="{topic}"'
    return int(
        cluster.brokers[broker_id].metrics()[f"quorum_broker_partition_high_watermark{{{labels}}}"]
    )


def read_all(
    cluster: Cluster, broker_id: int, topic: str, index: int
) -> list[tuple[int, bytes | None]]:
    """Every record below the high watermark, read from broker `broker_id`."""
    out: list[tuple[int, bytes | None]] = []
    offset = 0
    while True:
        error, hw, records = fetch(cluster, broker_id, topic, index, offset)
        assert error == ErrorCode.none, error
        out.extend(r for r in records if r[0] >= offset)
        if not records or out[-1][0] + 1 >= hw:
            return [r for r in out if r[0] < hw]
        offset = out[-1][0] + 1
