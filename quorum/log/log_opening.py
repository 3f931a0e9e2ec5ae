"""Opening a log directory: carrying out a recovery plan's repairs, and choosing
the leader-epoch cache the log starts with.

`recovery.py` decides, reading only; this module is the step after it, the
only one on the open path that changes the disk (a torn tail cut, stale
indexes rewritten, the tail synced, a first segment created, an epoch cache
rewritten when it disagrees with the batches). Kept apart from `file_log.py`,
whose job is the running log (append, flush, truncate, read), so each can be
read alone. A pending reset to a snapshot is the log's own operation and stays
there.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from pathlib import Path

from quorum.common.fsutil import fsync_dir
from quorum.log.epoch_cache import LeaderEpochCache
from quorum.log.recovery import RecoveryPlan
from quorum.log.segment import Segment

log = logging.getLogger("quorum.log.file_log")


def open_segments(
    directory: Path, plan: RecoveryPlan, index_interval_bytes: int, *, sync_on_open: bool
) -> list[Segment]:
    """The segments of `plan` (no reset pending), repaired: a torn tail cut,
    stale indexes rewritten, the tail synced (`sync_on_open`); an empty log gets
    its first segment where the snapshot ends."""
    segments: list[Segment] = []
    for scan in plan.scans:
        segments.append(
            Segment(
                directory,
                scan.base_offset,
                index_interval_bytes,
                next_offset=scan.next_offset,
                size=scan.file_size,
                index_entries=scan.index_entries,
                last_append_time_ms=scan.last_append_time_ms,
            )
        )
    torn = plan.torn_tail
    if torn is not None:
        log.warning(
            "%s: cut a torn tail of %d bytes at byte %d (offset %d): %s",
            torn.path,
            torn.file_size - torn.valid_bytes,
            torn.valid_bytes,
            torn.next_offset,
            torn.torn_reason or "an incomplete batch",
        )
        segments[-1].truncate(torn.valid_bytes, torn.next_offset)
    for segment in segments:
        if segment.base_offset in plan.stale_indexes:
            segment.rewrite_index()
    if segments:
        if sync_on_open:
            # What a crashed process left in the page cache is on disk only
            # once synced; the tail is the only segment that can hold any.
            segments[-1].sync()
    else:
        snapshot = plan.checkpoint.snapshot_id
        start = snapshot.end_offset if snapshot else 0
        segments.append(Segment(directory, start, index_interval_bytes, create=True))
    if plan.leftover_files or not plan.scans:
        fsync_dir(directory)
    return segments


def reconcile_epoch_cache(
    path: Path,
    epoch_starts: list[tuple[int, int]],
    start_offset: int,
    end_offset: int,
    *,
    offset_gaps: bool,
    sync_on_open: bool,
) -> LeaderEpochCache:
    """The stored cache if it says what the log says, else one rebuilt from the log."""
    derived = LeaderEpochCache(path)
    for epoch, epoch_start in epoch_starts:
        derived.assign(epoch, epoch_start)
    derived.truncate_from_start(start_offset, end_offset)
    stored = LeaderEpochCache.load(path)
    if stored is not None and stored.entries == derived.entries:
        return stored
    if stored is None and not derived.entries and not path.exists():
        # A new, empty log: no file already means an empty cache, and writing
        # one cost two fsyncs, most of creating a log (a broker given 1,000
        # partitions at once spent seconds of its event loop on them).
        return derived
    if stored is not None and offset_gaps and _agrees(stored, epoch_starts):
        # Compaction may have removed an epoch's first batches (or all of
        # them): the stored cache still knows where each epoch began.
        stored.truncate_from_end(end_offset)
        stored.truncate_from_start(start_offset, end_offset)
        if sync_on_open:
            stored.persist_if_dirty()
        return stored
    if sync_on_open:
        derived.persist()
    return derived  # dirty: written at the next truncation, swap or flush


def _agrees(cache: LeaderEpochCache, epoch_starts: list[tuple[int, int]]) -> bool:
    """Whether every epoch change the log shows is where the cache puts that epoch."""
    entries = cache.entries
    starts = [e.start_offset for e in entries]
    for epoch, offset in epoch_starts:
        i = bisect_right(starts, offset) - 1
        if i < 0 or entries[i].epoch != epoch:
            return False
    return True
