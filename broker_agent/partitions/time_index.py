"""Each segment's largest timestamp, remembered between ListOffsets lookups.

A lookup by timestamp, or of the largest one (-3), needs the max timestamps of
the batches; the log keeps no time index on disk (Kafka's `.timeindex`), so
without this every lookup read the whole log on the broker's event loop: about
5 ms per MB here, seconds for a partition of a few GB, enough to stall every
client of the broker and miss its heartbeats, on each request a consumer sends.

Here each segment is read once, and its summary (largest timestamp, the first
batch holding it) kept in memory for as long as the segment is unchanged: the
same base, end offset, size and log start, and no truncation since (the log's
`truncations` count). The active segment only grows, so its summary is extended
over the batches appended since, not rebuilt. A segment the cleaner rewrote has
another size and is read again; one retention deleted is forgotten. The first
lookup after a start still reads each segment once.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from broker_agent.partitions.partition_log import PartitionLog
from broker_agent.partitions.record_batch import RecordBatchHeader, parse_header
from quorum.log.segment import SegmentInfo

NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class SegmentTimes:
    """What one segment, from `start` to `next_offset`, holds of timestamps."""

    start: int  # the segment's base offset, or the log start inside it
    next_offset: int
    size_bytes: int
    truncations: int
    max_timestamp: int = NO_TIMESTAMP
    max_batch_offset: int = -1  # the base offset of the first batch with it; -1 none


_kept: weakref.WeakKeyDictionary[PartitionLog, dict[int, SegmentTimes]] = (
    weakref.WeakKeyDictionary()
)


def segment_times(plog: PartitionLog) -> list[SegmentTimes]:
    """Every segment's summary, oldest first, reading only what changed."""
    kept = _kept.get(plog, {})
    log_start = plog.log_start_offset
    now: dict[int, SegmentTimes] = {}
    for info in plog.store.segments:
        if info.next_offset <= max(log_start, info.base_offset):
            continue  # empty, or wholly below the log start
        start = max(info.base_offset, log_start)
        old = kept.get(info.base_offset)
        if old is not None and _same(old, info, start, plog.truncations):
            times = old
        elif old is not None and _grown(old, info, start, plog.truncations):
            times = _scan(plog, info, old)
        else:
            times = _scan(plog, info, SegmentTimes(start, start, 0, plog.truncations))
        now[info.base_offset] = times
    _kept[plog] = now
    return list(now.values())


def batches_in(
    plog: PartitionLog, times: SegmentTimes
) -> Iterator[tuple[RecordBatchHeader, bytes]]:
    """The stored batches of one summarised segment, oldest first."""
    for payload in plog.stored_batches(times.start):
        header = parse_header(payload)
        if header.base_offset >= times.next_offset:
            return
        yield header, payload


def _same(old: SegmentTimes, info: SegmentInfo, start: int, truncations: int) -> bool:
    return (
        old.start == start
        and old.next_offset == info.next_offset
        and old.size_bytes == info.size_bytes
        and old.truncations == truncations
    )


def _grown(old: SegmentTimes, info: SegmentInfo, start: int, truncations: int) -> bool:
    """Only appended to since: the active segment."""
    return (
        old.start == start
        and old.truncations == truncations
        and old.next_offset < info.next_offset
        and old.size_bytes < info.size_bytes
    )


def _scan(plog: PartitionLog, info: SegmentInfo, old: SegmentTimes) -> SegmentTimes:
    """`old` extended over the segment's batches from `old.next_offset` on."""
    best, best_offset = old.max_timestamp, old.max_batch_offset
    for payload in plog.stored_batches(old.next_offset):
        header = parse_header(payload)
        if header.base_offset >= info.next_offset:
            break
        if header.records_count and (best_offset < 0 or header.max_timestamp > best):
            best, best_offset = header.max_timestamp, header.base_offset
    return SegmentTimes(
        old.start, info.next_offset, info.size_bytes, old.truncations, best, best_offset
    )


__all__ = ["SegmentTimes", "batches_in", "segment_times"]
