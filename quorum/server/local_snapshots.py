"""This node's snapshot store as the Raft driver uses it (KIP-630).

The log starts after the oldest of the `metadata.snapshot.retain.count` newest
snapshots, as KIP-630's log starts after its oldest retained snapshot: a broker
or a peer that loaded the latest snapshot while the next one was taken fetches
the log after it, instead of loading again (which a million partitions' load,
longer than a snapshot interval, could otherwise do forever). So a registering
listener loads the newest stored snapshot the log holds (`loadable`), not the
one the log starts after, and replays only the log after that.

A snapshot a listener captured is written and published in a worker thread;
the driver then moves the log start (`log_start`) and only after that drops the
snapshots beyond retention (`drop_beyond_retention`), never the one the log
starts after. One fetched from the leader is loaded into every listener, whose
committed batches then go on after it; and peers and brokers read chunks of
stored ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from itertools import chain

from quorum.log.kraft_bootstrap import VOTERS_SNAPSHOT_KEY, voters_from_snapshot_record
from quorum.raft.client_api import SnapshotReader, SnapshotRecord
from quorum.raft.log import RaftLog
from quorum.raft.records import SnapshotId
from quorum.raft.voters import VoterSet, encode_voters
from quorum.server.commit_delivery import ListenerContext
from quorum.server.driver_stats import SnapshotStats
from snapshots.api import SnapshotChunk, SnapshotStore


class LocalSnapshots:
    def __init__(
        self, store: SnapshotStore, retain_count: int, raft_log: RaftLog | None = None
    ) -> None:
        self.store = store
        self.retain_count = max(1, retain_count)
        # What a registering listener loads: the newest snapshot the recovered log holds.
        self.load = loadable(store, raft_log) if raft_log is not None else store.latest()
        self.stats = SnapshotStats()
        self.running = False  # a write in a worker thread
        latest = store.latest()
        if latest is not None:
            self.stats.note(latest)

    def load_start(self, context: ListenerContext) -> None:
        """Into a listener that registers: the newest snapshot the log holds (its
        checksum verified as it is read: a corrupt one raises); the log after it
        follows."""
        if self.load is not None:
            context.listener.handle_load_snapshot(
                SnapshotReader(self.load, self._state_records(self.load))
            )
            context.next_offset = self.load.end_offset

    def log_start(self, raft_log: RaftLog, high_watermark: int) -> SnapshotId | None:
        """The snapshot the log may start after now, if later than where it
        starts: the oldest of the newest `retain_count` that the log holds
        committed (every one this node took is; a later one is taken if not)."""
        for snapshot_id in self.store.snapshot_ids()[-self.retain_count :]:
            if snapshot_id.end_offset > high_watermark:
                break
            if snapshot_id.end_offset >= raft_log.start_offset and holds(raft_log, snapshot_id):
                return snapshot_id if snapshot_id.end_offset > raft_log.start_offset else None
        return None

    def drop_beyond_retention(self, start: SnapshotId | None) -> list[SnapshotId]:
        """Blocking (worker thread): delete the snapshots older than the newest
        `retain_count` except `start` (the log's: a peer below the log is sent
        to it); the deleted."""
        ids = self.store.snapshot_ids()
        doomed = [s for s in ids[: max(0, len(ids) - self.retain_count)] if s != start]
        for snapshot_id in doomed:
            self.store.delete(snapshot_id)
        return doomed

    def write(
        self,
        snapshot_id: SnapshotId,
        records: Iterable[SnapshotRecord],
        voters: VoterSet | None = None,
    ) -> None:
        """Blocking (worker thread): write and publish; the running snapshot ends
        here, written or not. `voters` (kraft.version 1): the voter set of its
        offsets, stored with it."""
        try:
            if voters is not None:
                records = chain(((VOTERS_SNAPSHOT_KEY, encode_voters(voters)),), records)
            self.store.write(snapshot_id, records)
        finally:
            self.running = False

    def voters(self, snapshot_id: SnapshotId) -> VoterSet | None:
        """The voter set stored with a snapshot (its first record: the key sorts
        before any state machine's), or None for a kraft.version 0 snapshot."""
        for key, value in self.store.read(snapshot_id):
            return voters_from_snapshot_record(key, value)
        return None

    def _state_records(self, snapshot_id: SnapshotId) -> Iterator[SnapshotRecord]:
        """The snapshot's records without the voter set (the Raft layer's, not the
        state machine's)."""
        return (r for r in self.store.read(snapshot_id) if r[0] != VOTERS_SNAPSHOT_KEY)

    def written(self, snapshot_id: SnapshotId) -> None:
        self.stats.taken += 1
        self.stats.note(snapshot_id)

    def install(self, snapshot_id: SnapshotId, contexts: Iterable[ListenerContext]) -> None:
        """Blocking (worker thread): load a snapshot fetched from the leader into
        every listener; their committed batches go on after it."""
        for context in contexts:
            reader = SnapshotReader(snapshot_id, self._state_records(snapshot_id))
            context.listener.handle_load_snapshot(reader)
            context.next_offset = snapshot_id.end_offset
        self.stats.installed += 1
        self.stats.note(snapshot_id)

    async def read_chunk(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> SnapshotChunk:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, self.store.read_chunk, snapshot_id, position, max_bytes
        )


def holds(raft_log: RaftLog, snapshot_id: SnapshotId) -> bool:
    """Whether the log holds the snapshot's last entry with its epoch: by Raft's
    log matching, the log then agrees with the snapshot's state up to its end."""
    end = snapshot_id.end_offset
    if end == raft_log.start_offset:
        return raft_log.snapshot_id == snapshot_id
    return end <= raft_log.end_offset and raft_log.epoch_at(end - 1) == snapshot_id.epoch


def loadable(store: SnapshotStore, raft_log: RaftLog) -> SnapshotId | None:
    """The newest stored snapshot the recovered log holds: its state plus the log
    after it is this node's. A snapshot downloaded whose install a crash cut
    short, beyond the log or disagreeing with it, is not one."""
    for snapshot_id in reversed(store.snapshot_ids()):
        if snapshot_id.end_offset < raft_log.start_offset:
            break
        if holds(raft_log, snapshot_id):
            return snapshot_id
    return raft_log.snapshot_id
