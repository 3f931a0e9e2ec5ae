"""The snapshot-store seam (hashicorp/raft style): a RocksDB-backed store for
production, an in-memory one for the simulator, both behind this protocol."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from quorum.raft.records import SnapshotId
from snapshots.manifest import SnapshotManifest
from snapshots.records import Record


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """A slice of a snapshot's transfer archive (see archive.py)."""

    snapshot_id: SnapshotId
    position: int
    data: bytes
    total_size: int

    @property
    def last(self) -> bool:
        return self.position + len(self.data) >= self.total_size


class SnapshotInstaller(Protocol):
    """Receives one snapshot's archive chunk by chunk; installs it only if valid."""

    @property
    def received(self) -> int: ...

    def write_chunk(self, position: int, data: bytes) -> None: ...

    def complete(self, load: Callable[[Iterable[Record]], None] | None = None) -> SnapshotManifest:
        """Install once valid; `load` also builds a state from the records on the way."""
        ...

    def abort(self) -> None: ...


class SnapshotStore(Protocol):
    def snapshot_ids(self) -> list[SnapshotId]:
        """Every stored snapshot, oldest first."""
        ...

    def latest(self) -> SnapshotId | None: ...

    def manifest(self, snapshot_id: SnapshotId) -> SnapshotManifest: ...

    def write(self, snapshot_id: SnapshotId, records: Iterable[Record]) -> SnapshotManifest:
        """Store the image at `snapshot_id`; durable and visible when it returns."""
        ...

    def read(self, snapshot_id: SnapshotId) -> Iterator[Record]:
        """Records in key order; raises SnapshotCorruptionError after the last
        one if they do not match the manifest."""
        ...

    def delete(self, snapshot_id: SnapshotId) -> None: ...

    def retain_latest(self, count: int) -> list[SnapshotId]:
        """Delete all but the newest `count` snapshots; returns the deleted ids."""
        ...

    def read_chunk(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> SnapshotChunk:
        """Leader side of FetchSnapshot."""
        ...

    def begin_install(self, snapshot_id: SnapshotId, total_size: int) -> SnapshotInstaller:
        """Follower side of FetchSnapshot."""
        ...
