"""The KIP-595 protocol as plain immutable values.

Every message carries the sender's epoch. Responses carry an error code rather
than raising: errors are protocol values. The transport adds the cluster id and
rejects foreign clusters before a message ever reaches the core.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from quorum.raft.records import Batch, OffsetAndEpoch, SnapshotId

# Epochs travel as int32. A node never enters an epoch whose successor would not
# fit, so it can always still start an election; the edge refuses anything above.
MAX_EPOCH = 2**31 - 2


class ErrorCode(Enum):
    """Kafka's error names for the conditions the quorum protocol can report."""

    NONE = 0
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 59
    NOT_LEADER_OR_FOLLOWER = 6
    INCONSISTENT_VOTER_SET = 94
    INCONSISTENT_CLUSTER_ID = 104
    INVALID_REQUEST = 42
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    BROKER_NOT_AVAILABLE = 8
    INVALID_RECORD = 87
    REQUEST_TIMED_OUT = 7
    UNSUPPORTED_VERSION = 35
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A (pre-)vote request. For a pre-vote, `candidate_epoch` is the epoch the
    prospective candidate would use; nobody changes state because of it."""

    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    epoch: int
    vote_granted: bool
    leader_id: int | None
    pre_vote: bool
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    epoch: int
    leader_id: int | None
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """Sent by a resigning leader; the first preferred successor may start at once."""

    leader_epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    epoch: int
    leader_id: int | None
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """Pull replication. `fetch_offset` is the follower's durable log end.

    `known_high_watermark` lets the leader park the fetch (long-poll) until it has
    something new for this follower: records or a higher high watermark.
    """

    replica_id: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    known_high_watermark: int
    # KIP-853: the fetching replica's directory id ("" unknown); a voter's fetch
    # counts only from the directory the voter set names.
    replica_directory_id: str = ""


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Exactly one of `batches`, `diverging_epoch` or `snapshot_id` is meaningful."""

    epoch: int
    leader_id: int | None
    high_watermark: int
    log_start_offset: int
    batches: tuple[Batch, ...] = ()
    diverging_epoch: OffsetAndEpoch | None = None
    snapshot_id: SnapshotId | None = None
    error: ErrorCode = ErrorCode.NONE


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
)

RESPONSE_TYPES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse)
