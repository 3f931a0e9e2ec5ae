"""The log cleaner: compaction for topics whose `cleanup.policy` has `compact`.

One round over one partition log (Kafka's `Cleaner.doClean`):

1. The cleanable range: from the first dirty offset (this log's
   `cleaner-offset-checkpoint`: everything below it was cleaned before) up to
   the first segment that is active, reaches past the high watermark, or holds
   a batch newer than `min.compaction.lag.ms`. Only whole segments are cleaned.
2. Map every key of the dirty range to its last offset (`OffsetMap`, bounded by
   `log.cleaner.dedupe.buffer.size`). When the map fills, the round stops
   mapping at that batch; the rest of the dirty range waits for the next round.
3. Rewrite every segment from the log start up to where the map stopped, in
   groups of at most `segment.bytes`, keeping a record when it is a key's last
   (offset >= the map's), or past the mapped range, and dropping tombstones
   whose batch's delete horizon has passed. A batch that keeps tombstones gets
   a horizon of now + `delete.retention.ms` (KIP-534), so consumers have that
   long to see a delete. A producer's last batch is kept, empty if need be.
4. Swap each rewritten group in (`FileLogStore.replace_segments`: `.cleaned`,
   fsync, `.swap`, delete, rename), then move the checkpoint.

A log is cleaned when its dirty ratio (dirty bytes / cleanable bytes) reaches
`min.cleanable.dirty.ratio`, when its oldest dirty batch is older than
`max.compaction.lag.ms`, or when a delete horizon it set has passed. Offsets
never change (gaps are normal) and every replica cleans its own log, as in
Kafka. The work is a generator of bounded steps, so the broker's event loop
runs between them; a step never holds the log for more than ~1 MiB of records.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from broker_agent.partitions.offset_map import KAFKA_DEFAULT_DEDUPE_BUFFER_SIZE, OffsetMap
from broker_agent.partitions.partition_log import PartitionLog
from broker_agent.partitions.producer_state import ProducerStateTable
from broker_agent.partitions.record_batch import NO_PRODUCER_ID, InvalidRecordBatch, parse_header
from broker_agent.partitions.record_codec import (
    Record,
    UnsupportedCompression,
    has_delete_horizon,
    records_of,
    rewrite_batch,
    scan_keys,
)
from quorum.log.batch_format import OpaqueBatch
from quorum.log.segment import SegmentInfo

log = logging.getLogger(__name__)

STEP_BYTES = 1 << 20
Hook = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Broker settings (Kafka's names and defaults)."""

    enable: bool = True  # log.cleaner.enable
    dedupe_buffer_size: int = KAFKA_DEFAULT_DEDUPE_BUFFER_SIZE  # log.cleaner.dedupe.buffer.size
    io_buffer_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms
    io_max_bytes_per_second: float = float("inf")  # log.cleaner.io.max.bytes.per.second
    threads: int = 1  # log.cleaner.threads: rounds at once, sharing the buffer and throttle


@dataclass(frozen=True, slots=True)
class CleanableRange:
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    oldest_dirty_ms: int  # the first dirty batch's timestamp, -1 if none

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass
class PartitionCleaning:
    """Per compacted partition, for operators (the metrics label them)."""

    dirty_ratio: float = 0.0
    last_run_end_ms: int = -1
    reclaimed_bytes: int = 0


@dataclass
class CleanerStats:
    """What the metrics show (Kafka's LogCleaner and LogCleanerManager metrics)."""

    runs: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    bytes_removed: int = 0
    last_run_end_ms: int = -1
    last_check_ms: int = -1  # when the cleaner last looked for work (a dead task shows)
    last_run_seconds: float = 0.0
    # Kafka's max-clean-time-secs: the longest of each cleaner thread's last round.
    max_last_run_seconds: float = 0.0
    max_clean_seconds: float = 0.0
    last_recopy_ratio: float = 0.0
    last_buffer_utilization: float = 0.0
    max_dirty_ratio: float = 0.0
    uncleanable: set[str] = field(default_factory=set)
    aborted_rounds: int = 0
    # Bytes read and written, counted step by step as the task runs them (rounds
    # still running and dropped ones included): what the throttle meters.
    io_bytes: int = 0
    partitions: dict[tuple[str, int], PartitionCleaning] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MappedRange:
    """The dirty range one round mapped, and the offsets its map holds, sorted.

    Every record of that range with a key is in the map, so a batch wholly
    inside it keeps exactly the records whose offsets the map holds (keyless
    ones go): counting them needs no read of its records, and most batches of
    a dirty log keep none. Except the batches the map could not read (`unread`:
    corrupt, or over the decompression bound), which are kept whole."""

    start: int
    end: int
    latest: list[int]
    unread: frozenset[int] = frozenset()  # base offsets

    def kept_in(self, base_offset: int, next_offset: int) -> int | None:
        """How many records of the batch [base, next) stay; None outside the
        range or for a batch the map could not read."""
        if base_offset < self.start or next_offset > self.end or base_offset in self.unread:
            return None
        return bisect_left(self.latest, next_offset) - bisect_left(self.latest, base_offset)


