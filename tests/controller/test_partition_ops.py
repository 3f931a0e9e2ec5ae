"""Leader elections, ISR changes and leadership moves (quorum/controller/partition_ops.py).

The image is built by records; each builder's PartitionChange records are
committed and the partition's leader, ISR and epochs read back: a leader change
bumps the leader epoch, every change bumps the partition epoch.
"""

from __future__ import annotations

import pytest
from image_scenario import CLUSTER, TOPIC, Scenario, epochs, error_of, kinds, leader_isr

from quorum.controller.api_errors import ApiError
from quorum.controller.partition_ops import (
    build_alter_partition,
    build_elect_leaders,
    build_rebalance,
    leads_anything,
    moves_for_available_broker,
    moves_for_shutdown,
    moves_for_unavailable_broker,
)
from quorum.controller.record_codec import wrap
from quorum.controller.topic_ops import acceptable_leader, describe_topics
from quorum.gen import admin_pb2 as api
from quorum.gen import metadata_pb2 as md


def elect(
    s: Scenario, election: int = api.PREFERRED, **partitions: list[int]
) -> tuple[int, list[tuple[str, int, ApiError, int]]]:
    """ElectLeaders for `topic=[partitions]` (none: every partition); commits.
    Returns (records written, [(topic, partition, error, leader)])."""
    request = api.ElectLeadersRequest(election_type=election)  # type: ignore[arg-type]
    for name, pids in partitions.items():
        request.partitions.add(topic=name, partitions=pids)
    records, response = build_elect_leaders(s.image, request)
    assert set(kinds(records)) <= {"partition_change"}
    s.commit(records)
    return len(records), [(r.topic, r.partition, error_of(r), r.leader) for r in response.results]


def start_shutdown(s: Scenario, broker_id: int) -> None:
    epoch = s.image.brokers[broker_id].broker_epoch
    change = md.BrokerRegistrationChangeRecord(
        broker_id=broker_id, broker_epoch=epoch, in_controlled_shutdown=True
    )
    s.commit([wrap(broker_registration_change=change)])


def fenced_by(s: Scenario, broker: int) -> list[md.MetadataRecord]:
    """The partition moves for fencing `broker`, as the registry computes them."""
    ok = acceptable_leader(s.image)
    return moves_for_unavailable_broker(s.image, broker, lambda b: b != broker and ok(b))


# ------------------------------------------------------ preferred elections


def test_a_preferred_election_moves_leadership_back_and_bumps_both_epochs() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]], leaders=[2])
    written, results = elect(s, orders=[0])
    assert (written, results) == (1, [("orders", 0, ApiError.NONE, 1)])
    assert leader_isr(s.part("orders")) == (1, (1, 2, 3))
    assert epochs(s.part("orders")) == (1, 1)


def test_a_preferred_election_that_is_not_needed_writes_nothing() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2]])
    written, results = elect(s, orders=[0])
    assert (written, results) == (0, [("orders", 0, ApiError.ELECTION_NOT_NEEDED, 1)])
    assert epochs(s.part("orders")) == (0, 0)


@pytest.mark.parametrize("why", ["fenced", "out of the ISR", "shutting down"])
def test_the_preferred_replica_must_be_live_and_in_sync(why: str) -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    isr = [[2, 3]] if why == "out of the ISR" else [[1, 2, 3]]
    s.topic("orders", [[1, 2, 3]], isr=isr, leaders=[2])
    if why == "fenced":
        s.fence(1)
    elif why == "shutting down":
        start_shutdown(s, 1)
    written, results = elect(s, orders=[0])
    assert (written, results) == (0, [("orders", 0, ApiError.PREFERRED_LEADER_NOT_AVAILABLE, 2)])
    assert s.part("orders").leader == 2


def test_an_empty_request_elects_over_every_partition_in_name_order() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("zeta", [[1, 2], [2, 1]], leaders=[2, 2])
    s.topic("alpha", [[2, 1]], leaders=[1])
    written, results = elect(s)
    assert written == 2
    assert results == [
        ("alpha", 0, ApiError.NONE, 2),
        ("zeta", 0, ApiError.NONE, 1),
        ("zeta", 1, ApiError.ELECTION_NOT_NEEDED, 2),
    ]
    assert [s.part("zeta", 0).leader, s.part("alpha").leader] == [1, 2]


def test_a_topic_without_partitions_listed_means_all_of_its_partitions() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2], [2, 1], [1, 2]], leaders=[2, 1, 2])
    written, results = elect(s, orders=[])
    assert written == 3 and [r[3] for r in results] == [1, 2, 1]


