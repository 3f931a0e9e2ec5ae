"""What the group machine hands back: answers, completions of parked requests,
and writes to `__consumer_offsets` that must be stored before what follows them
is sent."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker_agent.groups.group import OffsetEntry

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1

# --------------------------------------------------------------- the answers


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation: int = NO_GENERATION
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # the leader's only
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncAnswer:
    error: ErrorCode
    protocol_type: str | None = None
    protocol: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class Completed:
    """The answer of a parked JoinGroup ("join") or SyncGroup ("sync")."""

    group_id: str
    member_id: str
    kind: str
    answer: JoinAnswer | SyncAnswer


@dataclass(frozen=True, slots=True)
class Write:
    """Records to store in the group's offsets partition; `then` is delivered once
    they are; if the write fails, `then` goes out with COORDINATOR_NOT_AVAILABLE
    and `on_failure` (if any) is reported back through `store_failed`."""

    group_id: str
    records: tuple[tuple[bytes, bytes | None], ...]
    then: tuple[Completed, ...] = ()
    generation: int | None = None  # set for a SyncGroup's assignment write


Effect = Completed | Write


class _Parked:
    def __repr__(self) -> str:
        return "PARKED"


PARKED = _Parked()


@dataclass(frozen=True, slots=True)
class Outcome:
    """An immediate answer, or PARKED (then `parked_member` names the member
    whose answer arrives in a `Completed`), and the effects of the call."""

    answer: object
    effects: tuple[Effect, ...] = ()
    parked_member: str = ""


@dataclass(frozen=True, slots=True)
class CommitPlan:
    """OffsetCommit validated: a group-level error, per-partition errors, and the
    records to write; `apply` the accepted offsets once they are written."""

    error: ErrorCode
    partition_errors: dict[tuple[str, int], ErrorCode]
    records: tuple[tuple[bytes, bytes | None], ...]
    accepted: dict[tuple[str, int], OffsetEntry]


def new_member_id(client_id: str) -> str:
    """Seed 002: `clientId + "-" + UUID.randomUUID()`."""
    return f"{client_id}-{uuid.uuid4()}"
