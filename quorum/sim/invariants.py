"""Safety checkers, run after every simulated event.

Each checker holds the history it needs and raises `InvariantViolation` the
moment the property breaks. They know nothing about the simulator, so the tests
can also feed them planted bad histories directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class InvariantViolation(AssertionError):
    pass


@dataclass
class SingleLeaderPerEpoch:
    """At most one leader per epoch, ever."""

    leaders: dict[int, int] = field(default_factory=dict)

    def on_leader(self, node: int, epoch: int) -> None:
        other = self.leaders.setdefault(epoch, node)
        if other != node:
            raise InvariantViolation(f"two leaders in epoch {epoch}: {other} and {node}")


@dataclass
class MonotonicEpoch:
    """A node's epoch never goes back, across restarts included."""

    epochs: dict[int, int] = field(default_factory=dict)

    def on_epoch(self, node: int, epoch: int) -> None:
        before = self.epochs.get(node, 0)
        if epoch < before:
            raise InvariantViolation(f"node {node} epoch went back from {before} to {epoch}")
        self.epochs[node] = epoch


@dataclass
class MonotonicHighWatermark:
    """A running node's high watermark never goes back."""

    marks: dict[tuple[int, int], int] = field(default_factory=dict)

    def on_high_watermark(self, node: int, incarnation: int, high_watermark: int) -> None:
        key = (node, incarnation)
        before = self.marks.get(key, 0)
        if high_watermark < before:
            raise InvariantViolation(
                f"node {node} high watermark went back from {before} to {high_watermark}"
            )
        self.marks[key] = high_watermark


@dataclass
class CommittedAgreement:
    """No divergence below the high watermark: every node that commits offset N
    commits the same (epoch, record) there."""

    committed: dict[int, tuple[int, bytes]] = field(default_factory=dict)

    def on_commit(self, node: int, offset: int, epoch: int, record: bytes) -> None:
        entry = (epoch, record)
        seen = self.committed.setdefault(offset, entry)
        if seen != entry:
            raise InvariantViolation(
                f"node {node} committed {entry!r} at offset {offset}, others committed {seen!r}"
            )

    def on_truncate(self, node: int, end_offset: int, high_watermark: int) -> None:
        if end_offset < high_watermark:
            raise InvariantViolation(
                f"node {node} truncated to {end_offset} below its high watermark {high_watermark}"
            )


@dataclass
class AcknowledgedDurability:
    """An acknowledged proposal is never lost: it stays committed at its offset."""

    acked: dict[int, bytes] = field(default_factory=dict)

    def on_ack(self, offset: int, record: bytes) -> None:
        self.acked[offset] = record

    def check_state(self, node: int, applied: dict[int, bytes], applied_end: int) -> None:
        """`applied` is a node's state machine: offset -> record, complete below `applied_end`."""
        for offset, record in self.acked.items():
            if offset >= applied_end:
                continue
            if applied.get(offset) != record:
                raise InvariantViolation(
                    f"acknowledged record at offset {offset} lost on node {node}: "
                    f"expected {record!r}, found {applied.get(offset)!r}"
                )


@dataclass
class SingleVoterChange:
    """At most one uncommitted voter change (KIP-853): when a node appends a
    VotersRecord, no other VotersRecord in its log may lie at or above the
    highest offset ever committed anywhere."""

    commit_frontier: int = 0

    def on_high_watermark(self, high_watermark: int) -> None:
        self.commit_frontier = max(self.commit_frontier, high_watermark)

    def on_voters_appended(self, node: int, offset: int, log_voters_offsets: list[int]) -> None:
        """`log_voters_offsets`: where the node's log holds VotersRecords now."""
        earlier = [o for o in log_voters_offsets if self.commit_frontier <= o < offset]
        if earlier:
            raise InvariantViolation(
                f"node {node} appended a voter change at {offset} while the one at "
                f"{earlier[-1]} is uncommitted (committed below {self.commit_frontier})"
            )


@dataclass
class VoterChangeQuorum:
    """A voter change is committed by a majority of the new voter set: when a
    VotersRecord first commits, a majority of the set it names holds it durably."""

    checked: set[int] = field(default_factory=set)

    def on_voters_committed(
        self, offset: int, new_voters: frozenset[int], holders: set[int]
    ) -> None:
        if offset in self.checked:
            return
        self.checked.add(offset)
        have = holders & new_voters
        if len(have) < len(new_voters) // 2 + 1:
            raise InvariantViolation(
                f"the voter change at {offset} to {sorted(new_voters)} committed while only "
                f"{sorted(have)} of the new set stored it"
            )


@dataclass
class Invariants:
    leaders: SingleLeaderPerEpoch = field(default_factory=SingleLeaderPerEpoch)
    epochs: MonotonicEpoch = field(default_factory=MonotonicEpoch)
    high_watermarks: MonotonicHighWatermark = field(default_factory=MonotonicHighWatermark)
    agreement: CommittedAgreement = field(default_factory=CommittedAgreement)
    durability: AcknowledgedDurability = field(default_factory=AcknowledgedDurability)
    voter_change: SingleVoterChange = field(default_factory=SingleVoterChange)
    voter_quorum: VoterChangeQuorum = field(default_factory=VoterChangeQuorum)
