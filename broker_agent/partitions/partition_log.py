"""One partition replica's log on disk, in Kafka's `topic-partition` directory.

It is `quorum.log`'s segmented log (CRC'd batches, sparse index, leader-epoch
cache, torn-tail recovery) holding each Kafka record batch as one opaque batch
(magic 2) whose payload is the batch exactly as stored by the leader, so a
Fetch answer is the stored bytes. The log start offset (Kafka's
`logStartOffset`, moved by retention) is kept in the log's start checkpoint.

As in Kafka, durability comes from replication: appends are not synced unless
`log.flush.interval.messages` or `log.flush.interval.ms` ask for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from broker_agent.partitions.log_deleter import LogDeleter
from broker_agent.partitions.record_batch import (
    RecordBatchHeader,
    parse_header,
    split_batches,
    stamp,
)
from broker_agent.replication.epochs import EpochEndOffset, EpochEntry, end_offset_for_epoch
from quorum.common.fsutil import write_atomically
from quorum.log.batch_format import OpaqueBatch
from quorum.log.file_log import FileLogStore
from quorum.raft.records import SnapshotId

KAFKA_DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
HW_CHECKPOINT = "high-watermark.checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"  # the first dirty offset (log_cleaner.py)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """A topic's log settings: the broker's defaults overridden by topic configs."""

    segment_bytes: int = KAFKA_DEFAULT_SEGMENT_BYTES
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1024 * 1024 + 12
    min_insync_replicas: int = 1
    flush_interval_messages: int = 2**63 - 1
    flush_interval_ms: int = 2**63 - 1
    # Compaction (Kafka's topic configs and defaults; see log_cleaner.py).
    cleanup_policy: str = "delete"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    segment_ms: int = 7 * 24 * 60 * 60 * 1000

    @property
    def compact(self) -> bool:
        return "compact" in _policies(self.cleanup_policy)

    @property
    def delete(self) -> bool:
        """Retention by time and size applies (`delete`, or `compact,delete`)."""
        return "delete" in _policies(self.cleanup_policy)


def _policies(value: str) -> set[str]:
    return {p.strip().lower() for p in value.split(",")}


def directory_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class PartitionLog:
    def __init__(self, directory: Path, config: LogConfig, now_ms: int) -> None:
        self.directory = directory
        self.config = config
        # Offset gaps: compaction removes records, and followers copy the gaps.
        # No syncs on open: durability comes from replication (see FileLogStore).
        self.store = FileLogStore(
            directory,
            segment_bytes=min(config.segment_bytes, 2**31 - 1),
            offset_gaps=True,
            sync_on_open=False,
        )
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._checkpointed_hw = -1
        self._active_first_timestamp = (-1, -1)  # (active segment base, its first batch's time)
        # Truncations and resets so far: what was read of the log before one may be gone.
        self.truncations = 0

    # ----------------------------------------------------------------- reads

    @property
    def log_end_offset(self) -> int:
        return self.store.end_offset

    @property
    def log_start_offset(self) -> int:
        snapshot = self.store.snapshot_id
        return max(self.store.start_offset, snapshot.end_offset if snapshot else 0)

    @property
    def epoch_entries(self) -> list[EpochEntry]:
        return [EpochEntry(e.epoch, e.start_offset) for e in self.store.epoch_entries]

    @property
    def latest_epoch(self) -> int:
        entries = self.store.epoch_entries
        return entries[-1].epoch if entries else -1

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        return end_offset_for_epoch(self.epoch_entries, epoch, self.log_end_offset)

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.store.segments)

    def read(self, offset: int, max_bytes: int, max_offset: int) -> bytes:
        """Stored batches from the one holding `offset`, ending at or below
        `max_offset` (the HW for consumers, the LEO for followers): at least one
        batch if any qualifies, then as many as fit in `max_bytes`."""
        out: list[bytes] = []
        size = 0
        while offset < max_offset:
            batches = self.store.read(offset, max(max_bytes - size, 1))
            if not batches:
                break
            for batch in batches:
                if batch.next_offset > max_offset:
                    return b"".join(out)
                assert isinstance(batch, OpaqueBatch)
                if out and size + len(batch.payload) > max_bytes:
                    return b"".join(out)
                out.append(batch.payload)
                size += len(batch.payload)
                offset = batch.next_offset
            if size >= max_bytes:
                break
        return b"".join(out)

    def batch_headers(self, from_offset: int = 0) -> Iterator[RecordBatchHeader]:
        """Every stored batch's Kafka header from `from_offset` (producer state rebuild)."""
        for payload in self.stored_batches(from_offset):
            yield parse_header(payload)

    def stored_batches(self, from_offset: int = 0) -> Iterator[bytes]:
        """Every stored Kafka batch from the one holding `from_offset`, as stored."""
        offset = max(from_offset, self.log_start_offset)
        while offset < self.log_end_offset:
            batches = self.store.read(offset, 1 << 20)
            if not batches:
                return
            for batch in batches:
                assert isinstance(batch, OpaqueBatch)
                yield batch.payload
                offset = batch.next_offset

    # ---------------------------------------------------------------- writes

    def append_as_leader(
        self, batches: list[tuple[RecordBatchHeader, bytes]], leader_epoch: int, now_ms: int
    ) -> int:
        """Stamp offsets and the leader epoch and append; the first offset given."""
        self.maybe_roll(max(h.max_timestamp for h, _ in batches))
        base = offset = self.log_end_offset
        stored: list[OpaqueBatch] = []
        for header, data in batches:
            stored.append(
                self._opaque(offset, leader_epoch, stamp(data, offset, leader_epoch), header)
            )
            offset += header.offset_count
        self.store.append(stored)
        self._after_append(sum(h.records_count for h, _ in batches), now_ms)
        return base

    def append_as_follower(self, data: bytes, now_ms: int) -> int:
        """Append a leader's Fetch answer as it came (offsets and epochs already set);
        the number of batches appended. Raises InvalidRecordBatch or ValueError
        (batches not following on from the log end) before appending anything."""
        batches = split_batches(data, allow_empty=True)
        self.maybe_roll(max(h.max_timestamp for h, _ in batches))
        stored = [
            self._opaque(h.base_offset, h.partition_leader_epoch, raw, h) for h, raw in batches
        ]
        self.store.append(stored)
        self._after_append(sum(h.records_count for h, _ in batches), now_ms)
        return len(stored)

    @staticmethod
    def _opaque(offset: int, epoch: int, data: bytes, header: RecordBatchHeader) -> OpaqueBatch:
        # The wrapper's time comes from the batch, so replicas' files match byte for byte.
        return OpaqueBatch(
            offset, epoch, (data,), header.max_timestamp, offset_count=header.offset_count
        )

    def _after_append(self, messages: int, now_ms: int) -> None:
        self._unflushed_messages += messages
        if self._unflushed_messages >= self.config.flush_interval_messages:
            self.flush(now_ms)

    def maybe_flush(self, now_ms: int) -> None:
        """`log.flush.interval.ms` (off by default: Kafka leaves it to the OS)."""
        if (
            self._unflushed_messages
            and now_ms - self._last_flush_ms >= self.config.flush_interval_ms
        ):
            self.flush(now_ms)

    def flush(self, now_ms: int) -> None:
        self.store.flush(self.store.end_offset)
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms

    def maybe_roll(self, incoming_max_timestamp: int) -> bool:
        """Kafka's `segment.ms`, checked on append as Kafka does: a batch whose
        timestamp is `segment.ms` past the active segment's first batch starts a
        new segment, so the cleaner (or retention) can reach the old one's records."""
        active = self.store.segments[-1]
        if active.size_bytes == 0:
            return False
        if self._active_first_timestamp[0] != active.base_offset:
            first = self.store.read(active.base_offset, 1)
            timestamp = first[0].append_time_ms if first else incoming_max_timestamp
            self._active_first_timestamp = (active.base_offset, timestamp)
        if incoming_max_timestamp - self._active_first_timestamp[1] < self.config.segment_ms:
            return False
        return self.store.roll()

    def truncate_to(self, offset: int) -> None:
        """Cut the log to end at `offset` (a batch it falls inside goes whole);
        below the log start, start over empty at `offset`."""
        if offset >= self.log_end_offset:
            return
        if self.cleaner_checkpoint() > offset:
            self.write_cleaner_checkpoint(offset)  # what follows is new, hence dirty
        if offset <= self.log_start_offset:
            self.reset_to(offset)
            return
        self.truncations += 1
        self.store.truncate(offset)

    def reset_to(self, offset: int) -> None:
        """An empty log starting at `offset` (a follower behind the leader's log start)."""
        self.truncations += 1
        self.store.reset_to_snapshot(SnapshotId(offset, max(self.latest_epoch, 0)))

    def advance_log_start(self, offset: int) -> None:
        """Retention (or the leader's log start, on a follower) moved the log start."""
        if offset <= self.log_start_offset:
            return
        if offset >= self.log_end_offset:
            self.reset_to(offset)
            return
        epoch = self.end_offset_for_epoch_at(offset - 1)
        self.store.advance_start(SnapshotId(offset, epoch))

    def end_offset_for_epoch_at(self, offset: int) -> int:
        """The leader epoch of the batch holding `offset`."""
        epoch = 0
        for entry in self.epoch_entries:
            if entry.start_offset > offset:
                break
            epoch = entry.epoch
        return epoch

    def apply_retention(self, now_ms: int, high_watermark: int) -> int:
        """Kafka's `retention.ms` and `retention.bytes`: drop whole segments wholly
        below the HW (never the active one), oldest first; the new log start. As in
        Kafka, a segment goes for its size only if the log still holds at least
        `retention.bytes` without it, and for its age once its newest record is
        older than `retention.ms`."""
        if not self.config.delete:
            return self.log_start_offset  # cleanup.policy=compact: only the cleaner removes
        segments = self.store.segments
        total = sum(s.size_bytes for s in segments)
        new_start = self.log_start_offset
        for segment in segments[:-1]:
            if segment.next_offset > high_watermark:
                break
            over_bytes = 0 <= self.config.retention_bytes <= total - segment.size_bytes
            too_old = (
                self.config.retention_ms >= 0
                and now_ms - segment.last_append_time_ms > self.config.retention_ms
            )
            if not (over_bytes or too_old):
                break
            total -= segment.size_bytes
            new_start = segment.next_offset
        if new_start > self.log_start_offset:
            self.advance_log_start(new_start)
        return self.log_start_offset

    def cleaner_checkpoint(self) -> int:
        """Where the cleaner's last round stopped mapping; -1 if it never ran."""
        try:
            return int((self.directory / CLEANER_CHECKPOINT).read_text().strip())
        except (OSError, ValueError):
            return -1

    def write_cleaner_checkpoint(self, offset: int) -> None:
        write_atomically(self.directory / CLEANER_CHECKPOINT, b"%d\n" % offset)

    def load_high_watermark(self) -> int:
        """The HW last checkpointed (Kafka's replication-offset-checkpoint), capped
        by what the log holds; the log start when there is none."""
        missing = False
        try:
            stored = int((self.directory / HW_CHECKPOINT).read_text().strip())
        except FileNotFoundError:
            stored, missing = -1, True
        except (OSError, ValueError):
            stored = -1
        loaded = max(self.log_start_offset, min(stored, self.log_end_offset))
        if loaded == stored or missing:
            # Already on disk, or what a load without the file gives (a new
            # replica): the first tick need not write it (a restart's 1,000
            # replicas, or a CreateTopics' new ones, each a file on the event loop).
            self._checkpointed_hw = loaded
        return loaded

    def checkpoint_high_watermark(self, high_watermark: int, *, sync: bool = False) -> None:
        """Replaced whole (temp file and rename), synced only when `sync` (on close).
        The checkpoint is a hint allowed to be behind, so a tick need not pay two
        fsyncs per partition: with 1,000 partitions written to, that was seconds of
        the broker's event loop every tick, long enough to miss its heartbeats."""
        if high_watermark == self._checkpointed_hw:
            return
        path = self.directory / HW_CHECKPOINT
        if sync:
            write_atomically(path, b"%d\n" % high_watermark)
        else:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(b"%d\n" % high_watermark)
            tmp.replace(path)
        self._checkpointed_hw = high_watermark

    def close(self) -> None:
        self.store.close()

    def delete(self, deleter: LogDeleter) -> None:
        """Closed, renamed aside at once, removed by the deleter's thread."""
        self.store.close()
        deleter.delete(self.directory)
