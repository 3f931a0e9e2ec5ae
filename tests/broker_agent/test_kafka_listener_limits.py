"""The Kafka listener's own limits on a real socket (in process, any port): idle
connections are closed after connections.max.idle.ms, a frame never finished
counts as idle, and a frame over the request limit closes only its connection."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from broker_agent.kafka import codec
from broker_agent.kafka.listener import Connection, KafkaListener
from broker_agent.kafka.versions import ApiKey


async def answer_api_versions(request: codec.DecodedRequest, conn: Connection) -> Any:
    return codec.build(
        codec.response_class(request.api_key, request.api_version),
        {"error_code": 0, "api_keys": [], "throttle_time": 0},
    )


def api_versions_frame(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", int(ApiKey.API_VERSIONS), 0, correlation_id, 1) + b"t"
    return struct.pack(">i", len(body)) + body


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), seconds) == b""
    except ConnectionError:
        return True


def test_idle_and_unfinished_connections_are_closed_and_others_served() -> None:
    async def go() -> None:
        listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0, answer_api_versions, 1 << 20,
                                 max_idle_ms=300)  # fmt: skip
        port = await listener.start()
        try:
            idle_r, _idle_w = await asyncio.open_connection("127.0.0.1", port)
            half_r, half_w = await asyncio.open_connection("127.0.0.1", port)
            half_w.write(struct.pack(">i", 100) + b"\0" * 10)  # promises 100 bytes, sends 10
            busy_r, busy_w = await asyncio.open_connection("127.0.0.1", port)
            for i in range(5):  # a connection in use is never idle
                busy_w.write(api_versions_frame(i))
                size = struct.unpack(">i", await busy_r.readexactly(4))[0]
                await busy_r.readexactly(size)
                await asyncio.sleep(0.1)
            assert await closed_within(idle_r, 2)
            assert await closed_within(half_r, 2)
            busy_w.write(api_versions_frame(99))
            size = struct.unpack(">i", await busy_r.readexactly(4))[0]
            assert struct.unpack(">i", (await busy_r.readexactly(size))[:4])[0] == 99
        finally:
            await listener.stop()

    asyncio.run(go())


def test_an_oversize_frame_is_refused_before_it_is_read() -> None:
    async def go() -> None:
        listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0, answer_api_versions, 1000)
        port = await listener.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(struct.pack(">i", 1001))
            assert await closed_within(reader, 2)
            assert listener.closed_connections == 1
        finally:
            await listener.stop()

    asyncio.run(go())
