"""Partition leader election and ISR changes (the seeds' rules; KIP-631's builder).

The new leader is the first replica in assignment order that is acceptable
(registered, unfenced, not shutting down) and in the ISR. When there is none and
unclean election is allowed, the first acceptable replica outside the ISR leads
and the ISR becomes just that replica (committed data may be lost: the operator
chose availability). Otherwise the partition goes offline (leader -1) and keeps
its last ISR, so the member that held the data can lead again when it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from quorum.controller.api_errors import ApiError

NO_LEADER = -1


class PartitionView(Protocol):
    """Read-only: the rules decide, records change the image."""

    @property
    def replicas(self) -> tuple[int, ...]: ...
    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def partition_epoch(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Election:
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


@dataclass(frozen=True, slots=True)
class ChangeSpec:
    """What a PartitionChange record should set; None fields stay as they are."""

    leader: int | None = None
    isr: tuple[int, ...] | None = None


def elect_leader(
    replicas: Sequence[int],
    isr: Sequence[int],
    acceptable: Callable[[int], bool],
    unclean_allowed: bool,
) -> Election:
    in_sync = set(isr)
    for replica in replicas:
        if replica in in_sync and acceptable(replica):
            return Election(replica, tuple(isr))
    if unclean_allowed:
        for replica in replicas:
            if acceptable(replica):
                return Election(replica, (replica,), unclean=True)
    return Election(NO_LEADER, tuple(isr))


def on_broker_unavailable(
    part: PartitionView,
    broker: int,
    acceptable: Callable[[int], bool],
    unclean_allowed: bool,
) -> ChangeSpec | None:
    """A broker was fenced or is shutting down: drop it from the ISR (never
    emptying it) and, if it led, elect again."""
    if broker not in part.replicas:
        return None
    isr = tuple(r for r in part.isr if r != broker) or part.isr
    if part.leader != broker:
        return ChangeSpec(isr=isr) if isr != part.isr else None
    election = elect_leader(part.replicas, isr, acceptable, unclean_allowed)
    return _spec(part, election.leader, election.isr)


def on_broker_available(
    part: PartitionView, acceptable: Callable[[int], bool], unclean_allowed: bool
) -> ChangeSpec | None:
    """A broker came back: an offline partition gets a leader if one is eligible."""
    if part.leader != NO_LEADER:
        return None
    election = elect_leader(part.replicas, part.isr, acceptable, unclean_allowed)
    if election.leader == NO_LEADER:
        return None
    return _spec(part, election.leader, election.isr)


def preferred_election(
    part: PartitionView, acceptable: Callable[[int], bool]
) -> tuple[ApiError, ChangeSpec | None]:
    preferred = part.replicas[0]
    if part.leader == preferred:
        return ApiError.ELECTION_NOT_NEEDED, None
    if preferred not in part.isr or not acceptable(preferred):
        return ApiError.PREFERRED_LEADER_NOT_AVAILABLE, None
    return ApiError.NONE, ChangeSpec(leader=preferred)


def unclean_election(
    part: PartitionView, acceptable: Callable[[int], bool]
) -> tuple[ApiError, ChangeSpec | None]:
    """Explicit ElectLeaders(UNCLEAN): only when no ISR member can lead."""
    if part.leader != NO_LEADER and acceptable(part.leader):
        return ApiError.ELECTION_NOT_NEEDED, None
    election = elect_leader(part.replicas, part.isr, acceptable, unclean_allowed=True)
    if election.leader == NO_LEADER:
        return ApiError.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
    return ApiError.NONE, _spec(part, election.leader, election.isr)


def validate_alter_partition(
    part: PartitionView,
    requester: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: Sequence[int],
    eligible_for_isr: Callable[[int], bool],
) -> ApiError:
    """Kafka's order of checks for an ISR change proposed by a partition leader."""
    if requester != part.leader:
        return ApiError.NOT_LEADER_OR_FOLLOWER
    if leader_epoch < part.leader_epoch:
        return ApiError.FENCED_LEADER_EPOCH
    if partition_epoch != part.partition_epoch or leader_epoch > part.leader_epoch:
        return ApiError.INVALID_UPDATE_VERSION
    if not new_isr or part.leader not in new_isr or len(set(new_isr)) != len(new_isr):
        return ApiError.INVALID_REQUEST
    if any(r not in part.replicas or not eligible_for_isr(r) for r in new_isr):
        return ApiError.INELIGIBLE_REPLICA
    return ApiError.NONE


def under_min_isr(isr: Sequence[int], min_isr: int) -> bool:
    return len(isr) < min_isr


def _spec(part: PartitionView, leader: int, isr: tuple[int, ...]) -> ChangeSpec | None:
    new_leader = leader if leader != part.leader else None
    new_isr = isr if isr != part.isr else None
    if new_leader is None and new_isr is None:
        return None
    return ChangeSpec(new_leader, new_isr)
