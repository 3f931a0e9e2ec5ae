"""Kafka's topic admin APIs on the broker: CreateTopics, DeleteTopics,
CreatePartitions and ElectLeaders, forwarded to the active controller.

Each handler only translates: the Kafka request (kio) into the controllers'
gRPC request, the reply back into Kafka's response, per item with the
controller's error code and message. Validation and authorization are the
controller's (`quorum/controller/topic_ops.py`, `validation.py`,
`quorum/authz/controller_actions.py`); nothing is checked twice here. A call-level refusal (the
whole request over a limit, not authorized, no controller in time) becomes
that error on every item, as Kafka answers it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker_agent.kafka import codec
from broker_agent.kafka.forwarding import (
    Caller,
    ControllerForwarder,
    ForwardError,
    item_error,
)
from broker_agent.kafka.listener import Connection
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import admin_pb2 as api

TOPIC_CONFIG_SOURCE = 1  # Kafka's ConfigSource.TOPIC_CONFIG (DYNAMIC_TOPIC_CONFIG)


def caller(conn: Connection) -> Caller:
    return Caller(conn.principal, conn.peer_host)


class TopicAdmin:
    """CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders."""

    def __init__(self, forwarder: ControllerForwarder, image: Callable[[], MetadataImage]) -> None:
        self.forwarder = forwarder
        self.image = image

    # ------------------------------------------------------------ CreateTopics

    async def create_topics(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        timeout_ms = codec.millis(body.timeout)
        request = create_topics_request(body)
        try:
            reply = await self.forwarder.write("CreateTopics", request, caller(conn), timeout_ms)
        except ForwardError as err:
            return {
                "throttle_time": 0,
                "topics": [
                    _created_error(t.name, int(err.error), err.message) for t in body.topics
                ],
            }
        return {"throttle_time": 0, "topics": [_created(r) for r in reply.topics]}

    # ------------------------------------------------------------ DeleteTopics

    async def delete_topics(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        timeout_ms = codec.millis(body.timeout)
        request = api.DeleteTopicsRequest()
        order: list[tuple[str | None, Any]] = []
        if version >= 6:
            for t in body.topics:
                if t.name is not None:
                    request.names.append(t.name)
                    order.append((t.name, None))
                else:
                    request.topic_ids.append(codec.topic_id_text(t.topic_id))
                    order.append((None, t.topic_id))
        else:
            request.names.extend(body.topic_names)
            order = [(n, None) for n in body.topic_names]
        try:
            reply = await self.forwarder.write("DeleteTopics", request, caller(conn), timeout_ms)
        except ForwardError as err:
            return {
                "throttle_time": 0,
                "responses": [
                    _deleted(name, tid, int(err.error), err.message) for name, tid in order
                ],
            }
        out = []
        for (name, tid), result in zip(order, reply.topics, strict=False):
            code, message = item_error(result.error)
            topic_id = result.topic_id or tid  # base64 text: the writer converts it
            out.append(_deleted(result.name or name, topic_id, code, message))
        return {"throttle_time": 0, "responses": out}

    # -------------------------------------------------------- CreatePartitions

    async def create_partitions(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        timeout_ms = codec.millis(body.timeout)
        image = self.image()
        request = api.CreatePartitionsRequest(validate_only=bool(body.validate_only))
        for t in body.topics:
            item = request.topics.add(name=t.name, count=int(t.count))
            if t.assignments:
                found = image.topic(t.name)
                first = len(found.partitions) if found is not None else 0
                for i, a in enumerate(t.assignments):
                    item.assignments.add(partition_index=first + i, broker_ids=list(a.broker_ids))
        try:
            reply = await self.forwarder.write(
                "CreatePartitions", request, caller(conn), timeout_ms
            )
        except ForwardError as err:
            return {
                "throttle_time": 0,
                "results": [
                    {"name": t.name, "error_code": int(err.error), "error_message": err.message}
                    for t in body.topics
                ],
            }
        results = []
        for r in reply.topics:
            code, message = item_error(r.error)
            results.append({"name": r.name, "error_code": code, "error_message": message})
        return {"throttle_time": 0, "results": results}

    # ------------------------------------------------------------ ElectLeaders

    async def elect_leaders(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        timeout_ms = codec.millis(body.timeout)
        request = api.ElectLeadersRequest()
        request.election_type = int(getattr(body, "election_type", 0))  # type: ignore[assignment]
        wanted = body.topic_partitions
        if wanted is not None:
            for t in wanted:
                if not t.partitions:
                    continue  # Kafka: a topic with no partitions named elects nothing
                request.partitions.add(topic=t.topic, partitions=[int(p) for p in t.partitions])
            if not request.partitions:
                return {"throttle_time": 0, "error_code": 0, "replica_election_results": []}
        try:
            reply = await self.forwarder.write("ElectLeaders", request, caller(conn), timeout_ms)
        except ForwardError as err:
            if wanted is None:
                return {
                    "throttle_time": 0,
                    "error_code": int(err.error),
                    "replica_election_results": [],
                }
            return {
                "throttle_time": 0,
                "error_code": 0 if version >= 1 else int(err.error),
                "replica_election_results": [
                    {
                        "topic": t.topic,
                        "partition_result": [
                            {
                                "partition_id": int(p),
                                "error_code": int(err.error),
                                "error_message": err.message,
                            }
                            for p in t.partitions
                        ],
                    }
                    for t in wanted
                ],
            }
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in reply.results:
            code, message = item_error(r.error)
            by_topic.setdefault(r.topic, []).append(
                {"partition_id": r.partition, "error_code": code, "error_message": message}
            )
        return {
            "throttle_time": 0,
            "error_code": 0,
            "replica_election_results": [
                {"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()
            ],
        }


def create_topics_request(body: Any) -> api.CreateTopicsRequest:
    """Kafka's CreateTopics as the controllers' request: -1 stays -1 (the
    cluster default), an explicit assignment is passed through as given."""
    request = api.CreateTopicsRequest(validate_only=bool(getattr(body, "validate_only", False)))
    for t in body.topics:
        item = request.topics.add(name=t.name)
        item.num_partitions = int(t.num_partitions)
        item.replication_factor = int(t.replication_factor)
        for a in t.assignments:
            item.assignments.add(
                partition_index=int(a.partition_index), broker_ids=[int(b) for b in a.broker_ids]
            )
        for c in t.configs:
            if c.value is not None:
                item.configs[c.name] = c.value
    return request


def _created(result: api.CreatableTopicResult) -> dict[str, Any]:
    code, message = item_error(result.error)
    if code:
        return _created_error(result.name, code, message)
    return {
        "name": result.name,
        "topic_id": result.topic_id or codec.NULL_UUID,
        "error_code": 0,
        "error_message": None,
        "topic_config_error_code": 0,
        "num_partitions": result.num_partitions,
        "replication_factor": result.replication_factor,
        "configs": [
            {
                "name": c.name,
                "value": c.value,
                "read_only": False,
                "config_source": TOPIC_CONFIG_SOURCE,
                "is_sensitive": False,
            }
            for c in result.configs
        ],
    }


def _created_error(name: str, code: int, message: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "topic_id": codec.NULL_UUID,
        "error_code": code,
        "error_message": message,
        "topic_config_error_code": 0,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }


def _deleted(name: str | None, topic_id: Any, code: int, message: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "topic_id": topic_id if topic_id is not None else codec.NULL_UUID,
        "error_code": code,
        "error_message": message,
    }
