"""Several ReplicaManagers in one process, wired through the in-memory
LeaderFetchClient, with real logs in a temporary directory and a fake
controller that holds the partitions' metadata and applies AlterPartition as
the real one does (checking the partition epoch, bumping it)."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import google_crc32c
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from broker_agent.partitions.api import REFUSED, FetchPartition, IsrChangeRequest, IsrChangeResult
from broker_agent.partitions.assignments import MetadataView, PartitionAssignment
from broker_agent.partitions.compression import compress
from broker_agent.partitions.inmemory import InMemoryLeaderFetchClient
from broker_agent.partitions.partition_log import LogConfig
from broker_agent.partitions.record_batch import HEADER_SIZE
from broker_agent.partitions.replica_config import ReplicaConfig
from broker_agent.partitions.replica_manager import ReplicaManager
from broker_agent.replication.follower import TruncationMode

BASE_TIME_MS = 1_700_000_000_000


def make_batch(
    *values: bytes,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_ms: int = BASE_TIME_MS,
    timestamps_ms: Sequence[int] | None = None,
) -> bytes:
    """A producer's record batch, written by kio: every record at `timestamp_ms`,
    or each at its own of `timestamps_ms`."""
    times = timestamps_ms if timestamps_ms is not None else [timestamp_ms] * len(values)
    assert len(times) == len(values)
    records = tuple(
        Record(
            attributes=i8(0),
            timestamp=TZAwareMicros.parse(
                datetime.datetime.fromtimestamp(times[i] / 1000, datetime.UTC)
            ),
            offset=i64(i),
            key=b"key-%d" % i,
            value=v,
            headers=(RecordHeader(key=b"h", value=b"1"),),
        )
        for i, v in enumerate(values)
    )
    batch = NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
        base_sequence=i32(base_sequence),
        records=records,
        attributes=i16(0),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


@dataclass
class FakeClock:
    now_ms: int = BASE_TIME_MS

    def __call__(self) -> int:
        return self.now_ms


@dataclass
class FakeController:
    """The committed metadata and AlterPartition, as the active controller keeps them."""

    partitions: dict[tuple[str, int], PartitionAssignment] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    cluster: Cluster | None = None
    refused: int = 0
    requests: list[int] = field(default_factory=list)  # partitions per AlterPartition

    def view(self) -> MetadataView:
        return MetadataView(tuple(self.partitions.values()), self.configs)

    async def alter_partition(self, broker_id: int, request: IsrChangeRequest) -> IsrChangeResult:
        await asyncio.sleep(0)
        key = (request.topic, request.partition)
        current = self.partitions[key]
        if (
            broker_id != current.leader
            or request.leader_epoch != current.leader_epoch
            or request.partition_epoch != current.partition_epoch
        ):
            self.refused += 1
            return REFUSED
        if request.new_isr != current.isr:  # as the controller: no change, no record
            self.change(request.topic, request.partition, isr=request.new_isr)
        new = self.partitions[key]
        return IsrChangeResult(True, new.leader_epoch, new.partition_epoch, new.isr)

    async def alter_partitions(
        self, broker_id: int, requests: Sequence[IsrChangeRequest]
    ) -> list[IsrChangeResult]:
        """Many in one request, each accepted or refused on its own."""
        self.requests.append(len(requests))
        return [await self.alter_partition(broker_id, r) for r in requests]

    def change(self, topic: str, partition: int, **changes: object) -> None:
        current = self.partitions[(topic, partition)]
        new = replace(current, partition_epoch=current.partition_epoch + 1, **changes)  # type: ignore[arg-type]
        if new.leader != current.leader:
            new = replace(new, leader_epoch=current.leader_epoch + 1)
        self.partitions[(topic, partition)] = new
        if self.cluster is not None:
            self.cluster.publish()


@dataclass
class Cluster:
    root: Path
    broker_ids: tuple[int, ...] = (0, 1, 2)
    clock: FakeClock = field(default_factory=FakeClock)
    client: InMemoryLeaderFetchClient = field(default_factory=InMemoryLeaderFetchClient)
    controller: FakeController = field(default_factory=FakeController)
    brokers: dict[int, ReplicaManager] = field(default_factory=dict)
    mode: TruncationMode = TruncationMode.LEADER_EPOCH
    log_config: LogConfig = field(default_factory=LogConfig)

    def __post_init__(self) -> None:
        self.controller.cluster = self

    def config(self) -> ReplicaConfig:
        return ReplicaConfig(
            replica_lag_time_max_ms=30_000,
            log=self.log_config,
            replica_fetch_wait_max_ms=200,
            replica_fetch_backoff_ms=20,
            tick_interval_ms=None,
        )

    async def start_broker(self, broker_id: int) -> ReplicaManager:
        manager = ReplicaManager(
            broker_id,
            self.root / f"broker-{broker_id}",
            self.config(),
            isr_changer=self.controller,
            fetch_client=self.client,
            clock=self.clock,
            truncation_mode=self.mode,
        )
        await manager.start()
        self.brokers[broker_id] = manager
        self.client.brokers[broker_id] = manager
        self.client.down.discard(broker_id)
        manager.apply_metadata(self.controller.view())
        return manager

    async def stop_broker(self, broker_id: int) -> None:
        """A crash as far as the others can tell; the files stay."""
        self.client.down.add(broker_id)
        manager = self.brokers.pop(broker_id)
        del self.client.brokers[broker_id]
        await manager.close()

    async def start(self) -> None:
        for b in self.broker_ids:
            await self.start_broker(b)

    async def close(self) -> None:
        for b in list(self.brokers):
            await self.stop_broker(b)

    def publish(self) -> None:
        view = self.controller.view()
        for manager in self.brokers.values():
            manager.apply_metadata(view)

    def create_topic(
        self, topic: str, replicas: tuple[int, ...] = (0, 1, 2), **configs: str
    ) -> None:
        self.controller.partitions[(topic, 0)] = PartitionAssignment(
            topic, f"id-{topic}", 0, replicas, replicas, replicas[0], 0, 0
        )
        self.controller.configs[topic] = {k.replace("_", "."): v for k, v in configs.items()}
        self.publish()

    def leader(self, topic: str) -> ReplicaManager:
        return self.brokers[self.controller.partitions[(topic, 0)].leader]

    async def consume(self, broker_id: int, topic: str, offset: int = 0) -> bytes:
        results = await self.brokers[broker_id].fetch(
            -1, 0, 1, 1 << 20, [FetchPartition(topic, 0, offset)]
        )
        return results[0].records


async def eventually(check: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    """Wait for replication to get somewhere (bounded; the test fails, never hangs)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def run(scenario: Callable[[Cluster], Awaitable[None]], root: Path, **kwargs: object) -> None:
    async def main() -> None:
        cluster = Cluster(root, **kwargs)  # type: ignore[arg-type]
        await cluster.start()
        try:
            await scenario(cluster)
        finally:
            await cluster.close()

    asyncio.run(main())


def with_codec(batch: bytes, codec: int, corrupt: bool = False) -> bytes:
    """`batch` with its records compressed by `codec`; `corrupt`: marked as
    compressed by it but left as they are, which the broker cannot read."""
    records = batch[HEADER_SIZE:]
    if not corrupt:
        records = compress(codec, records)
    (attributes,) = struct.unpack_from(">h", batch, 21)
    body = struct.pack(">h", attributes | codec) + batch[23:HEADER_SIZE] + records
    crc = google_crc32c.value(body)
    return batch[:8] + struct.pack(">iibI", len(body) + 9, -1, 2, crc) + body
