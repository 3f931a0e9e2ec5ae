"""Offsets looked up in a replica's log: ListOffsets (by timestamp, earliest,
latest) and OffsetsForLeaderEpoch (where an epoch ends).

Reads of one partition's log and epoch cache, nothing else: the replica
manager finds the partition (and refuses a wrong leader epoch), these answer.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker_agent.partitions.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    EpochEndOffsetResult,
    ListOffsetsResult,
)
from broker_agent.partitions.partition import Partition


def offset_at(part: Partition, timestamp: int, end: int) -> ListOffsetsResult:
    """ListOffsets over the log below `end` (the HW for clients, the LEO for tools):
    -2 the log start, -1 `end`, else the first batch whose max timestamp is at or
    after `timestamp`."""
    plog = part.log
    if timestamp == EARLIEST_TIMESTAMP:
        offset = plog.log_start_offset
        return ListOffsetsResult(ErrorCode.none, offset, -1, epoch_at(part, offset))
    if timestamp == LATEST_TIMESTAMP:
        return ListOffsetsResult(ErrorCode.none, end, -1, epoch_at(part, end - 1))
    for header in plog.batch_headers():
        if header.base_offset >= end:
            break
        if header.max_timestamp >= timestamp:
            return ListOffsetsResult(
                ErrorCode.none,
                header.base_offset,
                header.max_timestamp,
                header.partition_leader_epoch,
            )
    return ListOffsetsResult(ErrorCode.none, -1, -1, -1)


def epoch_at(part: Partition, offset: int) -> int:
    if offset < 0 or not part.log.epoch_entries:
        return part.leader_epoch
    return part.log.end_offset_for_epoch_at(offset)


def epoch_end_offset(part: Partition, leader_epoch: int) -> EpochEndOffsetResult:
    """Where `leader_epoch` (or the largest epoch below it) ends on this leader's log."""
    found = part.log.end_offset_for_epoch(leader_epoch)
    if leader_epoch == part.leader_epoch and found.epoch < leader_epoch:
        # This leader's own epoch, before its first append in it.
        return EpochEndOffsetResult(ErrorCode.none, leader_epoch, part.log.log_end_offset)
    return EpochEndOffsetResult(ErrorCode.none, found.epoch, found.end_offset)


__all__ = ["epoch_at", "epoch_end_offset", "offset_at"]
