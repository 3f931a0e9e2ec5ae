"""The durable metadata log: a directory of segments behind the `LogStore` seam.

Directory layout:

    00000000000000000000.log        batches (see batch_format.py)
    00000000000000000000.index      sparse offset index (see offset_index.py)
    00000000000000052113.log        next segment, named by its base offset
    ...
    log-start-offset.checkpoint     the snapshot the log starts after (checkpoint.py)
    leader-epoch-checkpoint         epoch -> start offset (epoch_cache.py)

Durability follows the seam's contract. `append` writes each call's batches
with one `writev` per segment touched and does not sync; `flush` makes all
appended so far durable with one fdatasync of the active segment (plus the
directory after a roll, its entry in its parent after an open, and the epoch
cache after an epoch change). `truncate`, `advance_start` and `reset_to_snapshot`
are durable when they return. Opening validates every batch (recovery.py): a
torn tail is cut, anything else damaged raises before any byte is changed.

Threads: one thread owns the log, but a flush's fsync may run on another while
the owner appends: `begin_flush` fixes what a flush covers (and its bytes),
`PendingFlush.complete` syncs without holding any lock `append` needs. The
driver syncs small flushes on its own thread, large ones in a worker. Flushes
are serialised; deleting or cutting segments waits for the one in flight. A
directory lock keeps a second process out.
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from quorum.common.clocks import wall_clock_ms
from quorum.common.fsutil import fsync_dir
from quorum.log.batch_format import BatchHeader, encode_batch_parts
from quorum.log.checkpoint import LogStartCheckpoint, write_checkpoint
from quorum.log.dir_lock import lock_directory
from quorum.log.epoch_cache import UNDEFINED, EpochEntry, LeaderEpochCache
from quorum.log.log_opening import open_segments, reconcile_epoch_cache
from quorum.log.pending_flush import PendingFlush
from quorum.log.recovery import CHECKPOINT_FILE, EPOCH_CACHE_FILE, RecoveryPlan, plan_recovery
from quorum.log.retention import LogRetention, RetiredSegment
from quorum.log.segment import Segment, SegmentInfo, index_file_name, log_file_name
from quorum.log.segment_swap import (
    CleanedSegment,
    CleanedSegmentWriter,
    commit_swap,
    complete_interrupted_swaps,
    finish_swap,
)
from quorum.raft.records import Batch, OffsetAndEpoch, SnapshotId

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 4096
MAX_SEGMENT_BYTES = 2**31 - 1


class FileLogStore:
    def __init__(
        self,
        directory: str | Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        retention: LogRetention | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        offset_gaps: bool = False,
        sync_on_open: bool = True,
    ) -> None:
        """`offset_gaps`: a compacted data-plane log, whose batches may skip offsets
        (never go back) and whose segments may be replaced by rewritten ones.

        `sync_on_open`: make what the log holds durable before it is used (the
        Raft log: a node votes and acknowledges on what it finds, so its tail
        and epoch cache are synced once at open). False for the data plane,
        whose durability comes from replication: a killed process's writes are in
        the page cache anyway, a machine crash loses an unflushed tail either way,
        and a replica that lost one truncates by leader epoch and fetches it again.
        The epoch cache is rebuilt from the batches at every open; it stays dirty
        in memory and is written (synced) before anything that could make the
        batches disagree with it: a truncation, a compacted segment swap, or a
        flush. Only a torn tail's cut, deleted leftovers and a new first segment
        are still made durable: rare, and cheap next to the ~3 syncs per log the
        rest cost (1,000 replicas of a restarted broker: seconds)."""
        if not 0 < segment_bytes <= MAX_SEGMENT_BYTES:
            raise ValueError(f"segment_bytes must be in (0, {MAX_SEGMENT_BYTES}]")
        if index_interval_bytes <= 0:
            raise ValueError("index_interval_bytes must be positive")
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        self.retention = retention if retention is not None else LogRetention()
        self._clock = clock
        self.offset_gaps = offset_gaps
        self.sync_on_open = sync_on_open
        self._segments: list[Segment] = []
        self._unsynced: list[Segment] = []  # segments with appends not yet fsync'd
        self._unsynced_bytes = 0  # appended since the last flush began
        self._directory_unsynced = False
        self._parent_unsynced = True  # its entry in the parent: 1st flush/roll (KAFKA-3968)
        self._state = threading.RLock()  # bookkeeping; never held during an fsync
        self._flush_idle = threading.Condition(self._state)
        self._flush_in_flight = False
        self._snapshot: SnapshotId | None = None
        self._start_offset = 0
        self._durable_end = 0
        self._checkpoint_path = self.directory / CHECKPOINT_FILE
        self._epochs = LeaderEpochCache(self.directory / EPOCH_CACHE_FILE)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = lock_directory(self.directory)
        try:
            if offset_gaps:
                for name in complete_interrupted_swaps(self.directory):
                    log.warning("%s: completed an interrupted segment swap (%s)", directory, name)
            self._open(plan_recovery(self.directory, index_interval_bytes, offset_gaps=offset_gaps))
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------ LogStore

    @property
    def start_offset(self) -> int:
        return self._start_offset

    @property
    def end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def durable_end_offset(self) -> int:
        """Everything below this survives a crash."""
        return self._durable_end

    @property
    def snapshot_id(self) -> SnapshotId | None:
        """The snapshot the log starts after."""
        return self._snapshot

    def append(self, batches: Sequence[Batch]) -> None:
        """Write batches (volatile until `flush`); all are checked before any is written."""
        if not batches:
            return
        with self._state:
            self._append(batches)

    def flush(self, end_offset: int) -> None:
        """One fdatasync makes every batch appended so far durable."""
        pending = self.begin_flush(end_offset)
        if pending is not None:
            pending.complete()

    def truncate(self, end_offset: int) -> None:
        """Drop every batch that does not end at or below `end_offset`, durably.

        As in the in-memory store, a batch that `end_offset` falls inside is
        dropped whole.
        """
        with self._state:
            self._wait_for_flush()
            self._truncate(end_offset)

    def _truncate(self, end_offset: int) -> None:
        if end_offset >= self.end_offset:
            return
        floor = self._snapshot.end_offset if self._snapshot else 0
        located = self._locate(end_offset) if end_offset >= floor else None
        if located is None or located[2].base_offset < floor:
            raise ValueError(
                f"truncate to {end_offset} would cut into snapshot {self._snapshot} "
                f"(the log starts at {self._start_offset})"
            )
        index, position, header = located
        new_end = header.base_offset
        while len(self._segments) - 1 > index:
            # Newest first, so a crash part-way leaves a shorter but gap-free log.
            self._drop_segment(self._segments.pop())
            fsync_dir(self.directory)
        segment = self._segments[index]
        segment.truncate(position, new_end)
        self._forget_unsynced(segment)
        self._epochs.truncate_from_end(new_end)
        self._epochs.persist_if_dirty()
        self._durable_end = min(self._durable_end, new_end)

    def advance_start(self, snapshot_id: SnapshotId) -> None:
        """A snapshot covers everything below its end offset; the log starts there now."""
        with self._state:
            self._wait_for_flush()
            self._advance_start(snapshot_id)

    def _advance_start(self, snapshot_id: SnapshotId) -> None:
        if self._snapshot and snapshot_id.end_offset <= self._snapshot.end_offset:
            return
        if snapshot_id.end_offset > self.end_offset:
            self._reset_to_snapshot(snapshot_id)
            return
        write_checkpoint(self._checkpoint_path, LogStartCheckpoint(snapshot_id))
        self._snapshot = snapshot_id
        self._start_offset = self._compute_start_offset()
        self._epochs.truncate_from_start(self._start_offset, self.end_offset)
        self._epochs.persist_if_dirty()
        self._enforce_retention(None)

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Replace the whole log with an empty one that starts after the snapshot."""
        with self._state:
            self._wait_for_flush()
            self._reset_to_snapshot(snapshot_id)

    def _reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        write_checkpoint(self._checkpoint_path, LogStartCheckpoint(snapshot_id, reset_pending=True))
        for segment in reversed(self._segments):
            segment.delete()
        self._segments.clear()
        self._unsynced.clear()
        self._finish_reset(snapshot_id)

    def recover(self) -> tuple[SnapshotId | None, list[Batch]]:
        """The snapshot the log starts after and every batch above it (read from disk)."""
        batches: list[Batch] = []
        located = self._locate(self._start_offset)
        if located is not None:
            index, position, _ = located
            for segment in self._segments[index:]:
                batches.extend(segment.read_batches(position))
                position = 0
        return self._snapshot, batches

    # ----------------------------------------------------------- additions

    def begin_flush(self, end_offset: int) -> PendingFlush | None:
        """Fix the scope of a flush now (everything appended so far); the
        returned flush's `complete()` does the fsync, on any thread. None when
        `end_offset` is already durable. Waits for a flush still in flight."""
        with self._state:
            self._wait_for_flush()
            if end_offset <= self._durable_end:
                return None
            segments, self._unsynced = self._unsynced, []
            sync_directory, self._directory_unsynced = self._directory_unsynced, False
            sync_parent, self._parent_unsynced = self._parent_unsynced, False
            size, self._unsynced_bytes = self._unsynced_bytes, 0
            self._flush_in_flight = True
            return PendingFlush(
                self.end_offset, segments, sync_directory, size, self._complete_flush, sync_parent
            )

    def read(self, offset: int, max_bytes: int) -> list[Batch]:
        """Whole batches from the one holding `offset`: at least one, then as
        many as fit in `max_bytes` of on-disk size, from a single segment (as
        Kafka does). Empty when `offset` is outside [start_offset, end_offset)."""
        if offset < self._start_offset:
            return []
        located = self._locate(offset)
        if located is None:
            return []
        index, position, _ = located
        return self._segments[index].read_batches(position, max_bytes)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in the log and where it ends (KIP-595's
        diverging-epoch lookup); falls back to the snapshot like the core's log."""
        found = self._epochs.end_offset_for_epoch(epoch, self.end_offset)
        if found != UNDEFINED:
            return found
        if self._snapshot and self._snapshot.epoch <= epoch:
            return OffsetAndEpoch(self._snapshot.end_offset, self._snapshot.epoch)
        return OffsetAndEpoch(0, 0) if self._start_offset == 0 else UNDEFINED

    @property
    def epoch_entries(self) -> tuple[EpochEntry, ...]:
        return self._epochs.entries

    @property
    def segment_paths(self) -> list[Path]:
        return [segment.path for segment in self._segments]

    @property
    def segments(self) -> list[SegmentInfo]:
        """Every segment, oldest first: what a retention policy of the caller's
        (Kafka's `retention.ms`/`retention.bytes`) decides from."""
        return [
            SegmentInfo(s.base_offset, s.next_offset, s.size, s.last_append_time_ms)
            for s in self._segments
        ]

    def enforce_retention(self, now_ms: int | None = None) -> list[Path]:
        """Delete the oldest segments wholly below the log start that are past
        the retention limits; returns the deleted segment files."""
        with self._state:
            self._wait_for_flush()
            return self._enforce_retention(now_ms)

    def _enforce_retention(self, now_ms: int | None) -> list[Path]:
        retired: list[Segment] = []
        for segment, following in zip(self._segments, self._segments[1:], strict=False):
            if following.base_offset > self._start_offset:
                break
            retired.append(segment)
        if not retired:
            return []
        now = self._clock() if now_ms is None else now_ms
        total = sum(segment.size for segment in self._segments)
        count = self.retention.deletable(
            [RetiredSegment(s.size, s.last_append_time_ms) for s in retired], total, now
        )
        deleted: list[Path] = []
        for segment in retired[:count]:
            # Oldest first, so a crash part-way leaves a gap-free log.
            self._segments.remove(segment)
            self._drop_segment(segment)
            deleted.append(segment.path)
        if deleted:
            fsync_dir(self.directory)
        return deleted

    def roll(self) -> bool:
        """Start a new active segment now (Kafka's `segment.ms`), unless the
        active one is empty. Whether it rolled."""
        with self._state:
            self._wait_for_flush()
            active = self._segments[-1]
            if active.size == 0:
                return False
            self._roll(active.next_offset)
            fsync_dir(self.directory)
            self._directory_unsynced = False
            if self._parent_unsynced:
                fsync_dir(self.directory.parent)
                self._parent_unsynced = False
            return True

    def segment_file(self, base_offset: int) -> Path:
        return self.directory / log_file_name(base_offset)

    def cleaned_segment_writer(self, base_offset: int, end_offset: int) -> CleanedSegmentWriter:
        """Where a rewrite of the segments in [base_offset, end_offset) is written."""
        return CleanedSegmentWriter(self.directory, base_offset, end_offset,
                                    self.index_interval_bytes)  # fmt: skip

    def replace_segments(
        self,
        expected: Sequence[SegmentInfo],
        cleaned: CleanedSegment,
        *,
        hook: Callable[[str], None] | None = None,
    ) -> bool:
        """Swap in the rewritten segment `cleaned` (written and fsync'd through
        `cleaned_segment_writer`) for the segments `expected` (contiguous, from its
        base up to its end offset, the active segment not among them); see segment_swap.py.
        False, changing nothing, when the log no longer holds exactly those
        segments (retention or a truncation got there first). `hook` is called
        at each step of the swap with its name (the crash tests stop there)."""
        if not self.offset_gaps:
            raise ValueError("only a log opened with offset_gaps may replace segments")
        with self._state:
            self._wait_for_flush()
            bases = [s.base_offset for s in self._segments]
            base, end_offset = cleaned.base_offset, cleaned.end_offset
            if expected[0].base_offset != base:
                return False
            if base not in bases:
                return False
            first = bases.index(base)
            current = self._segments[first : first + len(expected)]
            following = self._segments[first + len(expected) :]
            if (
                [SegmentInfo(s.base_offset, s.next_offset, s.size, s.last_append_time_ms)
                 for s in current] != list(expected)
                or not following
                or following[0].base_offset != end_offset
            ):  # fmt: skip
                return False
            # The rewritten segment may hold no batch of an epoch any more: only
            # the stored cache will say where that epoch began after a restart.
            self._epochs.persist_if_dirty()
            commit_swap(self.directory, base, end_offset)
            if hook:
                hook("committed")
            for segment in current:
                self._forget_unsynced(segment)
                segment.close()
            finish_swap(self.directory, base, end_offset, hook)
            segment = Segment(
                self.directory,
                base,
                self.index_interval_bytes,
                next_offset=cleaned.next_offset,
                size=cleaned.size,
                index_entries=cleaned.index_entries,
                last_append_time_ms=cleaned.last_append_time_ms,  # what a reopen finds
            )
            segment.rewrite_index()
            self._segments[first : first + len(expected)] = [segment]
            if hook:
                hook("swapped")
            return True

    def close(self) -> None:
        with self._state:
            self._wait_for_flush()
            if self._lock_fd is None:
                return
            for segment in self._segments:
                segment.write_index()
            self._release()

    def __enter__(self) -> FileLogStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------ internals

    def _open(self, plan: RecoveryPlan) -> None:
        for path in plan.leftover_files:
            path.unlink(missing_ok=True)
        snapshot = plan.checkpoint.snapshot_id
        if plan.checkpoint.reset_pending:
            assert snapshot is not None
            for base in reversed(plan.segment_bases):
                (self.directory / log_file_name(base)).unlink()
                (self.directory / index_file_name(base)).unlink(missing_ok=True)
            self._finish_reset(snapshot)
            return
        self._snapshot = snapshot
        self._segments = open_segments(
            self.directory, plan, self.index_interval_bytes, sync_on_open=self.sync_on_open
        )
        self._start_offset = self._compute_start_offset()
        self._epochs = reconcile_epoch_cache(
            self._epochs.path,
            plan.epoch_starts,
            self._start_offset,
            self.end_offset,
            offset_gaps=self.offset_gaps,
            sync_on_open=self.sync_on_open,
        )
        self._durable_end = self.end_offset
        self._enforce_retention(None)

    def _finish_reset(self, snapshot_id: SnapshotId) -> None:
        self._segments = [self._new_segment(snapshot_id.end_offset)]
        fsync_dir(self.directory)
        self._snapshot = snapshot_id
        self._start_offset = snapshot_id.end_offset
        self._epochs = LeaderEpochCache(self._epochs.path)
        self._epochs.persist()
        write_checkpoint(self._checkpoint_path, LogStartCheckpoint(snapshot_id))
        self._durable_end = snapshot_id.end_offset

    def _new_segment(self, base_offset: int) -> Segment:
        return Segment(self.directory, base_offset, self.index_interval_bytes, create=True)

    def _append(self, batches: Sequence[Batch]) -> None:
        encoded = self._validate_and_encode(batches)
        active = self._segments[-1]
        size = active.size
        group: list[Batch] = []
        group_data: list[tuple[bytes, bytes, bytes]] = []
        for batch, parts in zip(batches, encoded, strict=True):
            batch_size = len(parts[0]) + len(parts[1]) + len(parts[2])
            if size > 0 and size + batch_size > self.segment_bytes:
                if group:
                    self._write(active, group, group_data)
                active = self._roll(batch.base_offset)
                size, group, group_data = 0, [], []
            group.append(batch)
            group_data.append(parts)
            size += batch_size
            self._unsynced_bytes += batch_size
        self._write(active, group, group_data)
        for batch in batches:
            self._epochs.assign(batch.epoch, batch.base_offset)

    def _complete_flush(self, flush: PendingFlush) -> None:
        try:
            for segment in flush.segments:
                segment.sync()
            if flush.sync_directory:
                fsync_dir(self.directory)
            if flush.sync_parent:
                fsync_dir(self.directory.parent)
        except BaseException:
            with self._state:  # nothing was made durable: keep owing it
                pending = [s for s in self._unsynced if s not in flush.segments]
                self._unsynced = flush.segments + pending
                self._directory_unsynced |= flush.sync_directory
                self._parent_unsynced |= flush.sync_parent
                self._unsynced_bytes += flush.size
                self._flush_finished()
            raise
        with self._state:
            self._epochs.persist_if_dirty()  # only after an epoch change: rare
            self._durable_end = max(self._durable_end, flush.end_offset)
            self._flush_finished()

    def _wait_for_flush(self) -> None:
        while self._flush_in_flight:
            self._flush_idle.wait()

    def _flush_finished(self) -> None:
        self._flush_in_flight = False
        self._flush_idle.notify_all()

    def _validate_and_encode(self, batches: Sequence[Batch]) -> list[tuple[bytes, bytes, bytes]]:
        expected = self.end_offset
        last_epoch = self._last_epoch()
        encoded: list[tuple[bytes, bytes, bytes]] = []
        for batch in batches:
            if batch.base_offset != expected and not (
                self.offset_gaps and batch.base_offset > expected
            ):
                raise ValueError(f"append at {batch.base_offset}, log end is {expected}")
            if not batch.records:
                raise ValueError(f"batch at {batch.base_offset} has no records")
            if batch.epoch < last_epoch:
                raise ValueError(f"batch epoch {batch.epoch} is below the last epoch {last_epoch}")
            encoded.append(encode_batch_parts(batch))
            expected = batch.next_offset
            last_epoch = batch.epoch
        return encoded

    def _last_epoch(self) -> int:
        latest = self._epochs.latest_epoch
        if latest is not None:
            return latest
        return self._snapshot.epoch if self._snapshot else -1

    def _write(
        self, segment: Segment, batches: list[Batch], encoded: list[tuple[bytes, bytes, bytes]]
    ) -> None:
        segment.append(batches, encoded)
        if not self._unsynced or self._unsynced[-1] is not segment:
            self._unsynced.append(segment)

    def _roll(self, base_offset: int) -> Segment:
        # Synced before its successor exists: no later segment behind a torn one.
        previous = self._segments[-1]
        previous.sync()
        previous.write_index()
        self._forget_unsynced(previous)
        segment = self._new_segment(base_offset)
        self._segments.append(segment)
        self._directory_unsynced = True
        return segment

    def _forget_unsynced(self, segment: Segment) -> None:
        self._unsynced = [s for s in self._unsynced if s is not segment]

    def _drop_segment(self, segment: Segment) -> None:
        self._forget_unsynced(segment)
        segment.delete()

    def _locate(self, offset: int) -> tuple[int, int, BatchHeader] | None:
        """(segment index, position, header) of the batch holding `offset`."""
        index = bisect_right([s.base_offset for s in self._segments], offset) - 1
        if index < 0:
            if not self.offset_gaps or not self._segments:
                return None
            index = 0  # the log start may fall in a gap before the first batch
        found = self._segments[index].locate(offset)
        while found is None and self.offset_gaps and index + 1 < len(self._segments):
            # A compacted segment may end before the next one starts: the
            # offset is in a gap, and the next batch holds what follows it.
            index += 1
            found = self._segments[index].locate(offset)
        if found is None:
            return None
        return index, found[0], found[1]

    def _compute_start_offset(self) -> int:
        if self._snapshot is None:
            return self._segments[0].base_offset
        located = self._locate(self._snapshot.end_offset)
        if located is None:
            return self._snapshot.end_offset
        return located[2].base_offset  # a batch may straddle the snapshot end

    def _release(self) -> None:
        for segment in self._segments:
            segment.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None
