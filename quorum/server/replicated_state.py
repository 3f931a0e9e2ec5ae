"""The committed side of a controller: applying records, and snapshots (KIP-630).

The driver owns the Raft core; this owns what the core's commits feed. It
applies committed data records to the state machine in offset order, counts
their bytes toward `metadata.snapshot.max.new.record.bytes`, and when a snapshot
is due captures the image on the event loop (so it is exactly the state at a
batch boundary) and writes it to RocksDB in a worker thread. It also loads the
snapshot the log starts after at start-up, and installs one fetched from the
leader.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from quorum.raft.log import RaftLog
from quorum.raft.records import SnapshotId
from quorum.server.image import StateMachine
from snapshots.api import SnapshotStore
from snapshots.manifest import SnapshotManifest
from snapshots.policy import SnapshotPolicy, SnapshotTrigger
from snapshots.records import Record

log = logging.getLogger(__name__)

APPLY_CHUNK_RECORDS = 8192


@dataclass
class SnapshotStats:
    taken: int = 0
    installed: int = 0
    latest_offset: int = -1
    latest_epoch: int = -1


class ReplicatedState:
    def __init__(
        self,
        image: StateMachine,
        store: SnapshotStore,
        policy: SnapshotPolicy,
        retain_count: int,
        now_ms: int,
    ) -> None:
        self.image = image
        self.store = store
        self.retain_count = max(1, retain_count)
        self.trigger = SnapshotTrigger(policy, now_ms)
        self.stats = SnapshotStats()
        # The leader's append time of the last batch applied (-1: none yet), for
        # Kafka's LastAppliedRecordTimestamp and LastAppliedRecordLagMs.
        self.last_applied_append_time_ms = -1
        self.snapshot_running = False
        self._covered_bytes = 0  # new record bytes counted when the running one was captured
        latest = store.latest()
        if latest is not None:
            self._note_snapshot(latest)

    def load(self, snapshot_id: SnapshotId | None) -> None:
        """At start-up: load the snapshot the log starts after (verifying its checksum)."""
        if snapshot_id is None:
            return
        self.image.load_snapshot(self.store.read(snapshot_id), snapshot_id.end_offset)
        self._note_snapshot(snapshot_id)

    def apply_committed(self, raft_log: RaftLog, high_watermark: int) -> int:
        """Apply every committed record not yet applied; returns how many."""
        applied = 0
        offset = max(self.image.applied_offset, raft_log.start_offset)
        while offset < high_watermark:
            batches = raft_log.read(offset, APPLY_CHUNK_RECORDS)
            if not batches:
                break
            for batch in batches:
                if batch.base_offset >= high_watermark:
                    return applied
                if not batch.control:
                    records = batch.records[max(0, offset - batch.base_offset) :]
                    for i, record in enumerate(records, start=max(offset, batch.base_offset)):
                        self.image.apply(i, record)
                    self.trigger.on_committed(records)
                    applied += len(records)
                offset = batch.next_offset
                self.image.advance_to(offset)
                self.last_applied_append_time_ms = batch.append_time_ms
        return applied

    # --------------------------------------------------------------- snapshots

    def snapshot_due(self, now_ms: int, raft_log: RaftLog) -> SnapshotId | None:
        """The id a snapshot taken now would have, if one is due and possible."""
        end = self.image.applied_offset
        if self.snapshot_running or end <= max(self.stats.latest_offset, 0):
            return None
        if not self.trigger.due(now_ms):
            return None
        epoch = raft_log.epoch_at(end - 1)
        if epoch is None:
            return None
        return SnapshotId(end, epoch)

    def capture(self) -> Iterable[Record]:
        """The image as it is now (the state machine copies what it must on the
        loop, so later applies cannot leak in; encoding may happen later). A
        snapshot is running from here until `write_snapshot` returns."""
        self.snapshot_running = True
        self._covered_bytes = self.trigger.new_record_bytes
        return self.image.snapshot_records()

    def write_snapshot(
        self, snapshot_id: SnapshotId, records: Iterable[Record]
    ) -> list[SnapshotId]:
        """Blocking (worker thread): write, publish, and drop snapshots beyond
        retention; the running snapshot ends here, written or not."""
        try:
            self.store.write(snapshot_id, records)
            return self.store.retain_latest(self.retain_count)
        finally:
            self.snapshot_running = False

    def snapshot_written(self, snapshot_id: SnapshotId, now_ms: int) -> None:
        self.trigger.on_snapshot_taken(now_ms, self._covered_bytes)
        self.stats.taken += 1
        self._note_snapshot(snapshot_id)

    def install(self, snapshot_id: SnapshotId) -> None:
        """A snapshot fetched from the leader is published: load it into the image."""
        self.image.load_snapshot(self.store.read(snapshot_id), snapshot_id.end_offset)
        self.stats.installed += 1
        self._note_snapshot(snapshot_id)

    def manifest(self, snapshot_id: SnapshotId) -> SnapshotManifest:
        return self.store.manifest(snapshot_id)

    def _note_snapshot(self, snapshot_id: SnapshotId) -> None:
        if snapshot_id.end_offset >= self.stats.latest_offset:
            self.stats.latest_offset = snapshot_id.end_offset
            self.stats.latest_epoch = snapshot_id.epoch
