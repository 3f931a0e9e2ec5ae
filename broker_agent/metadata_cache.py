"""The broker's metadata cache: a local replica of the committed metadata log.

As a Kafka broker keeps its own `__cluster_metadata` log, the agent appends the
committed batches it fetches to a segmented log under `metadata.log.dir`,
applies them to a `MetadataImage`, and snapshots that image into RocksDB by the
same policy the controllers use, moving its log start forward. A restart loads
the newest local snapshot and replays the log tail, then asks the controller
only for what came after.

No fsync per fetch: as in Kafka since KAFKA-13884 (only voters flush on a Fetch
answer), nobody counts a broker's copy toward a commit, so what an OS crash
takes from its unflushed tail is fetched again from the controllers (the log's
checksums find the torn end). At 200 brokers and 20 commits a second the
fsyncs were 4,000 a second, the disk's whole budget. The cache is flushed on a
clean shutdown.

A damaged cache (a bad checksum, a missing segment, a snapshot that does not
match its manifest) stops the agent with the file and offset named; the operator
may restart it with `--rebuild-metadata-cache` to drop the cache and fetch
everything again from the controllers.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from quorum.controller.metadata_image import MetadataImage
from quorum.log.file_log import FileLogStore
from quorum.raft.records import Batch, SnapshotId
from snapshots.api import SnapshotInstaller
from snapshots.policy import SnapshotPolicy, SnapshotTrigger
from snapshots.records import Record
from snapshots.store import FileSnapshotStore

LOG_DIR = "__cluster_metadata-0"
SNAPSHOT_DIR = "snapshots"
RETAIN_SNAPSHOTS = 2


class Applied(NamedTuple):
    """One record applied from a fetched batch (for the apply trace). A tuple:
    one is built per record per broker per commit, and a frozen dataclass's
    `__init__` cost five times a tuple's."""

    offset: int
    epoch: int
    record_type: str
    append_time_ms: int
    batch_base: int


class MetadataCache:
    def __init__(
        self,
        directory: Path,
        policy: SnapshotPolicy,
        segment_bytes: int,
        now_ms: int,
    ) -> None:
        self.directory = directory / LOG_DIR
        self.log = FileLogStore(self.directory, segment_bytes=segment_bytes)
        try:
            self.snapshots = FileSnapshotStore(self.directory / SNAPSHOT_DIR)
            self.image = MetadataImage()
            self.trigger = SnapshotTrigger(policy, now_ms)
            self._covered_bytes = 0  # counted when the snapshot being written was captured
            self.last_epoch = -1
            latest = self.snapshots.latest()
            # Kept here, not listed from the directory on every fetch.
            self.snapshot_end_offset = latest.end_offset if latest else 0
            snapshot_id, batches = self.log.recover()
            if snapshot_id is not None:
                self.image.load_snapshot(self.snapshots.read(snapshot_id), snapshot_id.end_offset)
                self.last_epoch = snapshot_id.epoch
            for batch in batches:
                self._apply(batch)
        except BaseException:
            self.log.close()
            raise

    @staticmethod
    def drop(directory: Path) -> bool:
        """`--rebuild-metadata-cache`: forget the local cache; True if there was one."""
        target = directory / LOG_DIR
        if not target.exists():
            return False
        shutil.rmtree(target)
        return True

    @property
    def next_offset(self) -> int:
        """The offset to fetch from: everything below it is applied."""
        return self.image.applied_offset

    def append(self, batches: Sequence[Batch]) -> list[Applied]:
        """Store (unflushed) and apply committed batches; `flush` makes them durable."""
        self.log.append(batches)
        applied: list[Applied] = []
        for batch in batches:
            applied.extend(self._apply(batch))
        return applied

    def flush(self) -> None:
        """Blocking: one fsync for everything appended so far."""
        self.log.flush(self.log.end_offset)

    def _apply(self, batch: Batch) -> list[Applied]:
        out: list[Applied] = []
        if not batch.control:
            apply = self.image.apply  # a partition record of this version is not decoded
            for i, data in enumerate(batch.records, start=batch.base_offset):
                kind = apply(i, data) or "unknown"
                out.append(Applied(i, batch.epoch, kind, batch.append_time_ms, batch.base_offset))
            self.trigger.on_committed(batch.records)
        self.image.advance_to(batch.next_offset)
        self.last_epoch = batch.epoch
        return out

    # -------------------------------------------------------------- snapshots

    def snapshot_due(self, now_ms: int) -> SnapshotId | None:
        end = self.image.applied_offset
        if end <= self.snapshot_end_offset or not self.trigger.due(now_ms):
            return None
        return SnapshotId(end, self.last_epoch)

    def capture(self) -> Iterable[Record]:
        self._covered_bytes = self.trigger.new_record_bytes
        return self.image.snapshot_records()

    def write_snapshot(self, snapshot_id: SnapshotId, records: Iterable[Record]) -> None:
        """Blocking (worker thread): write the snapshot, then move the log start."""
        self.snapshots.write(snapshot_id, records)
        self.snapshot_end_offset = max(self.snapshot_end_offset, snapshot_id.end_offset)
        self.log.advance_start(snapshot_id)
        self.snapshots.retain_latest(RETAIN_SNAPSHOTS)

    def snapshot_written(self, now_ms: int) -> None:
        self.trigger.on_snapshot_taken(now_ms, self._covered_bytes)

    def install(self, receiver: SnapshotInstaller, snapshot_id: SnapshotId) -> None:
        """Blocking (worker thread): install a snapshot received from the
        controller and start over from it. The new image is built from the
        records as they are written, in one pass (reading the million-partition
        snapshot back was ~0.5 s of a 5 s restart), aside: the image in use is
        replaced only once the snapshot is published, checksum and all."""
        image = MetadataImage()
        receiver.complete(lambda records: image.load_snapshot(records, snapshot_id.end_offset))
        self.log.reset_to_snapshot(snapshot_id)
        self.image = image
        self.last_epoch = snapshot_id.epoch
        self.snapshot_end_offset = max(self.snapshot_end_offset, snapshot_id.end_offset)
        self.snapshots.retain_latest(RETAIN_SNAPSHOTS)

    def close(self) -> None:
        """Flushed first: a clean restart resumes where it stopped."""
        try:
            self.flush()
        finally:
            self.log.close()
