"""Seed 001's replicas as plain data, driven only by `broker_agent.replication`.

A replica is a list of (epoch, value) records (its offset is the index), a HW,
and, on the leader, the `LeaderState` the rules keep. Nothing here decides
anything: every HW, ISR and truncation figure comes from the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker_agent.replication import leader as rules
from broker_agent.replication.epochs import EpochEndOffset, EpochEntry, end_offset_for_epoch
from broker_agent.replication.follower import (
    TruncationMode,
    diverging_epoch,
    follower_high_watermark,
    truncation_offset,
)


@dataclass
class Replica:
    replica_id: int
    log: list[tuple[int, str]] = field(default_factory=list)
    high_watermark: int = 0
    leader: rules.LeaderState | None = None

    @property
    def log_end_offset(self) -> int:
        return len(self.log)

    @property
    def epochs(self) -> list[EpochEntry]:
        out: list[EpochEntry] = []
        for offset, (epoch, _) in enumerate(self.log):
            if not out or out[-1].epoch != epoch:
                out.append(EpochEntry(epoch, offset))
        return out

    @property
    def last_epoch(self) -> int:
        return self.log[-1][0] if self.log else -1

    def values(self, end: int | None = None) -> list[str]:
        return [v for _, v in self.log[:end]]

    def truncate(self, offset: int) -> None:
        del self.log[offset:]
        self.high_watermark = min(self.high_watermark, offset)

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        return end_offset_for_epoch(self.epochs, epoch, self.log_end_offset)


def make_leader(
    replica: Replica, epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...], now_ms: int = 0
) -> None:
    replica.leader = rules.become_leader(
        replica.replica_id, epoch, 0, replicas, isr,
        replica.log_end_offset, replica.high_watermark, now_ms,
    )  # fmt: skip


def produce(leader: Replica, *values: str) -> None:
    """A local append on the leader (the seed's `LEO=LEO+n`)."""
    state = leader.leader
    assert state is not None
    leader.log.extend((state.leader_epoch, v) for v in values)
    state = rules.on_local_append(state, leader.log_end_offset)
    state, _ = rules.maybe_increment_leader_hw(state)
    leader.leader = state
    leader.high_watermark = state.high_watermark


def leader_handles_fetch(
    leader: Replica, follower_id: int, fetch_offset: int, now_ms: int = 0
) -> int:
    """The leader's side of a fetch: the follower's LEO is its fetch offset; the
    HW may move; the answer carries the HW."""
    state = leader.leader
    assert state is not None
    state = rules.update_follower_fetch_state(state, follower_id, fetch_offset, now_ms)
    state, _ = rules.maybe_increment_leader_hw(state)
    leader.leader = state
    leader.high_watermark = state.high_watermark
    return state.high_watermark


def fetch(
    follower: Replica, leader: Replica, max_records: int | None = None, now_ms: int = 0
) -> None:
    """One whole fetch round trip: request, leader update, records and HW back."""
    fetch_offset = follower.log_end_offset
    assert leader.leader is not None
    diverging = diverging_epoch(
        leader.epochs, leader.log_end_offset, fetch_offset, follower.last_epoch
    )
    assert diverging is None, f"diverged at {diverging}; truncate first"
    leader_hw = leader_handles_fetch(leader, follower.replica_id, fetch_offset, now_ms)
    end = leader.log_end_offset if max_records is None else fetch_offset + max_records
    follower.log.extend(leader.log[fetch_offset:end])
    follower.high_watermark = follower_high_watermark(leader_hw, follower.log_end_offset)


def fetch_round(
    leader: Replica, requests: list[tuple[Replica, int | None]], now_ms: int = 0
) -> None:
    """The seed's rounds: every follower's fetch reaches the leader (which updates
    its HW from all of them), then every answer goes back with that HW."""
    offsets = [follower.log_end_offset for follower, _ in requests]
    for (follower, _), offset in zip(requests, offsets, strict=True):
        leader_handles_fetch(leader, follower.replica_id, offset, now_ms)
    for (follower, count), offset in zip(requests, offsets, strict=True):
        end = leader.log_end_offset if count is None else offset + count
        follower.log.extend(leader.log[offset:end])
        follower.high_watermark = follower_high_watermark(
            leader.high_watermark, follower.log_end_offset
        )


def truncate_before_following(follower: Replica, leader: Replica, mode: TruncationMode) -> int:
    """What a follower does on (re)start or on a new leader, before fetching."""
    answer = leader.end_offset_for_epoch(follower.last_epoch) if follower.log else None
    offset = truncation_offset(
        mode, follower.epochs, follower.log_end_offset, follower.high_watermark, answer
    )
    follower.truncate(offset)
    return offset
