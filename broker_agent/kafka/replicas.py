"""What the Kafka handlers need of the broker's partition replicas: the replica
manager's interface as the handlers see it (`broker_agent/partitions/` holds the
implementation). The handlers are adapters: they translate a request into these
calls and the results into a response, and decide nothing about replication.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from kio.schema.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class AppendResult:
    error: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    partition_max_bytes: int = 1 << 20


@dataclass(frozen=True, slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset)
    records: bytes = b""


class EpochEndOffsetResult(NamedTuple):
    error: ErrorCode
    leader_epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class EpochQuery:
    topic: str
    partition: int
    current_leader_epoch: int
    leader_epoch: int


class Replicas(Protocol):
    async def append(
        self, topic: str, partition: int, records: bytes, acks: int, timeout_ms: int
    ) -> AppendResult: ...

    async def fetch(
        self,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        partitions: Sequence[FetchPartition],
        isolation_level: int,
    ) -> list[FetchPartitionResult]: ...

    def list_offsets(
        self, topic: str, partition: int, timestamp: int, current_leader_epoch: int
    ) -> tuple[ErrorCode, int, int, int]:
        """(error, offset, timestamp, leader_epoch)."""
        ...

    def offsets_for_leader_epoch(
        self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """(error, leader_epoch, end_offset)."""
        ...
