"""The seam between the metadata controller and Raft (Kafka's `RaftClient` and
`RaftClient.Listener`).

The controller needs little of Raft: propose records and learn when they
committed, who leads in which epoch, the high watermark, the committed batches
after an offset (for brokers' MetadataFetch), the newest snapshot, and to be
told when commits, snapshot loads and leadership changes happen. Everything
else (the core's roles, the log's uncommitted tail, fetch sessions) stays behind
this seam, so the controller can be tested against a fake and the driver can
change without the controller noticing. `quorum.server.driver.RaftDriver`
implements it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from quorum.raft.config import ProposeResult
from quorum.raft.records import Batch, SnapshotId

__all__ = [
    "LeaderAndEpoch",
    "ProposalFailed",
    "ProposalOutcomeUnknown",
    "RaftClient",
    "RaftListener",
]


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


class RaftListener(Protocol):
    """What a Raft client tells the state machine above it, on the loop thread."""

    def handle_commit(self, high_watermark: int) -> None:
        """Everything below `high_watermark` is committed (and applied to the image)."""

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        """A new leader (or none) is known in `leader.epoch`."""


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

    def register(self, listener: RaftListener) -> None: ...
