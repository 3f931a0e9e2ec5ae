"""Replica placement: leaders and replicas spread evenly; racks honoured."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.replica_placement import BrokerInfo, place_replicas, validate_assignment


@pytest.mark.parametrize("brokers,rf", [(3, 3), (5, 3), (6, 2), (7, 3), (4, 1)])
def test_one_topic_spreads_leaders_and_replicas_within_one(brokers: int, rf: int) -> None:
    ids = [BrokerInfo(b) for b in range(1, brokers + 1)]
    rng = random.Random(brokers * 10 + rf)
    for partitions in (brokers, 2 * brokers, 3 * brokers + 1):
        placed = place_replicas(partitions, rf, ids, rng)
        leaders = Counter(r[0] for r in placed)
        replicas = Counter(b for r in placed for b in r)
        assert all(len(set(r)) == rf for r in placed)
        assert max(leaders.values()) - min(leaders[b.broker_id] for b in ids) <= 1
        assert max(replicas.values()) - min(replicas[b.broker_id] for b in ids) <= 1


def test_many_topics_spread_leadership_over_every_broker() -> None:
    ids = [BrokerInfo(b) for b in range(1, 6)]
    rng = random.Random(7)
    leaders: Counter[int] = Counter()
    for _ in range(200):
        leaders.update(r[0] for r in place_replicas(5, 3, ids, rng))
    assert set(leaders) == {1, 2, 3, 4, 5}
    assert max(leaders.values()) - min(leaders.values()) <= 5  # exact per topic: 200 each


def test_racks_are_spread_before_any_repeats() -> None:
    ids = [BrokerInfo(1, "a"), BrokerInfo(2, "a"), BrokerInfo(3, "b"), BrokerInfo(4, "b"),
           BrokerInfo(5, "c"), BrokerInfo(6, "c")]  # fmt: skip
    rack = {b.broker_id: b.rack for b in ids}
    for seed in range(20):
        for replicas in place_replicas(12, 3, ids, random.Random(seed)):
            assert len({rack[b] for b in replicas}) == 3
        for replicas in place_replicas(12, 2, ids, random.Random(seed)):
            assert len({rack[b] for b in replicas}) == 2


def test_placement_refuses_what_cannot_be_placed() -> None:
    ids = [BrokerInfo(1), BrokerInfo(2)]
    rng = random.Random(0)
    cases = [
        ((1, 3, ids), ApiError.INVALID_REPLICATION_FACTOR),
        ((0, 1, ids), ApiError.INVALID_PARTITIONS),
        ((1, 0, ids), ApiError.INVALID_REPLICATION_FACTOR),
        ((1, 1, [BrokerInfo(1, "a"), BrokerInfo(2)]), ApiError.INVALID_REPLICA_ASSIGNMENT),
    ]
    for args, error in cases:  # fmt: skip
        with pytest.raises(ControllerError) as caught:
            place_replicas(*args, rng)  # type: ignore[arg-type]
        assert caught.value.error is error


@pytest.mark.parametrize(
    "assignment",
    [{}, {1: (1, 2)}, {0: (1, 2), 1: (1,)}, {0: (1, 1)}, {0: (1, 9)}, {0: ()}],
)
def test_explicit_assignments_are_validated(assignment: dict[int, tuple[int, ...]]) -> None:
    with pytest.raises(ControllerError) as caught:
        validate_assignment(assignment, {1, 2, 3})
    assert caught.value.error is ApiError.INVALID_REPLICA_ASSIGNMENT


def test_a_valid_explicit_assignment_passes() -> None:
    validate_assignment({0: (1, 2), 1: (2, 3), 2: (3, 1)}, {1, 2, 3})
    validate_assignment({4: (1, 2)}, {1, 2}, first_partition=4)
