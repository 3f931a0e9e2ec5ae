"""The core's view of its replicated log: batches above the latest snapshot.

It mirrors what the driver has written (durable or not). It answers the two
questions KIP-595 needs: what to send a fetcher, and where a follower's log
diverges from ours (the leader-epoch cache: epoch -> start offset).
"""

from __future__ import annotations

from bisect import bisect_right

from quorum.raft.records import Batch, OffsetAndEpoch, SnapshotId


class RaftLog:
    def __init__(self, snapshot_id: SnapshotId | None = None) -> None:
        self._snapshot_id = snapshot_id
        self._start = snapshot_id.end_offset if snapshot_id else 0
        self._batches: list[Batch] = []
        self._bases: list[int] = []
        # Leader-epoch cache: parallel lists of (epoch, first offset of that epoch).
        self._epochs: list[int] = []
        self._epoch_starts: list[int] = []

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._batches[-1].next_offset if self._batches else self._start

    @property
    def last_epoch(self) -> int:
        if self._batches:
            return self._batches[-1].epoch
        return self._snapshot_id.epoch if self._snapshot_id else 0

    @property
    def snapshot_id(self) -> SnapshotId | None:
        return self._snapshot_id

    def end_offset_and_epoch(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.end_offset, self.last_epoch)

    def append(self, batch: Batch) -> None:
        if batch.base_offset != self.end_offset:
            raise ValueError(f"append at {batch.base_offset}, log end is {self.end_offset}")
        if not batch.records:
            raise ValueError("empty batch")
        if batch.epoch < self.last_epoch:
            raise ValueError(f"batch epoch {batch.epoch} below last epoch {self.last_epoch}")
        if not self._epochs or self._epochs[-1] != batch.epoch:
            self._epochs.append(batch.epoch)
            self._epoch_starts.append(batch.base_offset)
        self._batches.append(batch)
        self._bases.append(batch.base_offset)

    def truncate_to(self, end_offset: int) -> None:
        """Drop every entry at or above `end_offset`; it must be a batch boundary."""
        if end_offset < self._start:
            raise ValueError(f"truncate to {end_offset} below log start {self._start}")
        if end_offset >= self.end_offset:
            return
        idx = bisect_right(self._bases, end_offset) - 1
        if idx >= 0 and self._batches[idx].base_offset != end_offset:
            raise ValueError(f"truncate to {end_offset} inside a batch")
        keep = max(idx, 0)
        del self._batches[keep:]
        del self._bases[keep:]
        while self._epoch_starts and self._epoch_starts[-1] >= end_offset:
            self._epochs.pop()
            self._epoch_starts.pop()

    def batch_at(self, offset: int) -> Batch | None:
        """The batch containing `offset`, if the log still holds it."""
        if offset < self._start or offset >= self.end_offset:
            return None
        idx = bisect_right(self._bases, offset) - 1
        return self._batches[idx]

    def epoch_at(self, offset: int) -> int | None:
        """The epoch of the entry at `offset`, including the snapshot's last entry."""
        if self._snapshot_id and offset == self._snapshot_id.end_offset - 1:
            return self._snapshot_id.epoch
        batch = self.batch_at(offset)
        return batch.epoch if batch else None

    def read(self, offset: int, max_records: int) -> tuple[Batch, ...]:
        """Whole batches from the one containing `offset`, at least one batch."""
        if offset >= self.end_offset or offset < self._start:
            return ()
        idx = bisect_right(self._bases, offset) - 1
        out: list[Batch] = []
        count = 0
        while idx < len(self._batches) and (not out or count < max_records):
            batch = self._batches[idx]
            out.append(batch)
            count += len(batch.records)
            idx += 1
        return tuple(out)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in our log and the offset where it ends.

        This is the leader-epoch lookup behind diverging-epoch truncation.
        """
        i = bisect_right(self._epochs, epoch) - 1
        if i < 0:
            if self._snapshot_id and self._snapshot_id.epoch <= epoch:
                return OffsetAndEpoch(self._snapshot_id.end_offset, self._snapshot_id.epoch)
            return OffsetAndEpoch(self._start, 0) if self._start == 0 else OffsetAndEpoch(-1, -1)
        found = self._epochs[i]
        if i + 1 < len(self._epochs):
            return OffsetAndEpoch(self._epoch_starts[i + 1], found)
        return OffsetAndEpoch(self.end_offset, found)

    def advance_start(self, snapshot_id: SnapshotId) -> None:
        """A snapshot now covers everything below its end offset: drop those batches."""
        if self._snapshot_id and snapshot_id.end_offset <= self._snapshot_id.end_offset:
            return
        if snapshot_id.end_offset > self.end_offset:
            raise ValueError("snapshot beyond the log end; use reset_to_snapshot")
        idx = bisect_right(self._bases, snapshot_id.end_offset - 1)
        if idx > 0 and self._batches[idx - 1].last_offset >= snapshot_id.end_offset:
            idx -= 1  # keep a batch that straddles the snapshot end
        del self._batches[:idx]
        del self._bases[:idx]
        self._snapshot_id = snapshot_id
        self._start = self._bases[0] if self._bases else snapshot_id.end_offset
        self._start = min(self._start, snapshot_id.end_offset)
        while len(self._epoch_starts) > 1 and self._epoch_starts[1] <= self._start:
            self._epochs.pop(0)
            self._epoch_starts.pop(0)

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        """A follower installed a snapshot from the leader: its log starts after it."""
        self._snapshot_id = snapshot_id
        self._start = snapshot_id.end_offset
        self._batches.clear()
        self._bases.clear()
        self._epochs.clear()
        self._epoch_starts.clear()
