"""One class per role, as Kafka's `EpochState`s: each holds only what its role needs.

A node holds exactly one of these at a time. Entering a role builds a fresh
object, so nothing of the previous role can leak into the next one (a former
leader's parked fetches, a former candidate's votes): the transition *is* the
reset. Every state knows its epoch, its vote and leader in that epoch (the
quorum state that is persisted) and its `deadline`, the local time at which its
role's timer fires; what that timer means is said on each class.

The objects are mutable bookkeeping for the role's lifetime; which roles may
follow which is in `quorum/raft/transitions.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from quorum.raft.effects import Role
from quorum.raft.majority import majority_size
from quorum.raft.progress import ParkedFetch, ReplicaProgress

NEVER = -(2**62)
"""A time long before any event: "never heard from"."""


@dataclass(slots=True)
class EpochState:
    epoch: int
    voted_for: int | None
    leader_id: int | None
    deadline: int

    role: ClassVar[Role]


@dataclass(slots=True)
class UnattachedState(EpochState):
    """No leader known in this epoch (a vote cast in it binds, though).

    `deadline` is the election timer. An observer, which never runs for
    election, asks a voter who leads instead (`fetch_sent_at`).
    """

    role: ClassVar[Role] = Role.UNATTACHED
    fetch_sent_at: int | None = None


@dataclass(slots=True)
class Votes:
    """The answers a (pre-)election has collected; this node grants itself."""

    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    def record(self, voter: int, granted: bool) -> None:
        (self.granted if granted else self.rejected).add(voter)

    def won(self, voter_count: int, voters: frozenset[int] | None = None) -> bool:
        """`voters`, when given, is the set whose votes count (the rest are ignored)."""
        granted = self.granted if voters is None else self.granted & voters
        return len(granted) >= majority_size(voter_count)

    def lost(self, voter_count: int, voters: frozenset[int] | None = None) -> bool:
        """So many refused that a majority can no longer be reached."""
        rejected = self.rejected if voters is None else self.rejected & voters
        return len(rejected) > voter_count - majority_size(voter_count)


@dataclass(slots=True)
class ProspectiveState(EpochState):
    """Asking for pre-votes at epoch+1 without leaving this epoch (KIP-996).

    It keeps the leader it knew, so a refused pre-vote round goes back to it.
    `deadline` ends the round.
    """

    role: ClassVar[Role] = Role.PROSPECTIVE
    votes: Votes = field(default_factory=Votes)


@dataclass(slots=True)
class CandidateState(EpochState):
    """Asking for real votes in its own epoch, having voted for itself.

    `deadline` ends the election: it then pre-votes again rather than bumping
    the epoch once more.
    """

    role: ClassVar[Role] = Role.CANDIDATE
    votes: Votes = field(default_factory=Votes)


@dataclass(slots=True)
class FollowerState(EpochState):
    """Fetching from a known leader.

    `deadline` is the fetch timeout: with no answer from the leader by then,
    a voter starts a pre-vote and an observer looks for the leader again.
    `last_leader_contact` decides whether the leader is live (whether this node
    refuses pre-votes). One fetch is outstanding at a time (`fetch_sent_at`),
    and none while appended records wait for their flush (`awaiting_flush`),
    since the fetch offset must be durable.
    """

    role: ClassVar[Role] = Role.FOLLOWER
    last_leader_contact: int = NEVER
    fetch_sent_at: int | None = None
    awaiting_flush: bool = False

    def leader_is_live(self, now: int, fetch_timeout_ms: int) -> bool:
        return now - self.last_leader_contact < fetch_timeout_ms


@dataclass(slots=True)
class LeaderState(EpochState):
    """Leading its epoch: replica progress, parked fetches and queued proposals.

    `deadline` paces the leader's own checks (parked fetches, check-quorum).
    `epoch_start_offset` is where its LeaderChange record sits: the high
    watermark may not move until that record is committed (KIP-595).
    """

    role: ClassVar[Role] = Role.LEADER
    epoch_start_offset: int = 0
    became_leader_at: int = 0
    begin_retry_at: int = 0
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    pending: list[bytes] = field(default_factory=list)
    pending_sizes: list[int] = field(default_factory=list)  # records per proposal
    pending_since: int = 0

    def live_voters(self, voters: frozenset[int], horizon: int, counting_self: bool = True) -> int:
        """Voters (itself included, unless a voter change removed it) whose last
        fetch came at or after `horizon`."""
        return int(counting_self) + sum(
            1
            for v, p in self.progress.items()
            if v in voters and p.last_fetch_ms is not None and p.last_fetch_ms >= horizon
        )

    def successors(self, voters: frozenset[int]) -> tuple[int, ...]:
        """Voters most caught up first: the order EndQuorumEpoch names them in."""
        ranked = sorted(
            ((v, p) for v, p in self.progress.items() if v in voters),
            key=lambda item: (-item[1].end_offset, item[0]),
        )
        return tuple(v for v, _ in ranked)


@dataclass(slots=True)
class ResignedState(EpochState):
    """Led this epoch and stepped down (or restarted): it may not lead it again.

    `deadline` is the election timer; voters named in its EndQuorumEpoch
    normally elect a successor first.
    """

    role: ClassVar[Role] = Role.RESIGNED
