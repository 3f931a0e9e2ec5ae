"""Offsets looked up in a replica's log: ListOffsets (by timestamp, earliest,
latest, max timestamp) and OffsetsForLeaderEpoch (where an epoch ends).

Reads of one partition's log and epoch cache, nothing else: the replica
manager finds the partition (and refuses a wrong leader epoch), these answer.

A lookup by timestamp answers the record Kafka answers, not its batch: the
first record whose timestamp is at or after the one asked (in the first batch
whose max timestamp is), and for MAX_TIMESTAMP (-3, KIP-734) the first record
carrying the log's largest timestamp. Either is then shown only if it lies below
`end` (Kafka filters the same way: a consumer is told of no offset it may not
read yet). The records are read in every codec (`compression.py`); a batch the
broker does not read (corrupt, or records over `MAX_DECOMPRESSED_BYTES`) is
answered with its base offset and max timestamp, which is never past the exact
record, so a consumer that seeks there misses nothing. Each segment's largest
timestamp is remembered between lookups (`time_index.py`), so a lookup reads only
the segment that holds its answer and what was appended since the last one.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker_agent.partitions.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    EpochEndOffsetResult,
    ListOffsetsResult,
)
from broker_agent.partitions.partition import Partition
from broker_agent.partitions.partition_log import PartitionLog
from broker_agent.partitions.record_batch import (
    InvalidRecordBatch,
    RecordBatchHeader,
    parse_header,
)
from broker_agent.partitions.record_codec import (
    LOG_APPEND_TIME_FLAG,
    UnsupportedCompression,
    records_of,
)
from broker_agent.partitions.time_index import SegmentTimes, batches_in, segment_times

NOT_FOUND = ListOffsetsResult(ErrorCode.none, -1, -1, -1)


def offset_at(part: Partition, timestamp: int, end: int) -> ListOffsetsResult:
    """ListOffsets over the log below `end` (the HW for clients, the LEO for tools):
    -2 the log start, -1 `end`, -3 the record with the largest timestamp, else the
    first record whose timestamp is at or after `timestamp`."""
    plog = part.log
    if timestamp == EARLIEST_TIMESTAMP:
        offset = plog.log_start_offset
        return ListOffsetsResult(ErrorCode.none, offset, -1, epoch_at(part, offset))
    if timestamp == LATEST_TIMESTAMP:
        return ListOffsetsResult(ErrorCode.none, end, -1, epoch_at(part, end - 1))
    if timestamp == MAX_TIMESTAMP:
        found = _max_timestamp_record(plog)
    else:
        found = _first_record_at_or_after(plog, timestamp, end)
    if found is None or found.offset >= end:
        return NOT_FOUND
    return found


def _first_record_at_or_after(
    plog: PartitionLog, timestamp: int, end: int
) -> ListOffsetsResult | None:
    log_start = plog.log_start_offset
    for times in segment_times(plog):
        if times.start >= end:
            return None
        if times.max_batch_offset < 0 or times.max_timestamp < timestamp:
            continue  # nothing that late in this segment: not read
        for header, payload in batches_in(plog, times):
            if header.base_offset >= end:
                return None
            if header.max_timestamp < timestamp:
                continue
            records = _record_times(header, payload)
            if records is None:
                return _found(header, max(header.base_offset, log_start), header.max_timestamp)
            for offset, record_timestamp in records:
                if record_timestamp >= timestamp and offset >= log_start:
                    return _found(header, offset, record_timestamp)
    return None


def _max_timestamp_record(plog: PartitionLog) -> ListOffsetsResult | None:
    """The first record carrying the largest timestamp of the whole log (to its
    LEO, as Kafka looks it up before filtering by `end`)."""
    best: SegmentTimes | None = None
    for times in segment_times(plog):
        if times.max_batch_offset >= 0 and (
            best is None or times.max_timestamp > best.max_timestamp
        ):
            best = times
    if best is None:
        return None
    log_start = plog.log_start_offset
    payload = next(plog.stored_batches(best.max_batch_offset))
    header = parse_header(payload)
    records = _record_times(header, payload)
    if records is not None:
        for offset, record_timestamp in records:
            if record_timestamp == header.max_timestamp and offset >= log_start:
                return _found(header, offset, record_timestamp)
    return _found(header, max(header.base_offset, log_start), header.max_timestamp)


def _record_times(header: RecordBatchHeader, payload: bytes) -> list[tuple[int, int]] | None:
    """(offset, timestamp) of each record of one batch; None where this broker
    cannot read the records (a codec it has no decompressor for, or records that
    do not parse: the batch's CRC held, so they are stored and served as they are)."""
    try:
        _, records = records_of(payload)
    except (UnsupportedCompression, InvalidRecordBatch):
        return None
    if header.attributes & LOG_APPEND_TIME_FLAG:
        # LogAppendTime: every record's timestamp is the batch's (its max timestamp).
        return [(r.offset, header.max_timestamp) for r in records]
    return [(r.offset, r.timestamp) for r in records]


def _found(header: RecordBatchHeader, offset: int, timestamp: int) -> ListOffsetsResult:
    return ListOffsetsResult(ErrorCode.none, offset, timestamp, header.partition_leader_epoch)


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