@dataclass
class RoundResult:
    cleaned: bool = False  # segments were swapped in
    aborted: bool = False  # the log changed under the round; nothing was swapped
    map_end: int = -1
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    earliest_horizon_ms: int | None = None


def cleanable_range(plog: PartitionLog, high_watermark: int, now_ms: int) -> CleanableRange:
    """Step 1: which whole segments are dirty and may be cleaned now."""
    segments = plog.store.segments
    start = plog.log_start_offset
    first_dirty = plog.cleaner_checkpoint()
    if not start <= first_dirty <= plog.log_end_offset:
        first_dirty = start
    lag = plog.config.min_compaction_lag_ms
    first_uncleanable = segments[-1].base_offset
    for segment in segments[:-1]:
        if (
            segment.next_offset > high_watermark
            or (lag > 0 and now_ms - segment.last_append_time_ms < lag)
        ) and segment.next_offset > first_dirty:
            first_uncleanable = segment.base_offset
            break
    first_dirty = min(first_dirty, first_uncleanable)
    clean = dirty = 0
    oldest = -1
    for segment in segments:
        if segment.base_offset >= first_uncleanable:
            break
        if segment.next_offset <= first_dirty and segment.base_offset < first_dirty:
            clean += segment.size_bytes
        else:
            dirty += segment.size_bytes
    if dirty:
        first = plog.store.read(first_dirty, 1)
        oldest = first[0].append_time_ms if first else -1
    return CleanableRange(first_dirty, first_uncleanable, clean, dirty, oldest)


def should_clean(
    plog: PartitionLog, cleanable: CleanableRange, now_ms: int, horizon_ms: int | None
) -> bool:
    config = plog.config
    if not config.compact:
        return False
    if horizon_ms is not None and horizon_ms <= now_ms:
        return True  # tombstones to remove
    if not cleanable.dirty_bytes:
        return False
    if cleanable.dirty_ratio >= config.min_cleanable_dirty_ratio:
        return True
    return cleanable.oldest_dirty_ms >= 0 and (
        now_ms - cleanable.oldest_dirty_ms > config.max_compaction_lag_ms
    )


