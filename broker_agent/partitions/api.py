"""The values that cross the replica manager's edge, and its two seams.

`LeaderFetchClient` is how a follower reaches its leader (Kafka's Fetch with the
follower's replica id, and OffsetsForLeaderEpoch); `IsrChanger` is how a leader
asks the active controller for an ISR change (AlterPartition). Both are
Protocols: production implements them over the network, tests in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from kio.schema.errors import ErrorCode

CONSUMER_REPLICA_ID = -1
# Kafka's ListOffsets from tools: any replica answers, from its own log (LEO, log start).
DEBUGGING_REPLICA_ID = -2
NO_LEADER_EPOCH = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
# ListOffsets v7+ (KIP-734): the record with the largest timestamp.
MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class AppendResult:
    error: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1  # -1: CreateTime topics, as Kafka answers
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int = NO_LEADER_EPOCH
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    partition_max_bytes: int = 1024 * 1024


class DivergingEpoch(NamedTuple):
    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    diverging_epoch: DivergingEpoch | None = None
    records: bytes = b""


class ListOffsetsResult(NamedTuple):
    error: ErrorCode
    offset: int
    timestamp: int
    leader_epoch: int


class EpochEndOffsetResult(NamedTuple):
    """OffsetsForLeaderEpoch's answer for one partition."""

    error: ErrorCode
    leader_epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class EpochQuery:
    topic: str
    partition: int
    current_leader_epoch: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class IsrChangeRequest:
    """One AlterPartition item: the ISR the leader wants, at the epochs it read."""

    topic: str
    topic_id: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


class LeaderFetchClient(Protocol):
    """How a follower reaches the leader broker `leader_id`. Raises `ConnectionError`
    (or `OSError`) when the leader cannot be reached; the fetcher backs off."""

    async def fetch(
        self,
        leader_id: int,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        partitions: Sequence[FetchPartition],
    ) -> list[FetchPartitionResult]:
        """One result per partition, in the order of `partitions` (the fetcher
        pairs them by position)."""
        ...

    async def offsets_for_leader_epoch(
        self, leader_id: int, replica_id: int, queries: Sequence[EpochQuery]
    ) -> list[EpochEndOffsetResult]:
        """One answer per query, in order."""
        ...


@dataclass(frozen=True, slots=True)
class IsrChangeResult:
    """The controller's answer to one item: accepted with the partition's
    committed state (ISR and partition epoch: an accepted change that changed
    nothing commits no record, so the answer is the only news of it), or refused."""

    accepted: bool
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


REFUSED = IsrChangeResult(False)


class IsrChanger(Protocol):
    """AlterPartition to the active controller, for many partitions in one
    request (as Kafka's carries topics x partitions): one answer per request,
    in order; refused (a stale partition epoch: the leader asks again on fresh
    metadata) or unreachable (all refused)."""

    async def alter_partitions(
        self, broker_id: int, requests: Sequence[IsrChangeRequest]
    ) -> list[IsrChangeResult]: ...
