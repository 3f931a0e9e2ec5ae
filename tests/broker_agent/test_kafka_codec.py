"""The Kafka codec and handlers at every served version, without sockets: each
request is encoded as a client would (header included), decoded by the broker's
codec, handled against a metadata image, and the answer encoded and decoded
back with the response class of that version. Catches a handler mapping that
lacks a field some version needs, or a version whose classes do not round-trip."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_writer

from broker_agent.kafka import codec
from broker_agent.kafka.apis import KafkaApis
from broker_agent.kafka.listener import Connection, principal_of, unsupported_api_versions
from broker_agent.kafka.versions import SERVED, ApiKey, is_served
from tests.broker_agent.kafka_requests import REQUESTS, TOPIC_ID, TOPIC_ID_2, image


def served_versions() -> list[tuple[ApiKey, int]]:
    return [(k, v) for k, (low, high) in SERVED.items() for v in range(low, high + 1)]


def round_trip(api: ApiKey, version: int) -> Any:
    cls = codec.request_class(api, version)
    header_cls = HeaderV2 if cls.__header_schema__ is HeaderV2 else HeaderV1
    header = header_cls(request_api_key=api, request_api_version=version, correlation_id=7,
                        client_id="c")  # type: ignore[arg-type]  # fmt: skip
    frame = codec.encode_request(header, codec.build(cls, REQUESTS[api]))[4:]
    assert codec.peek_header(frame) == (api, version, 7)
    request = codec.decode_request(frame, api, version)
    img = image()
    apis = KafkaApis(1, "cluster-1", lambda: img, None, None)
    response = asyncio.run(apis.handle(request, Connection("PLAINTEXT", "127.0.0.1")))
    encoded = codec.encode_response(7, response)
    correlation_id, decoded = codec.decode_response(encoded[4:], api, version)
    assert correlation_id == 7
    return decoded


FORWARDED = {
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.ELECT_LEADERS,
    ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CONFIGS,
    ApiKey.CREATE_ACLS, ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS,
}  # fmt: skip


def error_codes(entity: Any) -> list[ErrorCode]:
    """Every error_code in a kio response, nested entities included (but not of the
    matching ACLs a DeleteAcls answer lists, which have none to give)."""
    found = []
    for name in getattr(entity, "__dataclass_fields__", {}):
        value = getattr(entity, name)
        if name == "error_code":
            found.append(value)
        elif isinstance(value, tuple):
            for item in value:
                found += error_codes(item)
        elif hasattr(value, "__dataclass_fields__"):
            found += error_codes(value)
    return found


@pytest.mark.parametrize(("api", "version"), served_versions())
def test_every_served_version_round_trips_through_its_handler(api: ApiKey, version: int) -> None:
    answer = round_trip(api, version)
    if api == ApiKey.METADATA:
        orders, nope = answer.topics
        assert orders.error_code == ErrorCode.none
        (p,) = orders.partitions
        assert (p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes)) == (1, (1, 2), (1,))
        assert nope.error_code == ErrorCode.unknown_topic_or_partition
        assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(1, "h", 9092)]
    elif api == ApiKey.PRODUCE:
        code = answer.responses[0].partition_responses[0].error_code
        assert code == ErrorCode.not_leader_or_follower  # no replica manager here
    elif api == ApiKey.FETCH:
        part = answer.responses[0].partitions[0]
        # v13+ name the topic by id: an unknown id is UNKNOWN_TOPIC_ID, echoed back
        expected = (
            ErrorCode.unknown_topic_id if version >= 13 else ErrorCode.unknown_topic_or_partition
        )
        assert part.error_code == expected
        if version >= 13:
            assert codec.topic_id_text(answer.responses[0].topic_id) == TOPIC_ID_2
        assert part.records == b""
    elif api in (ApiKey.LIST_OFFSETS, ApiKey.OFFSET_FOR_LEADER_EPOCH):
        assert answer.topics[0].partitions[0].error_code == ErrorCode.not_leader_or_follower
    elif api == ApiKey.INIT_PRODUCER_ID:
        assert answer.error_code == ErrorCode.coordinator_not_available
    elif api in GROUP_ANSWERS:  # no group coordinator here
        assert GROUP_ANSWERS[api](answer, version) == ErrorCode.coordinator_not_available
    elif api in FORWARDED:  # no controller client here: every item times out
        codes = error_codes(answer)
        assert ErrorCode.request_timed_out in codes
        assert set(codes) <= {ErrorCode.request_timed_out, ErrorCode.none}  # none: top level
    elif api == ApiKey.DELETE_RECORDS:
        assert set(error_codes(answer)) == {ErrorCode.not_leader_or_follower}
    elif api in (ApiKey.DESCRIBE_LOG_DIRS, ApiKey.DESCRIBE_CLUSTER):
        assert set(error_codes(answer)) <= {ErrorCode.none}
    else:
        assert answer.error_code == ErrorCode.none


GROUP_ANSWERS: dict[ApiKey, Any] = {
    ApiKey.FIND_COORDINATOR: lambda a, v: a.coordinators[1].error_code if v >= 4 else a.error_code,
    ApiKey.JOIN_GROUP: lambda a, v: a.error_code,
    ApiKey.SYNC_GROUP: lambda a, v: a.error_code,
    ApiKey.HEARTBEAT: lambda a, v: a.error_code,
    ApiKey.LEAVE_GROUP: lambda a, v: a.error_code,
    ApiKey.OFFSET_COMMIT: lambda a, v: a.topics[0].partitions[0].error_code,
    ApiKey.OFFSET_FETCH: lambda a, v: (
        a.groups[0].error_code if v >= 8
        else a.error_code if v >= 2
        else a.topics[0].partitions[0].error_code
    ),
    ApiKey.DESCRIBE_GROUPS: lambda a, v: a.groups[0].error_code,
    ApiKey.LIST_GROUPS: lambda a, v: (
        ErrorCode.coordinator_not_available if a.groups == () else a.error_code
    ),
    ApiKey.DELETE_GROUPS: lambda a, v: a.results[0].error_code,
    ApiKey.OFFSET_DELETE: lambda a, v: a.error_code,
}  # fmt: skip


def test_is_served_follows_the_table() -> None:
    assert is_served(ApiKey.PRODUCE, 9) and not is_served(ApiKey.PRODUCE, 2)
    assert not is_served(ApiKey.JOIN_GROUP, 10) and not is_served(ApiKey.OFFSET_COMMIT, 1)
    assert not is_served(57, 0)  # UpdateFeatures
    assert not is_served(-1, 0) and not is_served(9999, 0)


def test_the_unsupported_api_versions_answer_is_v0_with_the_table() -> None:
    encoded = codec.encode_response(5, unsupported_api_versions())
    correlation_id, answer = codec.decode_response(encoded[4:], ApiKey.API_VERSIONS, 0)
    assert correlation_id == 5
    assert answer.error_code == ErrorCode.unsupported_version
    assert {k.api_key for k in answer.api_keys} == {int(k) for k in SERVED}


@pytest.mark.parametrize("garbage", [b"", b"\x00", b"\x00\x03\x00\x0c\x00\x00"])
def test_short_frames_are_malformed(garbage: bytes) -> None:
    with pytest.raises(codec.MalformedRequest):
        codec.peek_header(garbage)


def test_a_truncated_body_is_malformed() -> None:
    frame = b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x01c\x00\x05"
    with pytest.raises(codec.MalformedRequest):
        codec.decode_request(frame, ApiKey.METADATA, 12)


def test_topic_ids_convert_both_ways() -> None:
    assert codec.topic_id_text(codec.topic_uuid(TOPIC_ID)) == TOPIC_ID
    assert principal_of({"subject": ((("commonName", "x"),),)}) == "User:CN=x"


@pytest.mark.parametrize("version", [13, 15, 16])
def test_fetch_by_topic_id_reaches_the_topic_and_echoes_its_id(version: int) -> None:
    values = {**REQUESTS[ApiKey.FETCH], "replica_state": {"replica_id": -1, "replica_epoch": -1}}
    values["topics"] = [{**values["topics"][0], "topic": "orders", "topic_id": TOPIC_ID}]
    cls = codec.request_class(ApiKey.FETCH, version)
    header = HeaderV2(request_api_key=1, request_api_version=version, correlation_id=3,
                      client_id="c")  # type: ignore[arg-type]  # fmt: skip
    frame = codec.encode_request(header, codec.build(cls, values))[4:]
    request = codec.decode_request(frame, ApiKey.FETCH, version)
    img = image()
    apis = KafkaApis(1, "cluster-1", lambda: img, None, None)
    response = asyncio.run(apis.handle(request, Connection("PLAINTEXT", "127.0.0.1")))
    (topic,) = response.responses
    assert codec.topic_id_text(topic.topic_id) == TOPIC_ID
    assert topic.partitions[0].error_code == ErrorCode.not_leader_or_follower  # no replicas here


@pytest.mark.parametrize(
    ("api", "version"),
    [(k, v) for k, v in served_versions() if k in (ApiKey.OFFSET_COMMIT, ApiKey.HEARTBEAT)],
)
def test_repeating_answers_are_the_bytes_kio_writes(api: ApiKey, version: int) -> None:
    """OffsetCommit and Heartbeat answers are encoded once and their header from a
    template: every frame is still exactly what kio's writers produce."""
    cls = codec.response_class(api, version)
    partitions = [{"partition_index": 3, "error_code": 27}, {"partition_index": 4, "error_code": 0}]
    answer = codec.build(
        cls,
        {"throttle_time": 0, "error_code": 22, "topics": [{"name": "t", "partitions": partitions}]},
    )
    for correlation_id in (0, 7, -1, 2**31 - 1, 7):
        buffer = io.BytesIO()
        header_cls = cls.__header_schema__
        entity_writer(header_cls)(buffer, header_cls(correlation_id=correlation_id))
        entity_writer(cls)(buffer, answer)
        expected = buffer.getvalue()
        assert codec.encode_response(correlation_id, answer) == len(expected).to_bytes(4) + expected
