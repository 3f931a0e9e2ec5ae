"""Codecs in produced batches, refused at the edge as Kafka refuses them: a codec
id Kafka does not define (5-7) is CORRUPT_MESSAGE (the replica manager), and
zstd in Produce before v7 is UNSUPPORTED_COMPRESSION_TYPE (KIP-110, the Kafka API)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from partitions_cluster import make_batch, with_codec

from broker_agent.kafka import codec
from broker_agent.kafka.apis import KafkaApis
from broker_agent.kafka.listener import Connection
from broker_agent.kafka.versions import ApiKey
from broker_agent.partitions.compression import GZIP, ZSTD
from tests.broker_agent.kafka_requests import image


def produce(version: int, records: bytes) -> Any:
    """One produce of `records` to orders-0 through a KafkaApis without replicas:
    what passes the API's own checks reaches the replica manager's absence
    (NOT_LEADER_OR_FOLLOWER)."""
    cls = codec.request_class(ApiKey.PRODUCE, version)
    header_cls = HeaderV2 if cls.__header_schema__ is HeaderV2 else HeaderV1
    header = header_cls(request_api_key=ApiKey.PRODUCE, request_api_version=version,
                        correlation_id=1, client_id="t")  # type: ignore[arg-type]  # fmt: skip
    body = codec.build(cls, {
        "transactional_id": None, "acks": 1, "timeout": 1000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": records}]}],
    })  # fmt: skip
    frame = codec.encode_request(header, body)[4:]
    img = image()
    apis = KafkaApis(1, "cluster-1", lambda: img, None, None)
    request = codec.decode_request(frame, ApiKey.PRODUCE, version)
    answer = asyncio.run(apis.handle(request, Connection("PLAINTEXT", "127.0.0.1")))
    built = answer if not isinstance(answer, dict) else codec.build(type(answer), answer)
    return built.responses[0].partition_responses[0].error_code


@pytest.mark.parametrize("version", [3, 6])
def test_zstd_before_produce_v7_is_unsupported_compression_type(version: int) -> None:
    assert produce(version, with_codec(make_batch(b"x"), ZSTD)) == (
        ErrorCode.unsupported_compression_type
    )


@pytest.mark.parametrize("version", [7, 9])
def test_zstd_from_produce_v7_on_passes_the_api(version: int) -> None:
    assert produce(version, with_codec(make_batch(b"x"), ZSTD)) == (
        ErrorCode.not_leader_or_follower
    )


def test_other_codecs_and_a_short_batch_pass_the_api_check() -> None:
    assert produce(3, with_codec(make_batch(b"x"), GZIP)) == ErrorCode.not_leader_or_follower
    assert produce(3, b"\x00" * 10) == ErrorCode.not_leader_or_follower  # the append refuses it
