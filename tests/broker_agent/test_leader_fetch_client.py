"""The follower's Kafka client pairs a Fetch answer with what it asked by
partition, not by position: Kafka's answer groups partitions by topic, and a
restarted follower's partitions (opened in chunks) interleave topics. Paired by
position, the fetcher skipped the partitions whose place moved, for ever: the
follower never caught up and left the ISR (a CI failure of the kill tests)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from kio.schema.errors import ErrorCode

from broker_agent.kafka import codec
from broker_agent.kafka.leader_client import FETCH_VERSION, KafkaLeaderFetchClient
from broker_agent.kafka.versions import ApiKey
from broker_agent.partitions.api import FetchPartition


def _answer(request: Any) -> dict[str, Any]:
    """A leader's answer: topics in the reverse order, each partition's HW set to
    100 + its fetch offset so the test can tell which answer is whose."""
    topics = []
    for topic in reversed(request.topics):
        partitions = [
            {
                "partition_index": p.partition,
                "error_code": ErrorCode.none,
                "high_watermark": 100 + p.fetch_offset,
                "last_stable_offset": 100 + p.fetch_offset,
                "log_start_offset": 0,
                "diverging_epoch": {"epoch": -1, "end_offset": -1},
                "current_leader": {"leader_id": -1, "leader_epoch": -1},
                "snapshot_id": {"end_offset": -1, "epoch": -1},
                "aborted_transactions": [],
                "preferred_read_replica": -1,
                "records": b"",
            }
            for p in reversed(request.topics[request.topics.index(topic)].partitions)
        ]
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": topics}


async def _leader(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    size = codec.SIZE.unpack(await reader.readexactly(4))[0]
    frame = await reader.readexactly(size)
    decoded = codec.decode_request(frame, ApiKey.FETCH, FETCH_VERSION)
    response = codec.build(codec.response_class(ApiKey.FETCH, FETCH_VERSION), _answer(decoded.body))
    writer.write(codec.encode_response(decoded.correlation_id, response))
    await writer.drain()
    writer.close()


def test_fetch_results_come_back_in_the_order_asked() -> None:
    async def run() -> list[tuple[str, int, int]]:
        server = await asyncio.start_server(_leader, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        # What the client reads of the metadata image: the leader's endpoints.
        leader = SimpleNamespace(endpoints=[("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT")])
        image = cast(Any, SimpleNamespace(brokers={1: leader}))
        client = KafkaLeaderFetchClient(2, lambda: image, "PLAINTEXT")
        # Interleaved topics, as a restarted follower's partitions are.
        asked = [("a", 0), ("b", 1), ("a", 2), ("c", 0), ("b", 0)]
        partitions = [
            FetchPartition(
                topic,
                index,
                fetch_offset=n,
                current_leader_epoch=0,
                last_fetched_epoch=0,
                log_start_offset=0,
                partition_max_bytes=1024,
            )
            for n, (topic, index) in enumerate(asked)
        ]
        try:
            results = await client.fetch(1, 2, 0, 1, 1 << 20, partitions)
        finally:
            await client.close()
            server.close()
            await server.wait_closed()
        return [(r.topic, r.partition, r.high_watermark) for r in results]

    got = asyncio.run(run())
    assert got == [
        (t, p, 100 + n)
        for n, (t, p) in enumerate([("a", 0), ("b", 1), ("a", 2), ("c", 0), ("b", 0)])
    ]
