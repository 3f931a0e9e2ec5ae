"""This node's snapshot store as the Raft driver uses it (KIP-630).

The snapshot the log starts after is loaded into each listener when it
registers; a snapshot a listener captured is written, published and older
ones beyond `metadata.snapshot.retain.count` dropped (in a worker thread); one
fetched from the leader is loaded into every listener, whose committed batches
then go on after it; and peers and brokers read chunks of stored ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from itertools import chain

from quorum.log.kraft_bootstrap import VOTERS_SNAPSHOT_KEY, voters_from_snapshot_record
from quorum.raft.client_api import SnapshotReader, SnapshotRecord
from quorum.raft.records import SnapshotId
from quorum.raft.voters import VoterSet, encode_voters
from quorum.server.commit_delivery import ListenerContext
from quorum.server.driver_stats import SnapshotStats
from snapshots.api import SnapshotChunk, SnapshotStore


class LocalSnapshots:
    def __init__(self, store: SnapshotStore, retain_count: int, start: SnapshotId | None) -> None:
        self.store = store
        self.retain_count = max(1, retain_count)
        self.start = start  # the snapshot the log starts after, if any
        self.stats = SnapshotStats()
        self.running = False  # a write in a worker thread
        latest = store.latest()
        if latest is not None:
            self.stats.note(latest)

    def load_start(self, context: ListenerContext) -> None:
        """Into a listener that registers: the snapshot the log starts after
        (its checksum verified as it is read: a corrupt one raises)."""
        if self.start is not None:
            context.listener.handle_load_snapshot(
                SnapshotReader(self.start, self._state_records(self.start))
            )
            context.next_offset = self.start.end_offset

    def write(
        self,
        snapshot_id: SnapshotId,
        records: Iterable[SnapshotRecord],
        voters: VoterSet | None = None,
    ) -> list[SnapshotId]:
        """Blocking (worker thread): write, publish, and drop snapshots beyond
        retention (returned); the running snapshot ends here, written or not.
        `voters` (kraft.version 1): the voter set of its offsets, stored with it."""
        try:
            if voters is not None:
                records = chain(((VOTERS_SNAPSHOT_KEY, encode_voters(voters)),), records)
            self.store.write(snapshot_id, records)
            return self.store.retain_latest(self.retain_count)
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
