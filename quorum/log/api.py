"""The storage seams the Raft driver writes through (hashicorp/raft style).

The production versions live beside the in-memory ones; both must honour the
same durability contract, which the simulator relies on when it crashes nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from quorum.raft.config import QuorumStateData
from quorum.raft.records import Batch, SnapshotId


class PendingFlush(Protocol):
    """A flush whose scope is fixed (everything appended before `begin_flush`):
    `complete()` makes it durable, on any thread, exactly once."""

    @property
    def end_offset(self) -> int: ...

    @property
    def size(self) -> int:
        """Bytes it covers: the driver syncs small flushes inline, large ones in a worker."""
        ...

    def complete(self) -> None: ...


class LogStore(Protocol):
    """An append-only log of batches. Appends are volatile until `flush`;
    truncation and start-offset changes are durable when the call returns."""

    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    def append(self, batches: Sequence[Batch]) -> None: ...

    def flush(self, end_offset: int) -> None:
        """Make every entry below `end_offset` durable (one fsync)."""
        ...

    def begin_flush(self, end_offset: int) -> PendingFlush | None:
        """Fix a flush's scope now so appends may go on while it syncs; None when
        everything below `end_offset` is already durable."""
        ...

    def enforce_retention(self, now_ms: int | None = None) -> object:
        """Delete what retention allows below the log start (after a snapshot)."""
        ...

    def truncate(self, end_offset: int) -> None: ...

    def advance_start(self, snapshot_id: SnapshotId) -> None: ...

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None: ...

    def recover(self) -> tuple[SnapshotId | None, list[Batch]]:
        """What survived: the snapshot the log starts after, and every durable batch."""
        ...


class QuorumStateStore(Protocol):
    def read(self) -> QuorumStateData: ...

    def write(self, state: QuorumStateData) -> None:
        """Atomically and durably replace the stored state."""
        ...