class LogCleaner:
    """Cleans one log at a time in bounded steps; `clean` runs a round to the end."""

    def __init__(self, config: CleanerConfig | None = None) -> None:
        self.config = config or CleanerConfig()
        self.stats = CleanerStats()
        # Earliest delete horizon set or seen per log directory (Kafka keeps it
        # in memory too: after a restart the next round finds them again).
        self.horizons: dict[Path, int] = {}
        self._map: OffsetMap | None = None
        self.last_run_seconds = 0.0  # this cleaner's own last round (stats may be shared)

    def offset_map(self) -> OffsetMap:
        if self._map is None:
            self._map = OffsetMap(self.config.dedupe_buffer_size, self.config.io_buffer_load_factor)
        else:
            self._map.clear()
        return self._map

    def clean(
        self,
        plog: PartitionLog,
        high_watermark: int,
        now_ms: int,
        producers: ProducerStateTable,
        hook: Hook | None = None,
    ) -> RoundResult:
        result = RoundResult()
        for _ in self.clean_steps(plog, high_watermark, now_ms, producers, result, hook):
            pass
        return result

    def clean_steps(
        self,
        plog: PartitionLog,
        high_watermark: int,
        now_ms: int,
        producers: ProducerStateTable,
        result: RoundResult,
        hook: Hook | None = None,
    ) -> Generator[int, None, None]:
        """One round as steps: each yields the bytes it read and wrote (what
        `log.cleaner.io.max.bytes.per.second` meters: their sum, as in Kafka)."""
        started = time.monotonic()
        cleanable = cleanable_range(plog, high_watermark, now_ms)
        segments = plog.store.segments
        offsets = self.offset_map()
        unread: set[int] = set()
        map_end = yield from self._build_map(plog, cleanable, offsets, unread)
        result.map_end = map_end
        self.stats.last_buffer_utilization = offsets.size / offsets.slots
        if plog.store.segments[: len(segments) - 1] != segments[:-1]:
            result.aborted = True  # truncated, reset or retained while mapping
            self.stats.aborted_rounds += 1
            return
        groups = _groups(segments, max(map_end, cleanable.first_dirty), plog)
        mapped = MappedRange(
            cleanable.first_dirty, map_end, offsets.sorted_offsets(), frozenset(unread)
        )
        for group, end in groups:
            swapped = yield from self._clean_group(
                plog, group, end, offsets, mapped, now_ms, producers, result, hook
            )
            if not swapped:
                result.aborted = True
                self.stats.aborted_rounds += 1
                return
            result.cleaned = True
        plog.write_cleaner_checkpoint(map_end)
        if result.earliest_horizon_ms is None:
            self.horizons.pop(plog.directory, None)
        else:
            self.horizons[plog.directory] = result.earliest_horizon_ms
        stats = self.stats
        stats.runs += 1
        stats.bytes_read += result.bytes_read
        stats.bytes_written += result.bytes_written
        stats.records_removed += result.records_removed
        stats.bytes_removed += max(0, result.bytes_read - result.bytes_written)
        stats.last_recopy_ratio = (
            result.bytes_written / result.bytes_read if result.bytes_read else 0
        )
        stats.last_run_seconds = self.last_run_seconds = time.monotonic() - started
        stats.max_clean_seconds = max(stats.max_clean_seconds, stats.last_run_seconds)
        stats.last_run_end_ms = now_ms

    # ------------------------------------------------------------ the map

    def _build_map(
        self, plog: PartitionLog, cleanable: CleanableRange, offsets: OffsetMap, unread: set[int]
    ) -> Generator[int, None, int]:
        """Step 2; returns where mapping stopped (the first offset not mapped), and
        adds to `unread` the batches it could not read."""
        offset = cleanable.first_dirty
        end = cleanable.first_uncleanable
        step = 0
        while offset < end:
            batches = plog.store.read(offset, STEP_BYTES)
            if not batches:
                break
            for batch in batches:
                if batch.base_offset >= end:
                    return end
                assert isinstance(batch, OpaqueBatch)
                if not batch.control:
                    try:
                        scan = scan_keys(batch.payload)
                    except (UnsupportedCompression, InvalidRecordBatch):
                        unread.add(batch.base_offset)  # kept whole: nothing of it mapped
                    else:
                        new_keys = offsets.new_keys(scan.keys)
                        if offsets.size + new_keys > offsets.max_entries:
                            if offsets.size == 0:
                                raise OverflowError(
                                    f"a batch of {new_keys} keys does not fit "
                                    f"log.cleaner.dedupe.buffer.size"
                                )
                            return batch.base_offset
                        if None in scan.keys:
                            pairs = [
                                (k, o)
                                for k, o in zip(scan.keys, scan.offsets, strict=True)
                                if k is not None
                            ]
                            offsets.put_all([k for k, _ in pairs], [o for _, o in pairs])
                        else:
                            offsets.put_all(scan.keys, scan.offsets)  # type: ignore[arg-type]
                offset = batch.next_offset
                step += len(batch.payload)
            yield step
            step = 0
        return min(max(offset, cleanable.first_dirty), end)

    # ---------------------------------------------------------- rewriting

    def _clean_group(
        self,
        plog: PartitionLog,
        group: list[SegmentInfo],
        end: int,
        offsets: OffsetMap,
        mapped: MappedRange,
        now_ms: int,
        producers: ProducerStateTable,
        result: RoundResult,
        hook: Hook | None,
    ) -> Generator[int, None, bool]:
        """Steps 3 and 4 for one group of segments; returns whether it was swapped."""
        base = group[0].base_offset
        writer = plog.store.cleaned_segment_writer(base, end)
        try:
            offset = max(base, plog.store.start_offset)  # nothing below the log start is kept
            while offset < end:
                batches = plog.store.read(offset, STEP_BYTES)
                if not batches or batches[0].base_offset >= end:
                    break
                kept_batches: list[OpaqueBatch] = []
                read = written = 0
                for batch in batches:
                    if batch.base_offset >= end:
                        break
                    assert isinstance(batch, OpaqueBatch)
                    read += len(batch.payload)
                    kept = _filter(
                        batch, offsets, mapped, now_ms, plog.config.delete_retention_ms,
                        producers, result,
                    )  # fmt: skip
                    if kept is not None:
                        kept_batches.append(kept)
                        written += len(kept.payload)
                    offset = batch.next_offset
                writer.append(kept_batches)
                if hook:
                    hook("writing")
                result.bytes_read += read
                result.bytes_written += written
                yield read + written
            cleaned = writer.finish()
        except BaseException:
            writer.abort()
            raise
        if hook:
            hook("cleaned")
        swapped = plog.store.replace_segments(group, cleaned, hook=hook)
        if not swapped:
            writer.abort()
        return swapped


