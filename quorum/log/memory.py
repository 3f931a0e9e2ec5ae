"""In-memory storage for the simulator: a crash keeps exactly what was flushed."""

from __future__ import annotations

from collections.abc import Sequence

from quorum.raft.config import QuorumStateData
from quorum.raft.records import Batch, SnapshotId


class _MemoryFlush:
    """A pending flush of the in-memory log (always small: synced inline)."""

    size = 0

    def __init__(self, store: MemoryLogStore, end_offset: int) -> None:
        self.end_offset = end_offset
        self._store = store

    def complete(self) -> None:
        self._store.flush(self.end_offset)


class MemoryLogStore:
    def __init__(self) -> None:
        self._snapshot: SnapshotId | None = None
        self._batches: list[Batch] = []
        self._durable_count = 0  # how many leading batches survive a crash

    @property
    def start_offset(self) -> int:
        if self._batches:
            return self._batches[0].base_offset
        return self._snapshot.end_offset if self._snapshot else 0

    @property
    def end_offset(self) -> int:
        return self._batches[-1].next_offset if self._batches else self.start_offset

    @property
    def durable_end_offset(self) -> int:
        if self._durable_count:
            return self._batches[self._durable_count - 1].next_offset
        return self.start_offset

    def durable_epoch_at(self, offset: int) -> int | None:
        """The epoch of the entry at `offset` if it would survive a crash now."""
        for batch in self._batches[: self._durable_count]:
            if batch.base_offset <= offset <= batch.last_offset:
                return batch.epoch
        return None

    def append(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            if batch.base_offset != self.end_offset:
                raise ValueError(f"append at {batch.base_offset}, end is {self.end_offset}")
            self._batches.append(batch)

    def begin_flush(self, end_offset: int) -> _MemoryFlush | None:
        if end_offset <= self.durable_end_offset:
            return None
        return _MemoryFlush(self, max(end_offset, self.end_offset))

    def enforce_retention(self, now_ms: int | None = None) -> list[SnapshotId]:
        """Nothing to delete: memory holds only what the log still covers."""
        return []

    def flush(self, end_offset: int) -> None:
        count = self._durable_count
        while count < len(self._batches) and self._batches[count].next_offset <= end_offset:
            count += 1
        self._durable_count = max(self._durable_count, count)

    def truncate(self, end_offset: int) -> None:
        self._batches = [b for b in self._batches if b.next_offset <= end_offset]
        self._durable_count = min(self._durable_count, len(self._batches))

    def advance_start(self, snapshot_id: SnapshotId) -> None:
        drop = 0
        while (
            drop < len(self._batches) and self._batches[drop].next_offset <= snapshot_id.end_offset
        ):
            drop += 1
        del self._batches[:drop]
        self._durable_count = max(0, self._durable_count - drop)
        self._snapshot = snapshot_id

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        self._batches = []
        self._durable_count = 0
        self._snapshot = snapshot_id

    def recover(self) -> tuple[SnapshotId | None, list[Batch]]:
        return self._snapshot, list(self._batches)

    def crash(self) -> None:
        """Lose everything that was not flushed."""
        del self._batches[self._durable_count :]


class MemoryQuorumStateStore:
    def __init__(self) -> None:
        self._state = QuorumStateData()

    def read(self) -> QuorumStateData:
        return self._state

    def write(self, state: QuorumStateData) -> None:
        self._state = state
