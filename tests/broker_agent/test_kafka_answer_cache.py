"""Metadata answers are built and encoded once per image generation
(`broker_agent/kafka/answer_cache.py`) and reused: the bytes a client gets are
exactly those of an answer built afresh, and a change of the image, of who asks
(with ACLs), of the listener or of the question gets its own answer."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from prometheus_client import CollectorRegistry

from broker_agent.kafka import codec
from broker_agent.kafka.apis import KafkaApis
from broker_agent.kafka.authz import KafkaAuthorizer
from broker_agent.kafka.listener import Connection
from broker_agent.kafka.metadata_answer import metadata_response
from broker_agent.kafka.metrics import KafkaRequestMetrics
from broker_agent.kafka.versions import ApiKey
from quorum.authz.authorizer import AuthorizerConfig, Operation, ResourceType
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import metadata_pb2 as md

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
ANYONE = Connection("PLAINTEXT", "127.0.0.1")
ALICE = Connection("PLAINTEXT", "127.0.0.1", "User:alice")
BOB = Connection("PLAINTEXT", "127.0.0.1", "User:bob")
ALLOW = 3


def broker(broker_id: int, port: int) -> md.MetadataRecord:
    return md.MetadataRecord(
        register_broker=md.RegisterBrokerRecord(
            broker_id=broker_id,
            broker_epoch=1,
            incarnation_id=f"i{broker_id}",
            endpoints=[
                md.BrokerEndpoint(
                    name="PLAINTEXT", host="h", port=port, security_protocol="PLAINTEXT"
                ),
                md.BrokerEndpoint(
                    name="INTERNAL", host="in", port=port + 1, security_protocol="PLAINTEXT"
                ),
            ],
        )
    )


def partition(leader: int, epoch: int) -> md.MetadataRecord:
    return md.MetadataRecord(
        partition=md.PartitionRecord(
            partition_id=0,
            topic_id=TOPIC_ID,
            replicas=[1, 2],
            isr=[1, 2],
            leader=leader,
            leader_epoch=epoch,
            partition_epoch=epoch,
        )
    )


def acl(name: str, principal: str) -> md.MetadataRecord:
    return md.MetadataRecord(
        access_control_entry=md.AccessControlEntryRecord(
            id=f"acl-{principal}",
            resource_type=int(ResourceType.TOPIC),
            resource_name=name,
            pattern_type=3,
            principal=principal,
            host="*",
            operation=int(Operation.DESCRIBE),
            permission_type=ALLOW,
        )
    )


class Cluster:
    """An image that records are applied to as the broker's metadata cache does."""

    def __init__(self, *records: md.MetadataRecord) -> None:
        self.image = MetadataImage()
        self.next_offset = 0
        self.apply(
            broker(1, 9092),
            broker(2, 9094),
            md.MetadataRecord(topic=md.TopicRecord(name="orders", topic_id=TOPIC_ID)),
            partition(1, 0),
            *records,
        )

    def apply(self, *records: md.MetadataRecord) -> None:
        for record in records:
            self.image.apply_record(record, self.next_offset)
            self.next_offset += 1

    def apis(self, authorizer: bool = False) -> KafkaApis:
        authz = KafkaAuthorizer(AuthorizerConfig(enabled=authorizer), lambda: self.image)
        return KafkaApis(1, "c", lambda: self.image, None, None, authz)