def _filter(
    batch: OpaqueBatch,
    offsets: OffsetMap,
    mapped: MappedRange,
    now_ms: int,
    delete_retention_ms: int,
    producers: ProducerStateTable,
    result: RoundResult,
) -> OpaqueBatch | None:
    """The batch as the cleaned segment holds it (itself when nothing changes),
    or None when it goes."""
    if batch.control:
        return batch
    map_end = mapped.end
    try:
        header = parse_header(batch.payload)
    except InvalidRecordBatch:
        return batch
    if mapped.kept_in(batch.base_offset, batch.next_offset) == 0 and not _last_of_producer(
        header.producer_id, batch.base_offset, producers
    ):
        result.records_removed += header.records_count
        return None
    try:
        scan = scan_keys(batch.payload)
    except (UnsupportedCompression, InvalidRecordBatch):
        return batch
    # The common cases without an object per record: every record stays (and
    # none is a tombstone), or every record goes.
    header = scan.header
    horizon = header.base_timestamp if has_delete_horizon(header) else None
    last_offset = offsets.get
    kept_count = 0
    kept_tombstone = False
    for offset, key, tombstone in zip(scan.offsets, scan.keys, scan.tombstones, strict=True):
        if offset >= map_end or (
            key is not None
            and offset >= last_offset(key)
            and not (tombstone and horizon is not None and now_ms >= horizon)
        ):
            kept_count += 1
            kept_tombstone = kept_tombstone or tombstone
    count = len(scan.offsets)
    if kept_count == count and not kept_tombstone:
        return batch
    if kept_count == 0 and not _last_of_producer(header.producer_id, batch.base_offset, producers):
        result.records_removed += count
        return None
    return _rewrite(batch, offsets, map_end, now_ms, delete_retention_ms, result)


def _rewrite(
    batch: OpaqueBatch,
    offsets: OffsetMap,
    map_end: int,
    now_ms: int,
    delete_retention_ms: int,
    result: RoundResult,
) -> OpaqueBatch:
    """A batch keeping some of its records (or tombstones, which get a horizon)."""
    header, records = records_of(batch.payload)
    horizon = header.base_timestamp if has_delete_horizon(header) else None
    kept: list[Record] = []
    for record in records:
        if record.offset >= map_end:
            kept.append(record)
        elif record.key is None:
            continue  # Kafka drops keyless records from compacted logs
        elif record.offset < offsets.get(record.key):
            continue  # superseded
        elif record.tombstone and horizon is not None and now_ms >= horizon:
            continue  # a delete past delete.retention.ms
        else:
            kept.append(record)
    result.records_removed += len(records) - len(kept)
    tombstones = any(r.tombstone for r in kept)
    new_horizon = now_ms + delete_retention_ms if horizon is None and tombstones else None
    if tombstones:
        _note_horizon(result, horizon if horizon is not None else now_ms + delete_retention_ms)
    if len(kept) == len(records) and new_horizon is None:
        return batch
    payload = rewrite_batch(header, kept, new_horizon)
    return OpaqueBatch(
        batch.base_offset,
        batch.epoch,
        (payload,),
        batch.append_time_ms,
        control=batch.control,
        offset_count=batch.offset_count,
    )


def _note_horizon(result: RoundResult, horizon: int) -> None:
    if result.earliest_horizon_ms is None or horizon < result.earliest_horizon_ms:
        result.earliest_horizon_ms = horizon


def _last_of_producer(producer_id: int, base_offset: int, producers: ProducerStateTable) -> bool:
    return producer_id != NO_PRODUCER_ID and producers.last_batch_offset(producer_id) == base_offset


def _groups(
    segments: list[SegmentInfo], clean_end: int, plog: PartitionLog
) -> list[tuple[list[SegmentInfo], int]]:
    """Consecutive segments below `clean_end` (never the active one) in groups of
    at most `segment.bytes`, each with the base offset of the segment after it."""
    limit = plog.config.segment_bytes
    groups: list[tuple[list[SegmentInfo], int]] = []
    current: list[SegmentInfo] = []
    size = 0
    for segment, following in pairwise(segments):
        if segment.base_offset >= clean_end:
            break
        if current and size + segment.size_bytes > limit:
            groups.append((current, segment.base_offset))
            current, size = [], 0
        current.append(segment)
        size += segment.size_bytes
        end = following.base_offset
    if current:
        groups.append((current, end))
    return groups
