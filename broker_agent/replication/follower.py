"""The follower's rules: its high watermark and where to truncate its log.

A follower's HW is min(leader HW, own LEO) (seed 001). Where it truncates is
the point of KIP-101: truncating to its own HW (the rule before Kafka 0.11)
loses acknowledged records when the HW it knows is behind the leader's, and
leaves replicas diverged after a crash of both; truncating to the end of the
last common leader epoch, as the leader reports it, does neither. The HW mode
exists only so the tests can show the old rule losing data.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from broker_agent.replication.epochs import (
    UNDEFINED_EPOCH,
    EpochEndOffset,
    EpochEntry,
    end_offset_for_epoch,
)


class TruncationMode(Enum):
    LEADER_EPOCH = "leader-epoch"  # KIP-101/KIP-320: the only production mode
    HIGH_WATERMARK = "high-watermark"  # the pre-0.11 rule, for tests only


def follower_high_watermark(leader_high_watermark: int, log_end_offset: int) -> int:
    """The seed's `HW = Math.min[LeaderHW, LEO]`."""
    return min(leader_high_watermark, log_end_offset)


def truncation_offset_by_epoch(
    entries: Sequence[EpochEntry],
    log_end_offset: int,
    high_watermark: int,
    leader_answer: EpochEndOffset,
) -> int:
    """Where a follower cuts its log, given the leader's answer to "where does my
    latest epoch end on your log?" (OffsetsForLeaderEpoch, or a Fetch answer's
    diverging epoch).

    The leader answers with the largest epoch it has at or below the one asked
    for. When that is the follower's own epoch, the logs agree up to the
    leader's end offset for it; when it is an older epoch, the follower's log
    agrees only up to where *its* copy of that older epoch ends. An undefined
    answer (the leader has no such epoch) leaves only the HW as a safe point.
    """
    if leader_answer.epoch == UNDEFINED_EPOCH:
        return min(high_watermark, log_end_offset)
    # When the follower lacks the leader's epoch, its own lookup lands on an older
    # one and ends where that epoch ends on its log: the same min covers both.
    own = end_offset_for_epoch(entries, leader_answer.epoch, log_end_offset)
    if own.epoch == UNDEFINED_EPOCH:
        return min(leader_answer.end_offset, log_end_offset)
    return min(leader_answer.end_offset, own.end_offset, log_end_offset)


def truncation_offset(
    mode: TruncationMode,
    entries: Sequence[EpochEntry],
    log_end_offset: int,
    high_watermark: int,
    leader_answer: EpochEndOffset | None,
) -> int:
    """Where to cut before fetching from a (new) leader, by `mode`."""
    if mode is TruncationMode.HIGH_WATERMARK or leader_answer is None:
        return min(high_watermark, log_end_offset)
    return truncation_offset_by_epoch(entries, log_end_offset, high_watermark, leader_answer)


def diverging_epoch(
    leader_entries: Sequence[EpochEntry],
    leader_log_end_offset: int,
    fetch_offset: int,
    last_fetched_epoch: int,
) -> EpochEndOffset | None:
    """The leader's check on a Fetch (KIP-320): does the follower's log, ending at
    `fetch_offset` in `last_fetched_epoch`, agree with the leader's? If not,
    the (epoch, end offset) it must truncate to."""
    if last_fetched_epoch < 0:
        return None
    found = end_offset_for_epoch(leader_entries, last_fetched_epoch, leader_log_end_offset)
    if found.epoch != last_fetched_epoch or found.end_offset < fetch_offset:
        return found
    return None
