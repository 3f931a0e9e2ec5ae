"""What the core asks its driver to do, in order.

The driver executes effects in list order. `PersistQuorumState` and `TruncateLog`
must be durable before the driver goes on to the next effect: a vote or a message
of a new epoch is only ever sent after the epoch and vote are on disk.
`FlushLog` may run off the event loop; the driver reports completion through
`RaftNode.on_flushed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from quorum.raft.messages import Message
from quorum.raft.records import Batch, SnapshotId


class Role(Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(frozen=True, slots=True)
class PersistQuorumState:
    epoch: int
    voted_for: int | None
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class AppendBatches:
    """Write these batches at the log end; durability comes with the next FlushLog."""

    batches: tuple[Batch, ...]


@dataclass(frozen=True, slots=True)
class TruncateLog:
    """Remove every entry at or above `end_offset` (diverging-epoch truncation)."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class AdvanceLogStart:
    """A snapshot covers everything below `snapshot_id.end_offset`: drop that prefix."""

    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class ResetLog:
    """Replace the whole log with an empty one that starts after `snapshot_id`."""

    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class FlushLog:
    """Make the log durable up to `end_offset`, then call `on_flushed(end_offset, generation)`.

    `generation` changes whenever the log is truncated, so a flush that completes
    after a truncation cannot vouch for entries written after it.
    """

    end_offset: int
    generation: int


@dataclass(frozen=True, slots=True)
class SendMessage:
    destination: int
    message: Message


@dataclass(frozen=True, slots=True)
class HighWatermarkChanged:
    """Entries below `high_watermark` are committed and may be applied."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class RoleChanged:
    role: Role
    epoch: int
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class FetchSnapshot:
    """The leader no longer has our fetch offset: download this snapshot from it,
    then call `on_snapshot_installed`."""

    leader_id: int
    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class RequestRefused:
    """The core refused a request that would have moved this node to an epoch too
    far ahead of its own log (`RaftConfig.max_epoch_jump`): the answer carries
    INVALID_REQUEST; the driver logs the reason and counts it. `kind` is the
    counter's reason label: `epoch_jump`, or `malformed_record` for a fetch
    answer holding a VotersRecord that does not decode (nothing of it is kept)."""

    source: int
    request: str
    reason: str
    kind: str = "epoch_jump"


Effect = (
    PersistQuorumState
    | AppendBatches
    | TruncateLog
    | AdvanceLogStart
    | ResetLog
    | FlushLog
    | SendMessage
    | HighWatermarkChanged
    | RoleChanged
    | FetchSnapshot
    | RequestRefused
)