def test_unknown_topics_and_partitions_are_answered_per_partition() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2]], leaders=[2])
    written, results = elect(s, orders=[0, 7], nope=[])
    assert written == 1
    assert [(t, p, e) for t, p, e, _ in results] == [
        ("orders", 0, ApiError.NONE),
        ("orders", 7, ApiError.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", 0, ApiError.UNKNOWN_TOPIC_OR_PARTITION),
    ]


# -------------------------------------------------------- unclean elections


def offline_after_isr_shrank_to(s: Scenario, isr: list[int]) -> None:
    """orders-0 on [1, 2, 3] with only `isr` in sync, each of which is fenced:
    the partition went offline and kept its last ISR."""
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]], isr=[isr], leaders=[-1])
    for broker in isr:
        s.fence(broker)


def test_an_unclean_election_makes_a_live_replica_outside_the_isr_the_leader() -> None:
    s = Scenario()
    offline_after_isr_shrank_to(s, [1])
    written, results = elect(s, api.UNCLEAN, orders=[0])
    assert (written, results) == (1, [("orders", 0, ApiError.NONE, 2)])
    assert leader_isr(s.part("orders")) == (2, (2,))
    assert epochs(s.part("orders")) == (1, 1)


def test_an_unclean_election_prefers_a_live_isr_member() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]], isr=[[3]], leaders=[-1])
    written, results = elect(s, api.UNCLEAN, orders=[0])
    assert (written, results) == (1, [("orders", 0, ApiError.NONE, 3)])
    assert leader_isr(s.part("orders")) == (3, (3,))
    assert epochs(s.part("orders")) == (1, 1)


def test_an_unclean_election_is_not_needed_while_the_leader_is_live() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2]], isr=[[1]])
    written, results = elect(s, api.UNCLEAN, orders=[0])
    assert (written, results) == (0, [("orders", 0, ApiError.ELECTION_NOT_NEEDED, 1)])


def test_an_unclean_election_with_no_live_replica_fails() -> None:
    s = Scenario()
    offline_after_isr_shrank_to(s, [1])
    s.fence(2)
    s.fence(3)
    written, results = elect(s, api.UNCLEAN, orders=[0])
    assert (written, results) == (
        0,
        [("orders", 0, ApiError.ELIGIBLE_LEADERS_NOT_AVAILABLE, -1)],
    )
    assert leader_isr(s.part("orders")) == (-1, (1,))


def test_after_an_unclean_election_the_partition_is_under_min_isr() -> None:
    s = Scenario()
    offline_after_isr_shrank_to(s, [1])
    s.config(TOPIC, "orders", "min.insync.replicas", "2")
    elect(s, api.UNCLEAN, orders=[0])
    (described,) = describe_topics(s.image, api.DescribeTopicsRequest(names=["orders"])).topics
    assert (described.partitions[0].leader, described.partitions[0].under_min_isr) == (2, True)


# ------------------------------------------- moves when a broker is fenced


def test_fencing_the_leader_elects_the_next_isr_member_and_drops_it_from_the_isr() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3], [2, 3, 1]])
    s.commit(fenced_by(s, 1))
    assert leader_isr(s.part("orders", 0)) == (2, (2, 3))
    assert epochs(s.part("orders", 0)) == (1, 1)
    assert leader_isr(s.part("orders", 1)) == (2, (2, 3))  # a follower: ISR only
    assert epochs(s.part("orders", 1)) == (0, 1)


@pytest.mark.parametrize(
    ("topic_setting", "cluster_setting", "expected"),
    [
        (None, None, (-1, (1,))),  # offline, keeping the last ISR member
        ("true", None, (2, (2,))),  # unclean: the first live replica, alone in the ISR
        (None, "true", (2, (2,))),  # the cluster default applies
        ("false", "true", (-1, (1,))),  # the topic's own setting wins
    ],
)
def test_fencing_the_last_isr_member_follows_unclean_leader_election_enable(
    topic_setting: str | None, cluster_setting: str | None, expected: tuple[int, tuple[int, ...]]
) -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]], isr=[[1]])
    if topic_setting is not None:
        s.config(TOPIC, "orders", "unclean.leader.election.enable", topic_setting)
    if cluster_setting is not None:
        s.config(CLUSTER, "", "unclean.leader.election.enable", cluster_setting)
    s.commit(fenced_by(s, 1))
    assert leader_isr(s.part("orders")) == expected


def test_a_broker_outside_a_partition_changes_nothing_there() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2]])
    assert fenced_by(s, 3) == []