def request(topics: list[str] | None, version: int = 12) -> codec.DecodedRequest:
    cls = codec.request_class(ApiKey.METADATA, version)
    body = codec.build(
        cls,
        {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    header_cls = HeaderV2 if cls.__header_schema__ is HeaderV2 else HeaderV1
    header = header_cls(
        request_api_key=ApiKey.METADATA,  # type: ignore[arg-type]
        request_api_version=version,  # type: ignore[arg-type]
        correlation_id=5,  # type: ignore[arg-type]
        client_id="t",
    )
    frame = codec.encode_request(header, body)[4:]
    return codec.decode_request(frame, ApiKey.METADATA, version)


def ask(apis: KafkaApis, req: codec.DecodedRequest, conn: Connection = ANYONE) -> bytes:
    return codec.encode_response(5, asyncio.run(apis.handle(req, conn)))


def afresh(cluster: Cluster, req: codec.DecodedRequest, conn: Connection = ANYONE) -> bytes:
    """The answer built and encoded without any cache, as before the cache."""
    values = metadata_response(cluster.image, 1, "c", conn.listener_name, req.body, req.api_version)
    cls = codec.response_class(ApiKey.METADATA, req.api_version)
    return codec.encode_response(5, codec.build(cls, values))


def decoded(frame: bytes, version: int = 12) -> Any:
    return codec.decode_response(frame[4:], ApiKey.METADATA, version)[1]


def test_a_repeated_question_gets_the_same_bytes_as_an_answer_built_afresh() -> None:
    cluster = Cluster()
    apis = cluster.apis()
    for version in (1, 9, 12):
        for topics in (None, ["orders"]):
            req = request(topics, version)
            first, second = ask(apis, req), ask(apis, req)
            assert first == second == afresh(cluster, req)
    assert apis.answers.hits == 6 and apis.answers.misses == 6


def test_a_change_of_the_image_is_answered_from_the_new_image() -> None:
    cluster = Cluster()
    apis = cluster.apis()
    req = request(["orders"])
    assert decoded(ask(apis, req)).topics[0].partitions[0].leader_id == 1
    cluster.apply(
        md.MetadataRecord(
            partition_change=md.PartitionChangeRecord(
                topic_id=TOPIC_ID, partition_id=0, leader=2, isr=md.BrokerIdList(ids=[2])
            )
        )
    )
    moved = ask(apis, req)
    assert moved == afresh(cluster, req)
    [p] = decoded(moved).topics[0].partitions
    assert (p.leader_id, list(p.isr_nodes)) == (2, [2])
    cluster.apply(md.MetadataRecord(fence_broker=md.FenceBrokerRecord(broker_id=2, broker_epoch=1)))
    fenced = decoded(ask(apis, req))
    assert [b.node_id for b in fenced.brokers] == [1]
    assert fenced.topics[0].partitions[0].error_code == ErrorCode.leader_not_available


def test_each_listener_gets_its_own_endpoints() -> None:
    apis = Cluster().apis()
    req = request(None)
    outside = decoded(ask(apis, req, ANYONE))
    inside = decoded(ask(apis, req, Connection("INTERNAL", "127.0.0.1")))
    assert [(b.host, b.port) for b in outside.brokers] == [("h", 9092), ("h", 9094)]
    assert [(b.host, b.port) for b in inside.brokers] == [("in", 9093), ("in", 9095)]


def test_with_acls_a_principal_never_gets_another_principals_answer() -> None:
    cluster = Cluster(acl("orders", "User:alice"))
    apis = cluster.apis(authorizer=True)
    for _ in range(2):  # the second round from the cache
        assert [t.name for t in decoded(ask(apis, request(None), ALICE)).topics] == ["orders"]
        assert decoded(ask(apis, request(None), BOB)).topics == ()
        refused = decoded(ask(apis, request(["orders"]), BOB)).topics[0]
        assert refused.error_code == ErrorCode.topic_authorization_failed
    # An ACL granted later is in a new image: Bob sees the topic at once.
    cluster.apply(acl("orders", "User:bob"))
    assert [t.name for t in decoded(ask(apis, request(None), BOB)).topics] == ["orders"]


def test_answers_with_a_topic_error_are_never_kept() -> None:
    cluster = Cluster()
    apis = cluster.apis()
    req = request(["later"])
    for _ in range(2):
        [missing] = decoded(ask(apis, req)).topics
        assert missing.error_code == ErrorCode.unknown_topic_or_partition
    assert apis.answers.hits == 0
    later = "AAAAAAAAAAAAAAAAAAAAAg"
    cluster.apply(md.MetadataRecord(topic=md.TopicRecord(name="later", topic_id=later)))
    assert decoded(ask(apis, req)).topics[0].error_code == ErrorCode.none


def test_the_request_metrics_count_a_cached_answers_errors_every_time() -> None:
    cluster = Cluster()
    cluster.apply(md.MetadataRecord(fence_broker=md.FenceBrokerRecord(broker_id=1, broker_epoch=1)))
    apis = cluster.apis()
    registry = CollectorRegistry()
    metrics = KafkaRequestMetrics(registry, [])
    apis.observe = metrics.observe
    for _ in range(3):
        ask(apis, request(["orders"]))
    assert apis.answers.hits == 2
    leaderless = registry.get_sample_value(
        "quorum_broker_kafka_errors_total", {"api": "metadata", "error": "LEADER_NOT_AVAILABLE"}
    )
    assert leaderless == 3
    count = registry.get_sample_value(
        "quorum_broker_kafka_requests_total", {"api": "metadata", "version": "12"}
    )
    assert count == 3
