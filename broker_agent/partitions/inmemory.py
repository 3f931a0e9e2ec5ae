"""The in-memory `LeaderFetchClient`: followers call the leader's ReplicaManager
directly. Several managers in one process are a cluster without sockets (the
seam DESIGN.md allows for tests); `down` makes brokers unreachable."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker_agent.partitions.api import (
    EpochEndOffsetResult,
    EpochQuery,
    FetchPartition,
    FetchPartitionResult,
)

if TYPE_CHECKING:
    from broker_agent.partitions.replica_manager import ReplicaManager


class InMemoryLeaderFetchClient:
    def __init__(self) -> None:
        self.brokers: dict[int, ReplicaManager] = {}
        self.down: set[int] = set()

    def _reach(self, leader_id: int, replica_id: int) -> ReplicaManager:
        manager = self.brokers.get(leader_id)
        if manager is None or leader_id in self.down or replica_id in self.down:
            raise ConnectionError(f"broker {leader_id} is unreachable from {replica_id}")
        return manager

    async def fetch(
        self,
        leader_id: int,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        partitions: Sequence[FetchPartition],
    ) -> list[FetchPartitionResult]:
        leader = self._reach(leader_id, replica_id)
        results = await leader.fetch(replica_id, max_wait_ms, min_bytes, max_bytes, partitions)
        self._reach(leader_id, replica_id)  # the answer is lost if it went down meanwhile
        return results

    async def offsets_for_leader_epoch(
        self, leader_id: int, replica_id: int, queries: Sequence[EpochQuery]
    ) -> list[EpochEndOffsetResult]:
        leader = self._reach(leader_id, replica_id)
        await asyncio.sleep(0)
        return [
            leader.offsets_for_leader_epoch(
                q.topic, q.partition, q.current_leader_epoch, q.leader_epoch
            )
            for q in queries
        ]
