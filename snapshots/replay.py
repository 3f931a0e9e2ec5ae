"""Rebuilding a state machine from a snapshot plus the log after it.

The invariant snapshots rest on: loading the snapshot at offset N and then
applying the log from N gives exactly the image that applying the whole log
gives. The image type is the caller's (the metadata image, or a test's toy
key-value image); this module only decides which records to feed it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from quorum.log.api import LogStore
from quorum.raft.records import Batch, SnapshotId
from snapshots.api import SnapshotStore
from snapshots.records import Record


class ReplayTarget(Protocol):
    def load_snapshot(self, records: Iterable[Record]) -> None:
        """Replace the whole state with a snapshot's records."""
        ...

    def apply(self, offset: int, record: bytes) -> None: ...


def apply_batches(target: ReplayTarget, batches: Iterable[Batch], from_offset: int) -> int:
    """Apply every data record at or above `from_offset`; returns the next offset.

    Control batches (LeaderChange) are Raft's own and never reach the image. A
    batch straddling `from_offset` is applied only from there on.
    """
    next_offset = from_offset
    for batch in batches:
        if batch.next_offset <= from_offset:
            continue
        if batch.base_offset > next_offset:
            raise ValueError(
                f"gap in the log: expected offset {next_offset}, got {batch.base_offset}"
            )
        if not batch.control:
            for i, record in enumerate(batch.records):
                offset = batch.base_offset + i
                if offset >= from_offset:
                    target.apply(offset, record)
        next_offset = batch.next_offset
    return next_offset


def restore(target: ReplayTarget, log: LogStore, snapshots: SnapshotStore) -> SnapshotId | None:
    """Load the snapshot the log starts after (if any), then its tail.

    Returns that snapshot id. The snapshot is read to the end (and its checksum
    verified) before any log record is applied.
    """
    snapshot_id, batches = log.recover()
    start = 0
    if snapshot_id is not None:
        target.load_snapshot(snapshots.read(snapshot_id))
        start = snapshot_id.end_offset
    apply_batches(target, batches, start)
    return snapshot_id
