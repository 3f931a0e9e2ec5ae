"""One replica hosted by this broker: its log and its role, leader or follower."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum

from broker_agent.partitions.api import IsrChangeRequest
from broker_agent.partitions.assignments import PartitionAssignment
from broker_agent.partitions.partition_log import PartitionLog
from broker_agent.partitions.producer_state import ProducerStateTable
from broker_agent.replication import leader as rules


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"  # assigned here, but no leader to follow


@dataclass
class Partition:
    assignment: PartitionAssignment
    log: PartitionLog
    producers: ProducerStateTable
    role: Role = Role.OFFLINE
    high_watermark: int = 0
    leader_state: rules.LeaderState | None = None
    needs_truncation: bool = False  # a follower checks its epochs before fetching
    # The AlterPartition item sent and not answered (its answer is acted on only
    # while it is still this one: newer metadata supersedes it).
    isr_change_in_flight: IsrChangeRequest | None = None
    fetch_answers: int = 0  # as a follower: answers handled from the leader
    # As a follower: (leader epoch, leader HW) of the last fetch answer, for the lag metric.
    fetched_leader_high_watermark: tuple[int, int] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def topic(self) -> str:
        return self.assignment.topic

    @property
    def partition(self) -> int:
        return self.assignment.partition

    @property
    def leader_epoch(self) -> int:
        return self.assignment.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return self.assignment.isr

    def notify(self) -> None:
        """Wake everyone waiting on this partition (long-polled fetches, acks=all)."""
        self.changed.set()
        self.changed = asyncio.Event()