def test_a_returning_broker_leads_the_offline_partitions_whose_isr_it_holds() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2], [2, 1]], isr=[[1], [2]], leaders=[-1, 2])
    ok = acceptable_leader(s.image)
    records = moves_for_available_broker(s.image, 1, ok)
    assert kinds(records) == ["partition_change"]  # orders-1 has a leader already
    s.commit(records)
    assert leader_isr(s.part("orders", 0)) == (1, (1,))
    assert epochs(s.part("orders", 0)) == (1, 1)


# ------------------------------------------------------ controlled shutdown


def shutdown_moves(s: Scenario, broker: int) -> list[md.MetadataRecord]:
    ok = acceptable_leader(s.image)
    return moves_for_shutdown(s.image, broker, lambda b: b != broker and ok(b))


def test_a_shutting_down_leader_hands_over_and_leaves_the_isr() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]])
    s.commit(shutdown_moves(s, 1))
    assert leader_isr(s.part("orders")) == (2, (2, 3))
    assert not leads_anything(s.image, 1)


def test_a_shutting_down_broker_stays_in_an_isr_at_min_insync_replicas() -> None:
    """Removing it would take the ISR below min.insync.replicas; it still hands over."""
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3], [1, 2, 3]], isr=[[1, 2], [1, 2, 3]])
    s.config(TOPIC, "orders", "min.insync.replicas", "2")
    s.commit(shutdown_moves(s, 1))
    assert leader_isr(s.part("orders", 0)) == (2, (1, 2))
    assert leader_isr(s.part("orders", 1)) == (2, (2, 3))


def test_a_shutting_down_sole_isr_member_takes_its_partition_offline() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2]], isr=[[1]])
    s.commit(shutdown_moves(s, 1))
    assert leader_isr(s.part("orders")) == (-1, (1,))
    assert not leads_anything(s.image, 1)


# ----------------------------------------------------------- AlterPartition


def alter(
    s: Scenario,
    broker: int,
    new_isr: list[int],
    name: str = "orders",
    pid: int = 0,
    leader_epoch: int | None = None,
    partition_epoch: int | None = None,
    broker_epoch: int | None = None,
) -> tuple[int, api.AlterPartitionResult]:
    """An AlterPartition from `broker` based on the partition as the image has it
    (unless an epoch is given); commits what it writes."""
    part = s.part(name, pid)
    item = api.AlterPartitionItem(
        topic_id=s.topic_image(name).topic_id,
        partition=pid,
        leader_epoch=part.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=part.partition_epoch if partition_epoch is None else partition_epoch,
        new_isr=new_isr,
    )
    registered = s.image.brokers.get(broker)
    request = api.AlterPartitionRequest(
        broker_id=broker,
        broker_epoch=(registered.broker_epoch if registered else 0)
        if broker_epoch is None
        else broker_epoch,
        partitions=[item],
    )
    records, response = build_alter_partition(s.image, request)
    s.commit(records)
    return len(records), response.results[0]


def test_the_leader_shrinks_and_expands_the_isr_one_partition_epoch_at_a_time() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]])

    written, result = alter(s, 1, [1, 2])
    assert (written, error_of(result)) == (1, ApiError.NONE)
    assert (list(result.isr), result.partition_epoch, result.leader_epoch) == ([1, 2], 1, 0)
    assert leader_isr(s.part("orders")) == (1, (1, 2))
    assert epochs(s.part("orders")) == (0, 1)

    written, result = alter(s, 1, [1, 2, 3])
    assert (written, error_of(result), result.partition_epoch) == (1, ApiError.NONE, 2)
    assert leader_isr(s.part("orders")) == (1, (1, 2, 3))
    assert epochs(s.part("orders")) == (0, 2)


def test_an_unchanged_isr_is_acknowledged_without_a_write() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2]])
    written, result = alter(s, 1, [1, 2])
    assert (written, error_of(result), result.partition_epoch) == (0, ApiError.NONE, 0)


def test_a_change_based_on_an_old_partition_epoch_is_refused_with_the_current_state() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]])
    alter(s, 1, [1, 2])
    written, result = alter(s, 1, [1], partition_epoch=0)
    assert (written, error_of(result)) == (0, ApiError.INVALID_UPDATE_VERSION)
    assert (result.leader, list(result.isr), result.partition_epoch) == (1, [1, 2], 1)
    assert "partition epoch is 1" in result.error.message
    assert leader_isr(s.part("orders")) == (1, (1, 2))


def test_a_deposed_leader_is_refused_and_its_old_epoch_fenced() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]])
    s.commit(fenced_by(s, 1))  # leadership moves to 2, leader epoch 1
    written, result = alter(s, 1, [1, 2, 3], leader_epoch=0, partition_epoch=0)
    assert (written, error_of(result), result.leader) == (0, ApiError.NOT_LEADER_OR_FOLLOWER, 2)
    written, result = alter(s, 2, [2, 3], leader_epoch=0, partition_epoch=1)
    assert (written, error_of(result), result.leader_epoch) == (0, ApiError.FENCED_LEADER_EPOCH, 1)


