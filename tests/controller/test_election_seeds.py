"""The seeds' leader-election scenarios (seed 003), one by one, on the election rules.

Topic with replicas (0, 1), ISR (0, 1), min.insync.replicas=2, replica 0 leads.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from quorum.controller.api_errors import ApiError
from quorum.controller.leader_election import (
    NO_LEADER,
    on_broker_available,
    on_broker_unavailable,
    preferred_election,
    unclean_election,
    under_min_isr,
    validate_alter_partition,
)

MIN_ISR = 2


@dataclass
class Part:
    replicas: tuple[int, ...] = (0, 1)
    isr: tuple[int, ...] = (0, 1)
    leader: int = 0
    leader_epoch: int = 0
    partition_epoch: int = 0


class Brokers:
    """Which brokers are alive; applies the election rules as the controller does."""

    def __init__(self, part: Part, unclean: bool) -> None:
        self.part = part
        self.alive = {0, 1}
        self.unclean = unclean

    def ok(self, broker: int) -> bool:
        return broker in self.alive

    def _apply(self, spec: object) -> None:
        if spec is None:
            return
        leader, isr = spec.leader, spec.isr  # type: ignore[attr-defined]
        if leader is not None and leader != self.part.leader:
            self.part.leader = leader
            self.part.leader_epoch += 1
        if isr is not None:
            self.part.isr = isr
        self.part.partition_epoch += 1

    def crash(self, broker: int) -> None:
        self.alive.discard(broker)
        self._apply(on_broker_unavailable(self.part, broker, self.ok, self.unclean))

    def recover(self, broker: int) -> None:
        self.alive.add(broker)
        self._apply(on_broker_available(self.part, self.ok, self.unclean))


@pytest.fixture
def clean() -> Brokers:
    return Brokers(Part(), unclean=False)


def test_1_replica_0_crashes_then_1_leads_alone_and_writes_stop(clean: Brokers) -> None:
    clean.crash(0)
    assert (clean.part.leader, clean.part.isr) == (1, (1,))
    assert clean.part.leader_epoch == 1
    assert under_min_isr(clean.part.isr, MIN_ISR)  # acks=all writes refused, reads served


def test_1_replica_0_returns_and_the_leader_takes_it_back_via_alter_partition(
    clean: Brokers,
) -> None:
    clean.crash(0)
    clean.recover(0)
    assert clean.part.leader == 1  # a live partition keeps its leader
    part = clean.part
    error = validate_alter_partition(
        part, 1, part.leader_epoch, part.partition_epoch, [1, 0], clean.ok
    )
    assert error is ApiError.NONE


def test_2_then_replica_1_crashes_too_and_the_partition_is_offline(clean: Brokers) -> None:
    clean.crash(0)
    clean.crash(1)
    assert (clean.part.leader, clean.part.isr) == (NO_LEADER, (1,))


def test_2a_replica_0_returns_first_and_stays_out_without_unclean_election(
    clean: Brokers,
) -> None:
    clean.crash(0)
    clean.crash(1)
    clean.recover(0)
    assert clean.part.leader == NO_LEADER  # only the last ISR member, 1, may lead
    assert unclean_election(clean.part, clean.ok)[1] is not None  # the operator's way out


def test_2a_with_unclean_election_replica_0_leads_and_the_isr_is_just_it() -> None:
    dirty = Brokers(Part(), unclean=True)
    dirty.crash(0)
    dirty.crash(1)
    dirty.recover(0)
    assert (dirty.part.leader, dirty.part.isr) == (0, (0,))


def test_2b_replica_1_returns_first_and_leads_again(clean: Brokers) -> None:
    clean.crash(0)
    clean.crash(1)
    clean.recover(1)
    assert (clean.part.leader, clean.part.isr) == (1, (1,))
    assert under_min_isr(clean.part.isr, MIN_ISR)


def test_2c_both_return_and_the_last_isr_member_leads(clean: Brokers) -> None:
    clean.crash(0)
    clean.crash(1)
    clean.recover(0)
    clean.recover(1)
    assert clean.part.leader == 1


def test_3_both_crash_at_once_the_isr_never_empties() -> None:
    """KRaft keeps the last ISR member (the seed's ZooKeeper era kept (0,1))."""
    both = Brokers(Part(), unclean=False)
    both.alive.clear()
    both._apply(on_broker_unavailable(both.part, 0, both.ok, False))
    both._apply(on_broker_unavailable(both.part, 1, both.ok, False))
    assert both.part.leader == NO_LEADER and both.part.isr


def test_every_leader_or_isr_change_bumps_the_partition_epoch(clean: Brokers) -> None:
    clean.crash(0)  # leader and ISR change
    assert (clean.part.leader_epoch, clean.part.partition_epoch) == (1, 1)
    clean.recover(0)  # nothing changes while 1 leads
    assert clean.part.partition_epoch == 1


def test_preferred_election_moves_leadership_back_only_when_possible(clean: Brokers) -> None:
    assert preferred_election(clean.part, clean.ok) == (ApiError.ELECTION_NOT_NEEDED, None)
    clean.crash(0)
    assert preferred_election(clean.part, clean.ok)[0] is ApiError.PREFERRED_LEADER_NOT_AVAILABLE
    clean.recover(0)
    clean.part.isr = (1, 0)  # the leader took 0 back into the ISR
    error, spec = preferred_election(clean.part, clean.ok)
    assert error is ApiError.NONE and spec is not None and spec.leader == 0


def test_alter_partition_refusals_follow_kafkas_order() -> None:
    part = Part(leader_epoch=3, partition_epoch=7)
    live = {0, 1}.__contains__
    assert validate_alter_partition(part, 1, 3, 7, [0, 1], live) is ApiError.NOT_LEADER_OR_FOLLOWER
    assert validate_alter_partition(part, 0, 2, 7, [0, 1], live) is ApiError.FENCED_LEADER_EPOCH
    assert validate_alter_partition(part, 0, 3, 6, [0, 1], live) is ApiError.INVALID_UPDATE_VERSION
    assert validate_alter_partition(part, 0, 3, 7, [1], live) is ApiError.INVALID_REQUEST
    assert validate_alter_partition(part, 0, 3, 7, [0, 5], live) is ApiError.INELIGIBLE_REPLICA
    assert validate_alter_partition(part, 0, 3, 7, [0, 1], {0}.__contains__) is (
        ApiError.INELIGIBLE_REPLICA
    )
    assert validate_alter_partition(part, 0, 3, 7, [0], live) is ApiError.NONE
