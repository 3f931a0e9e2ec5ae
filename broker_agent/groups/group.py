"""One classic group's data: its members (in join order), its generation, its
protocol and its committed offsets, and seed 002's protocol vote."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker_agent.groups.state import GroupState, check_transition


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Broker settings of the coordinator (Kafka's names and defaults)."""

    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    max_metadata_bytes: int = 1024 * 1024  # one member's protocol metadata, at most


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    heartbeat_deadline: int = 0

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass(frozen=True, slots=True)
class OffsetEntry:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # join order: use add/remove
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending: dict[str, int] = field(default_factory=dict)  # MEMBER_ID_REQUIRED: deadline
    pending_sync: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, int], OffsetEntry] = field(default_factory=dict)
    state_timestamp: int = 0
    join_deadline: int = 0  # rebalance.timeout.ms bounds the join phase
    delay_until: int = 0  # group.initial.rebalance.delay.ms for a group that was empty
    sync_deadline: int = 0
    rebalance_started: int = 0
    # How many members support each protocol (Kafka's supportedProtocols), kept by
    # add/remove/set_protocols, so a join checks the group's protocols in O(1), not
    # by a pass over every member (quadratic in a 500-member rebalance).
    protocol_support: dict[str, int] = field(default_factory=dict)

    def add(self, member: Member) -> None:
        self.members[member.member_id] = member
        self._count(member.protocols, 1)

    def remove(self, member_id: str) -> Member:
        member = self.members.pop(member_id)
        self._count(member.protocols, -1)
        return member

    def set_protocols(self, member: Member, protocols: list[tuple[str, bytes]]) -> None:
        self._count(member.protocols, -1)
        member.protocols = protocols
        self._count(protocols, 1)

    def _count(self, protocols: list[tuple[str, bytes]], step: int) -> None:
        for name, _ in protocols:
            left = self.protocol_support.get(name, 0) + step
            if left:
                self.protocol_support[name] = left
            else:
                del self.protocol_support[name]

    def transition(self, target: GroupState, now: int) -> None:
        check_transition(self.state, target)
        self.state = target
        self.state_timestamp = now

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        everyone = len(self.members)
        return {name for name, count in self.protocol_support.items() if count == everyone}

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and any(
            name in self.candidate_protocols() for name, _ in protocols
        )

    def all_joined(self) -> bool:
        return not self.pending and all(m.awaiting_join for m in self.members.values())

    def choose_leader(self) -> None:
        """Seed 002: the first member leads; when it goes, the first remaining one."""
        if self.leader not in self.members:
            self.leader = next(iter(self.members), None)


def elect_protocol(group: Group) -> str:
    """Seed 002's vote: the candidates are the protocols every member supports; each
    member votes for the first candidate in its own preference order; the most votes
    win (ties go to the one the leader prefers: Kafka's tie-break is a hash map's
    order, i.e. unspecified)."""
    candidates = group.candidate_protocols()
    votes: dict[str, int] = {}
    for m in group.members.values():
        choice = next(name for name in m.protocol_names() if name in candidates)
        votes[choice] = votes.get(choice, 0) + 1
    leader = group.members.get(group.leader) if group.leader is not None else None
    order = leader.protocol_names() if leader else sorted(candidates)
    return max(votes, key=lambda name: (votes[name], -order.index(name)))
