"""Hostile Kafka frames against a real listener socket (in process): a served
API's header followed by random bytes, random mutations of valid requests, and
random sizes. Each connection is answered or closed, never hangs, and the
listener keeps answering a well-behaved connection after every one."""

from __future__ import annotations

import asyncio
import random
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2

from broker_agent.kafka import codec
from broker_agent.kafka.apis import KafkaApis
from broker_agent.kafka.listener import KafkaListener
from broker_agent.kafka.versions import SERVED, ApiKey
from tests.broker_agent.kafka_requests import REQUESTS, image

VERSIONS = [(k, v) for k, (low, high) in SERVED.items() for v in range(low, high + 1)]


def valid_frame(api: ApiKey, version: int) -> bytes:
    cls = codec.request_class(api, version)
    header_cls = HeaderV2 if cls.__header_schema__ is HeaderV2 else HeaderV1
    header = header_cls(request_api_key=api, request_api_version=version, correlation_id=1,
                        client_id="fuzz")  # type: ignore[arg-type]  # fmt: skip
    return codec.encode_request(header, codec.build(cls, REQUESTS[api]))


async def send_and_settle(port: int, data: bytes) -> None:
    """Send `data`, then half-close; the broker must answer or close within 5 s."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        writer.write_eof()
        await asyncio.wait_for(reader.read(), 5)  # until the broker closes
    except ConnectionError:
        pass
    finally:
        writer.close()


async def still_answers(port: int) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(valid_frame(ApiKey.API_VERSIONS, 3))
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
        return len(await reader.readexactly(size)) == size
    finally:
        writer.close()


def mutate(frame: bytes, rng: random.Random) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 8)):
        position = rng.randrange(4, len(data))  # keep the size prefix honest
        data[position] = rng.randrange(256)
    return bytes(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    choice=st.sampled_from(VERSIONS),
    body=st.binary(max_size=300),
    seed=st.integers(0, 2**32),
    mode=st.sampled_from(["random-body", "mutated", "random-size"]),
)
def test_hostile_frames_are_answered_or_closed_and_the_listener_lives(
    choice: tuple[ApiKey, int], body: bytes, seed: int, mode: str
) -> None:
    api, version = choice
    rng = random.Random(seed)
    if mode == "random-body":
        payload = struct.pack(">hhih", int(api), version, 1, 4) + b"fuzz" + body
        data = struct.pack(">i", len(payload)) + payload
    elif mode == "mutated":
        data = mutate(valid_frame(api, version), rng)
    else:
        data = struct.pack(">i", rng.randint(-(2**31), 2**31 - 1)) + body

    async def go() -> None:
        img = image()
        apis = KafkaApis(1, "cluster-1", lambda: img, None, None)
        listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0, apis.handle, 1 << 20)
        port = await listener.start()
        try:
            await send_and_settle(port, data)
            assert await still_answers(port)
        finally:
            await listener.stop()

    asyncio.run(go())
