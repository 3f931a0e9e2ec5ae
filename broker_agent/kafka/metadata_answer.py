"""Kafka's Metadata answer from the broker's committed metadata image, as KRaft gives it.

* Brokers: the live (unfenced) ones that have the listener the request came
  on, with that listener's advertised host and port (Kafka's
  `getAliveBrokerNodes(listenerName)`).
* `controller_id` names a live broker: controllers are not reachable by
  clients in KRaft, so Kafka answers with a live broker (this one when it is
  live), and clients that send controller-bound requests send them there.
* Topics: all of them (topics null, or an empty list before v1), or the ones
  named, by name or (v10+) by id. Auto-creation is off: an unknown name gets
  UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID.
* Partitions: leader, leader epoch, replicas, ISR, and as offline replicas
  those whose broker is not registered or is fenced. A partition without a live
  leader gets LEADER_NOT_AVAILABLE (leader -1), as Kafka answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker_agent.kafka import codec
from quorum.controller.metadata_image import MetadataImage, PartitionState, TopicImage

# Kafka's "authorized operations not requested" marker.
OPERATIONS_OMITTED = -(2**31)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def metadata_response(
    image: MetadataImage,
    node_id: int,
    cluster_id: str,
    listener_name: str,
    body: Any,
    version: int,
    may_describe: Callable[[str], bool] = lambda _: True,
) -> dict[str, Any]:
    """`may_describe(topic)`: the ACL check; a listing leaves such topics out, a
    topic asked for by name gets TOPIC_AUTHORIZATION_FAILED (whether it exists
    or not, so existence does not leak), as Kafka answers."""
    brokers = live_brokers(image, listener_name)
    live = {b["node_id"] for b in brokers}
    topics: list[dict[str, Any]] = []
    requested = body.topics
    if requested is None or (version == 0 and not requested):
        topics = [
            _topic(t, live)
            for t in sorted(image.topics_by_name.values(), key=_name)
            if may_describe(t.name)
        ]
    else:
        for wanted in requested:
            topic_id = getattr(wanted, "topic_id", None)
            name = wanted.name
            if name is None and topic_id is not None and topic_id != codec.NULL_UUID:
                found = image.topic_by_id(codec.topic_id_text(topic_id))
                if found is None or not may_describe(found.name):
                    topics.append(_missing(None, ErrorCode.unknown_topic_id, topic_id))
                    continue
            else:
                if name is not None and not may_describe(name):
                    topics.append(_missing(name, ErrorCode.topic_authorization_failed))
                    continue
                found = image.topic(name) if name is not None else None
                if found is None:
                    topics.append(_missing(name, ErrorCode.unknown_topic_or_partition))
                    continue
            topics.append(_topic(found, live))
    controller_id = node_id if node_id in live else min(live, default=-1)
    return {
        "throttle_time": 0,
        "brokers": brokers,
        "cluster_id": cluster_id,
        "controller_id": controller_id,
        "topics": topics,
        "cluster_authorized_operations": OPERATIONS_OMITTED,
    }


def metadata_shape(body: Any) -> tuple[tuple[str | None, Any], ...] | None:
    """What a Metadata request asks, as a key: None for every topic, else the
    topics named (by name, or by id from v10), in order."""
    if body.topics is None:
        return None
    return tuple((t.name, getattr(t, "topic_id", None)) for t in body.topics)


def live_brokers(image: MetadataImage, listener_name: str) -> list[dict[str, Any]]:
    out = []
    for broker in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        if broker.fenced:
            continue
        for name, host, port, _protocol in broker.endpoints:
            if name == listener_name:
                out.append(
                    {"node_id": broker.broker_id, "host": host, "port": port, "rack": broker.rack}
                )
                break
    return out


def _name(topic: TopicImage) -> str:
    return topic.name


def _topic(topic: TopicImage, live: set[int]) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": [_partition(pid, p, live) for pid, p in sorted(topic.partitions.items())],
        "topic_authorized_operations": OPERATIONS_OMITTED,
    }


def _partition(pid: int, p: PartitionState, live: set[int]) -> dict[str, Any]:
    leader = p.leader if p.leader in live else -1
    return {
        "error_code": int(ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available),
        "partition_index": pid,
        "leader_id": leader,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": list(p.replicas),
        "isr_nodes": list(p.isr),
        "offline_replicas": [r for r in p.replicas if r not in live],
    }


def _missing(name: str | None, error: ErrorCode, topic_id: Any = None) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "name": name,
        "topic_id": topic_id if topic_id is not None else codec.NULL_UUID,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": OPERATIONS_OMITTED,
    }