def test_a_leader_epoch_from_the_future_is_an_invalid_update_version() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2]])
    written, result = alter(s, 1, [1], leader_epoch=5)
    assert (written, error_of(result)) == (0, ApiError.INVALID_UPDATE_VERSION)


@pytest.mark.parametrize(
    ("new_isr", "error"),
    [
        ([], ApiError.INVALID_REQUEST),
        ([2, 3], ApiError.INVALID_REQUEST),  # without the leader
        ([1, 2, 2], ApiError.INVALID_REQUEST),  # a member twice
        ([1, 4], ApiError.INELIGIBLE_REPLICA),  # 4 is live but not a replica
        ([1, 3], ApiError.INELIGIBLE_REPLICA),  # 3 is fenced
    ],
)
def test_an_isr_the_partition_cannot_have_is_refused(new_isr: list[int], error: ApiError) -> None:
    s = Scenario()
    s.brokers(1, 2, 3, 4)
    s.topic("orders", [[1, 2, 3]], isr=[[1, 2]])
    s.fence(3)
    written, result = alter(s, 1, new_isr)
    assert (written, error_of(result)) == (0, error)
    assert leader_isr(s.part("orders")) == (1, (1, 2))


def test_a_broker_in_controlled_shutdown_may_not_rejoin_an_isr() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2]], isr=[[1]])
    start_shutdown(s, 2)
    written, result = alter(s, 1, [1, 2])
    assert (written, error_of(result)) == (0, ApiError.INELIGIBLE_REPLICA)


def test_alter_partition_from_a_stale_or_unknown_broker_is_refused() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2]])
    _, result = alter(s, 1, [1], broker_epoch=s.image.brokers[1].broker_epoch + 1)
    assert error_of(result) is ApiError.STALE_BROKER_EPOCH
    _, result = alter(s, 9, [1])
    assert error_of(result) is ApiError.BROKER_ID_NOT_REGISTERED
    assert leader_isr(s.part("orders")) == (1, (1, 2))


def test_alter_partition_answers_each_partition_on_its_own() -> None:
    s = Scenario()
    s.brokers(1, 2)
    tid = s.topic("orders", [[1, 2], [2, 1]])
    request = api.AlterPartitionRequest(
        broker_id=1,
        broker_epoch=s.image.brokers[1].broker_epoch,
        partitions=[
            api.AlterPartitionItem(topic_id=tid, partition=0, new_isr=[1]),
            api.AlterPartitionItem(topic_id=tid, partition=1, new_isr=[1]),  # 2 leads it
            api.AlterPartitionItem(topic_id=tid, partition=9, new_isr=[1]),
        ],
    )
    records, response = build_alter_partition(s.image, request)
    assert [error_of(r) for r in response.results] == [
        ApiError.NONE,
        ApiError.NOT_LEADER_OR_FOLLOWER,
        ApiError.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    s.commit(records)
    assert (s.part("orders", 0).isr, s.part("orders", 1).isr) == ((1,), (2, 1))


# ---------------------------------------------------------- auto rebalance


def test_rebalance_moves_leadership_back_once_a_brokers_imbalance_passes_the_threshold() -> None:
    s = Scenario()
    s.brokers(1, 2)
    # Broker 1 is preferred for 4 partitions and leads 3: 25% off, above 10%.
    s.topic("orders", [[1, 2]] * 4 + [[2, 1]], leaders=[1, 1, 1, 2, 2])
    records = build_rebalance(s.image)
    s.commit(records)
    assert kinds(records) == ["partition_change"]
    assert [s.part("orders", p).leader for p in range(5)] == [1, 1, 1, 1, 2]


def test_rebalance_respects_the_threshold_and_the_switch() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2]] * 4, leaders=[1, 1, 1, 2])
    s.config(CLUSTER, "", "leader.imbalance.per.broker.percentage", "25")
    assert build_rebalance(s.image) == []  # exactly at the threshold
    s.config(CLUSTER, "", "leader.imbalance.per.broker.percentage", "24")
    assert len(build_rebalance(s.image)) == 1
    s.config(CLUSTER, "", "auto.leader.rebalance.enable", "false")
    assert build_rebalance(s.image) == []


def test_rebalance_leaves_partitions_whose_preferred_replica_cannot_lead() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2], [3, 2]], isr=[[1, 2], [2]], leaders=[2, 2])
    s.fence(1)
    assert build_rebalance(s.image) == []
