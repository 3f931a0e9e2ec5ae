"""The Kafka listener's own limits on a real socket (in process, any port): idle
connections are closed after connections.max.idle.ms, a frame never finished
counts as idle, a frame over the request limit closes only its connection, and a
connection pipelining without bound is read only MAX_IN_FLIGHT requests ahead."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2

from broker_agent.kafka import codec
from broker_agent.kafka.listener import MAX_IN_FLIGHT, Connection, KafkaListener
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


def produce_frame(correlation_id: int, record_bytes: int) -> bytes:
    """A Produce v9 request whose records field holds `record_bytes` bytes."""
    cls = codec.request_class(ApiKey.PRODUCE, 9)
    header = RequestHeaderV2(
        request_api_key=ApiKey.PRODUCE, request_api_version=9,
        correlation_id=correlation_id, client_id="flood",
    )  # type: ignore[arg-type]  # fmt: skip
    partition = {"index": 0, "records": b"\0" * record_bytes}
    values = {"transactional_id": None, "acks": 1, "timeout": 5000,
              "topic_data": [{"name": "t", "partition_data": [partition]}]}  # fmt: skip
    return codec.encode_request(header, codec.build(cls, values))


def test_a_connection_that_floods_is_read_no_further_and_others_are_served() -> None:
    """Requests of one connection are processed one at a time; while one is in the
    broker, at most MAX_IN_FLIGHT more are read ahead and the socket is then left
    unread, so a client pipelining without bound fills only its own socket buffers
    (TCP pushes back on it) and never the broker's memory, and others are served."""
    frame_mib = 1
    frames = 64
    release = asyncio.Event()
    dispatched: list[tuple[str | None, int]] = []

    async def dispatch(request: codec.DecodedRequest, conn: Connection) -> Any:
        dispatched.append((request.client_id, request.correlation_id))
        if request.client_id == "flood":
            await release.wait()  # the first flooding request stays in the broker
        return await answer_api_versions(request, conn)

    async def go() -> None:
        listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0, dispatch, 2 << 20)
        port = await listener.start()
        # Small fixed kernel buffers on both ends (no autotuning up to tcp_rmem's
        # 32 MiB), so what the socket takes is what the listener read, give or take.
        assert listener._server is not None
        listener._server.sockets[0].setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        flood = socket.socket()
        flood.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 10)
        flood.connect(("127.0.0.1", port))
        try:
            flood.setblocking(False)
            big = produce_frame(1, (frame_mib << 20) - 200)
            pending = memoryview(b"".join([big] * frames))
            sent = 0
            stalled_since: float | None = None
            loop = asyncio.get_running_loop()
            # Send until the socket has taken nothing for half a second (the broker
            # stopped reading), or everything went.
            while sent < len(pending):
                try:
                    sent += flood.send(pending[sent : sent + (1 << 20)])
                    stalled_since = None
                except BlockingIOError:
                    stalled_since = stalled_since or loop.time()
                    if loop.time() - stalled_since > 0.5:
                        break
                await asyncio.sleep(0.001)
            # One in the broker, MAX_IN_FLIGHT queued, one read and waiting for a
            # place, then the stream's and the kernel's buffers (under 1 MiB here).
            assert sent < (MAX_IN_FLIGHT + 3) * len(big), sent
            assert sent > (MAX_IN_FLIGHT + 1) * len(big)  # it did read ahead
            assert dispatched == [("flood", 1)]  # the rest wait their turn, unread
            # Another connection is answered meanwhile.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(api_versions_frame(7))
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
            assert struct.unpack(">i", (await reader.readexactly(size))[:4])[0] == 7
            writer.close()
        finally:
            release.set()
            flood.close()
            await listener.stop()

    asyncio.run(go())
