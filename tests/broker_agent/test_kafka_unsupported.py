"""Requests for a Kafka API or version the broker does not serve: every Kafka API
has an UNSUPPORTED_VERSION answer at any version a client may name (encoded at
that version when the codec has it, else at the nearest), the listener sends it
without dispatching anything and serves the connection on, and a key that is
no Kafka API closes the connection (in process, on a real socket)."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.schema.request_header.v2.header import RequestHeader
from kio.static.primitive import i16, i32

from broker_agent.kafka import codec
from broker_agent.kafka.listener import Connection, KafkaListener
from broker_agent.kafka.unsupported import answer_version, codec_versions, unsupported_response
from broker_agent.kafka.versions import SERVED, ApiKey


def error_codes(entity: Any) -> list[int]:
    """Every top-level error code field of a kio response."""
    values = [getattr(entity, f.name) for f in dataclasses.fields(entity)]
    return [v for v in values if isinstance(v, ErrorCode)]


@pytest.mark.parametrize("api_key", sorted(api_key_map))
def test_every_kafka_api_has_an_answer_at_every_version(api_key: int) -> None:
    known = codec_versions(api_key)
    assert known is not None
    low, high = known
    for version in (-32768, -1, low - 1, low, high, high + 1, 32767):
        chosen = answer_version(api_key, version)
        assert chosen == min(max(version, low), high)
        answer = unsupported_response(api_key, version)
        frame = codec.encode_response(1234, answer)
        correlation_id, back = codec.decode_response(frame[4:], api_key, chosen)
        assert (correlation_id, back) == (1234, answer)
        assert all(code == ErrorCode.unsupported_version for code in error_codes(back))


def test_the_answer_has_the_apis_error_code_where_it_has_one() -> None:
    fetch = unsupported_response(ApiKey.FETCH, 17)
    assert fetch is not None
    assert fetch.error_code == ErrorCode.unsupported_version and fetch.responses == ()
    produce = unsupported_response(ApiKey.PRODUCE, 2)
    assert produce is not None and produce.responses == ()  # per-partition codes only


def test_a_key_that_is_no_kafka_api_has_no_answer() -> None:
    assert unsupported_response(31999, 0) is None
    assert unsupported_response(-1, 0) is None


def frame(api_key: int, version: int, correlation_id: int, tail: bytes = b"\0" * 8) -> bytes:
    body = struct.pack(">hhih", api_key, version, correlation_id, 1) + b"t" + tail
    return struct.pack(">i", len(body)) + body


async def read_answer(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def test_the_listener_answers_dispatches_nothing_and_serves_on() -> None:
    dispatched: list[int] = []

    async def dispatch(request: codec.DecodedRequest, conn: Connection) -> Any:
        dispatched.append(request.api_key)
        return codec.build(
            codec.response_class(request.api_key, request.api_version),
            {"error_code": 0, "api_keys": [], "throttle_time": 0},
        )

    async def go() -> None:
        listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0, dispatch, 1 << 20)
        port = await listener.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            high = SERVED[ApiKey.FETCH][1]
            writer.write(frame(24, 4, 1) + frame(ApiKey.FETCH, high + 1, 2)
                         + frame(ApiKey.API_VERSIONS, 0, 3))  # fmt: skip
            correlation_id, txn = codec.decode_response(await read_answer(reader), 24, 4)
            assert (correlation_id, txn.error_code) == (1, ErrorCode.unsupported_version)
            correlation_id, fetch = codec.decode_response(
                await read_answer(reader), ApiKey.FETCH, high + 1
            )
            assert (correlation_id, fetch.error_code) == (2, ErrorCode.unsupported_version)
            correlation_id, _ = codec.decode_response(
                await read_answer(reader), ApiKey.API_VERSIONS, 0
            )
            assert correlation_id == 3
            assert dispatched == [ApiKey.API_VERSIONS]  # the unserved two reached no handler
            assert (listener.unsupported_requests, listener.closed_connections) == (2, 0)

            other_r, other_w = await asyncio.open_connection("127.0.0.1", port)
            other_w.write(frame(31999, 0, 4))
            assert await other_r.read(1) == b""  # no Kafka API: closed
            assert listener.closed_connections == 1
            writer.write(frame(ApiKey.API_VERSIONS, 0, 5))
            assert codec.decode_response(await read_answer(reader), 18, 0)[0] == 5
            writer.close()
        finally:
            await listener.stop()

    asyncio.run(go())


def test_an_acks_0_produce_not_served_is_closed_as_a_failed_acks_0_produce_is() -> None:
    """Its client reads no answer, so an answer would be taken for the next request's."""

    async def never(request: codec.DecodedRequest, conn: Connection) -> Any:
        raise AssertionError("dispatched")

    legacy = struct.pack(">hi", 0, 1000) + b"\0" * 4  # Produce v0-2: acks first in the body

    async def go() -> None:
        listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0, never, 1 << 20)
        port = await listener.start()
        try:
            for data in (frame(ApiKey.PRODUCE, 2, 1, legacy), produce_v10(acks=0)):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(data)
                assert await reader.read(1) == b""
                writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(produce_v10(acks=1))
            correlation_id, answer = codec.decode_response(
                await read_answer(reader), ApiKey.PRODUCE, 10
            )
            assert (correlation_id, answer.responses) == (8, ())
            writer.close()
        finally:
            await listener.stop()

    asyncio.run(go())


def produce_v10(acks: int) -> bytes:
    header = RequestHeader(request_api_key=i16(0), request_api_version=i16(10),
                           correlation_id=i32(8), client_id="t")  # fmt: skip
    values: dict[str, Any] = {
        "transactional_id": None,
        "acks": acks,
        "timeout": 1000,
        "topic_data": [],
    }
    return codec.encode_request(
        header, codec.build(codec.request_class(ApiKey.PRODUCE, 10), values)
    )
