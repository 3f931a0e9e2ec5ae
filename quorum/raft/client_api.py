"""The seam between the metadata controller and Raft (Kafka's `RaftClient` and
`RaftClient.Listener`).

The controller needs little of Raft: propose records and learn when they
committed, who leads in which epoch, the high watermark, the committed batches
after an offset (for brokers' MetadataFetch), the newest snapshot, a way to
write a snapshot of its state, and to be told of committed batches, snapshot
loads and leadership changes. Everything else (the core's roles, the log's
uncommitted tail, fetch sessions) stays behind this seam, so the controller can
be tested against a fake and the driver can change without the controller
noticing. The errors the controller may see live here too.
`quorum.server.driver.RaftDriver` implements it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from quorum.raft.config import ProposeResult
from quorum.raft.records import Batch, SnapshotId

# What a listener and a client see of the log, named here so the controller
# needs nothing else of the core.
__all__ = [
    "Batch",
    "LeaderAndEpoch",
    "NotLeaderError",
    "ProposalFailed",
    "ProposalOutcomeUnknown",
    "ProposeResult",
    "RaftClient",
    "RaftListener",
    "SnapshotId",
    "SnapshotReader",
    "SnapshotRecord",
]

# One key/value pair of a snapshot (the snapshot store sorts them by key).
SnapshotRecord = tuple[bytes, bytes]


class NotLeaderError(Exception):
    """A proposal reached a node that is not the leader."""

    def __init__(self, epoch: int, leader_id: int | None) -> None:
        super().__init__(f"not leader (epoch {epoch}, leader {leader_id})")
        self.epoch = epoch
        self.leader_id = leader_id


class ProposalFailed(Exception):
    """The records were not committed: leadership moved and the log was rewritten,
    or the node stopped. (A proposal to a non-leader raises `NotLeaderError`.)"""


class ProposalOutcomeUnknown(ProposalFailed):
    """The node stopped while the records were appended and maybe replicated: a
    successor may still commit them, so the caller must not take this as "not
    written" (Kafka answers REQUEST_TIMED_OUT for such a write)."""


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class SnapshotReader:
    """A snapshot to load: the state as of `snapshot_id.end_offset` (everything
    below it), as the key/value pairs it was written with (checksum verified as
    they are read)."""

    snapshot_id: SnapshotId
    records: Iterable[SnapshotRecord]


class RaftListener(Protocol):
    """What a Raft client tells the state machine above it.

    Committed batches come in offset order, each exactly once, never past the
    high watermark (control batches included, so the listener can move past
    their offsets); a snapshot load replaces the whole state and the batches
    after it follow. An exception from `handle_commit` stops the node: a replica
    that cannot apply a committed record must not fork from the others."""

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        """`batches` are committed: apply them (on the loop thread)."""

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        """Replace the state with the snapshot's: at registration when the log
        starts after a snapshot, and when a snapshot fetched from the leader is
        installed (then in a worker thread, while nothing else is delivered)."""

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        """A new leader (or none) is known in `leader.epoch` (on the loop thread)."""


class RaftClient(Protocol):
    @property
    def node_id(self) -> int: ...

    async def propose(self, records: list[bytes]) -> ProposeResult:
        """Append `records` as one batch; returns once they are committed. Raises
        `NotLeaderError` (with the leader's id) or `ProposalFailed`."""
        ...

    def leader_and_epoch(self) -> LeaderAndEpoch: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def leader_committed_epoch(self) -> bool:
        """This node leads and its epoch's first record has committed, so every
        earlier entry is committed: only then may it accept writes."""
        ...

    def read_committed(self, offset: int, max_records: int) -> Sequence[Batch]:
        """Whole batches from the one holding `offset`, none past the high
        watermark (the last one may be cut at it); empty below the log start."""
        ...

    def latest_snapshot(self) -> SnapshotId | None: ...

    def create_snapshot(
        self, end_offset: int, capture: Callable[[], Iterable[SnapshotRecord]]
    ) -> Awaitable[bool] | None:
        """Snapshot the listener's state as of `end_offset` (all of it applied):
        `capture` runs at once, on the loop, so later commits cannot leak in; the
        writing happens off the loop. None when no snapshot can be taken there
        (the epoch of `end_offset - 1` is unknown); else an awaitable that is
        True once the snapshot is published (older ones beyond retention are
        dropped and the log may be truncated before it), False if it failed."""
        ...

    def register(self, listener: RaftListener) -> None:
        """Deliver to `listener` from the log's start: the snapshot the log starts
        after first (at once), then every committed batch."""
        ...
