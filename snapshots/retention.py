"""Snapshot retention (`metadata.snapshot.retain.count`), one rule for every store:
keep the newest `count`, delete the rest oldest first, say which went."""

from __future__ import annotations

from typing import Protocol

from quorum.raft.records import SnapshotId


class _Deletable(Protocol):
    def snapshot_ids(self) -> list[SnapshotId]: ...

    def delete(self, snapshot_id: SnapshotId) -> None: ...


def retain_latest(store: _Deletable, count: int) -> list[SnapshotId]:
    if count < 0:
        raise ValueError("count must not be negative")
    ids = store.snapshot_ids()
    doomed = ids[: max(0, len(ids) - count)]
    for snapshot_id in doomed:
        store.delete(snapshot_id)
    return doomed
