"""The follower's side of replication over Kafka's protocol: the real `LeaderFetchClient`.

A follower fetches from its partitions' leader with Kafka's Fetch carrying its own
`replica_id` (so the leader counts the fetch in the follower's LEO and the HW),
and asks OffsetsForLeaderEpoch where an epoch ends after a restart. The leader's
address is its advertised endpoint for the inter-broker listener, read from the
committed metadata image, as a Kafka broker's fetcher threads find their leaders.

One connection per leader, one request in flight on it at a time (the follower
fetcher sends one fetch per leader, long-polled by it); the connection is
dropped on any error and opened again on the next call, to wherever the
metadata then says the leader is. Failures surface as `ConnectionError`, which the
fetcher answers by backing off.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.static.primitive import i16, i32

from broker_agent.kafka import codec
from broker_agent.kafka.versions import ApiKey
from broker_agent.partitions.api import (
    DivergingEpoch,
    EpochEndOffsetResult,
    EpochQuery,
    FetchPartition,
    FetchPartitionResult,
)
from quorum.controller.metadata_image import MetadataImage

FETCH_VERSION = 12  # topic names, replica_id in the body, diverging epochs, flexible
EPOCH_VERSION = 4
# A leader parks a fetch up to max_wait_ms; the answer may take this much longer.
SLACK_S = 10.0


@dataclass
class _Link:
    address: tuple[str, int]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    correlation_id: int = 0


class KafkaLeaderFetchClient:
    def __init__(
        self,
        node_id: int,
        image: Callable[[], MetadataImage],
        listener_name: str,
        max_response_bytes: int = 104_857_600,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.node_id = node_id
        self.image = image
        self.listener_name = listener_name
        self.max_response_bytes = max_response_bytes
        self.ssl_context = ssl_context
        self._links: dict[int, _Link] = {}

    # ------------------------------------------------------------ the seam

    async def fetch(
        self,
        leader_id: int,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        partitions: Sequence[FetchPartition],
    ) -> list[FetchPartitionResult]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for p in partitions:
            topics.setdefault(p.topic, []).append(
                {
                    "partition": p.partition,
                    "current_leader_epoch": p.current_leader_epoch,
                    "fetch_offset": p.fetch_offset,
                    "last_fetched_epoch": p.last_fetched_epoch,
                    "log_start_offset": p.log_start_offset,
                    "partition_max_bytes": p.partition_max_bytes,
                }
            )
        values = {
            "replica_id": replica_id,
            "max_wait": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        answer = await self._call(
            leader_id, ApiKey.FETCH, FETCH_VERSION, values, max_wait_ms / 1000 + SLACK_S
        )
        if answer.error_code != ErrorCode.none:
            return [
                FetchPartitionResult(p.topic, p.partition, answer.error_code) for p in partitions
            ]
        # Kafka's answer groups partitions by topic; the seam answers in the
        # order asked (a restarted follower's partitions interleave topics).
        found: dict[tuple[str, int], FetchPartitionResult] = {}
        for topic in answer.responses:
            for r in topic.partitions:
                diverging = None
                if r.diverging_epoch.epoch >= 0 and r.diverging_epoch.end_offset >= 0:
                    diverging = DivergingEpoch(
                        int(r.diverging_epoch.epoch), int(r.diverging_epoch.end_offset)
                    )
                key = (topic.topic, int(r.partition_index))
                found[key] = FetchPartitionResult(
                    topic=topic.topic,
                    partition=key[1],
                    error=r.error_code,
                    high_watermark=int(r.high_watermark),
                    last_stable_offset=int(r.last_stable_offset),
                    log_start_offset=int(r.log_start_offset),
                    diverging_epoch=diverging,
                    records=bytes(r.records or b""),
                )
        return [
            found.get(
                (p.topic, p.partition),
                FetchPartitionResult(p.topic, p.partition, ErrorCode.unknown_server_error),
            )
            for p in partitions
        ]

    async def offsets_for_leader_epoch(
        self, leader_id: int, replica_id: int, queries: Sequence[EpochQuery]
    ) -> list[EpochEndOffsetResult]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for q in queries:
            topics.setdefault(q.topic, []).append(
                {
                    "partition": q.partition,
                    "current_leader_epoch": q.current_leader_epoch,
                    "leader_epoch": q.leader_epoch,
                }
            )
        values = {
            "replica_id": replica_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        }
        answer = await self._call(leader_id, ApiKey.OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, values,
                                  SLACK_S)  # fmt: skip
        found = {
            (t.topic, int(p.partition)): EpochEndOffsetResult(
                p.error_code, int(p.leader_epoch), int(p.end_offset)
            )
            for t in answer.topics
            for p in t.partitions
        }
        missing = EpochEndOffsetResult(ErrorCode.unknown_server_error, -1, -1)
        return [found.get((q.topic, q.partition), missing) for q in queries]

    async def close(self) -> None:
        for leader_id in list(self._links):
            await self._drop(leader_id)

    # ------------------------------------------------------------ plumbing

    def _address(self, leader_id: int) -> tuple[str, int]:
        broker = self.image().brokers.get(leader_id)
        if broker is None:
            raise ConnectionError(f"broker {leader_id} is not registered")
        for name, host, port, _protocol in broker.endpoints:
            if name == self.listener_name:
                return host, port
        raise ConnectionError(f"broker {leader_id} has no {self.listener_name} listener")

    async def _link(self, leader_id: int) -> _Link:
        address = self._address(leader_id)
        link = self._links.get(leader_id)
        if link is not None and link.address == address and not link.writer.is_closing():
            return link
        await self._drop(leader_id)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(*address, ssl=self.ssl_context), SLACK_S
            )
        except (OSError, TimeoutError) as err:
            raise ConnectionError(f"cannot reach broker {leader_id} at {address}: {err}") from err
        link = _Link(address, reader, writer)
        self._links[leader_id] = link
        return link

    async def _drop(self, leader_id: int) -> None:
        link = self._links.pop(leader_id, None)
        if link is not None:
            link.writer.close()
            with contextlib.suppress(Exception):
                await link.writer.wait_closed()

    async def _call(
        self, leader_id: int, api_key: int, version: int, values: dict[str, Any], timeout_s: float
    ) -> Any:
        link = await self._link(leader_id)
        async with link.lock:
            link.correlation_id += 1
            header = RequestHeader(
                request_api_key=i16(api_key),
                request_api_version=i16(version),
                correlation_id=i32(link.correlation_id),
                client_id=f"broker-{self.node_id}-fetcher",
            )
            frame = codec.encode_request(header, codec.build(codec.request_class(api_key, version),
                                                             values))  # fmt: skip
            try:
                link.writer.write(frame)
                await link.writer.drain()
                size_bytes = await asyncio.wait_for(link.reader.readexactly(4), timeout_s)
                size = codec.SIZE.unpack(size_bytes)[0]
                if not 0 < size <= self.max_response_bytes:
                    raise ConnectionError(f"a response of {size} bytes from broker {leader_id}")
                body = await asyncio.wait_for(link.reader.readexactly(size), timeout_s)
                correlation_id, answer = codec.decode_response(body, api_key, version)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as err:
                await self._drop(leader_id)
                raise ConnectionError(f"broker {leader_id}: {type(err).__name__}: {err}") from err
            if correlation_id != link.correlation_id:
                await self._drop(leader_id)
                raise ConnectionError(f"broker {leader_id} answered another request")
            return answer
