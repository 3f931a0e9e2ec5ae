"""Topic writes (quorum/controller/topic_ops.py) against an in-memory image.

Each test registers brokers by record, asks a builder, commits the records it
returned and checks the image, or checks the per-topic error and that nothing
was written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from image_scenario import CLUSTER, Scenario, epochs, error_of, kinds

from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.request_limits import RequestLimits
from quorum.controller.topic_ops import (
    CollisionWarnings,
    build_create_partitions,
    build_create_topics,
    build_delete_topics,
    describe_topics,
    list_topics,
)
from quorum.gen import admin_pb2 as api


def create(
    s: Scenario, *topics: api.CreatableTopic, validate_only: bool = False
) -> tuple[int, api.CreateTopicsResponse]:
    """Build CreateTopics, commit its records; (records written, response)."""
    records, response = build_create_topics(
        s.image, api.CreateTopicsRequest(topics=topics, validate_only=validate_only), s.rng
    )
    s.commit(records)
    return len(records), response


def new_topic(
    name: str,
    partitions: int | None = None,
    factor: int | None = None,
    assignments: dict[int, list[int]] | None = None,
    configs: dict[str, str] | None = None,
) -> api.CreatableTopic:
    item = api.CreatableTopic(name=name, configs=configs or {})
    if partitions is not None:
        item.num_partitions = partitions
    if factor is not None:
        item.replication_factor = factor
    for pid, brokers in (assignments or {}).items():
        item.assignments.add(partition_index=pid, broker_ids=brokers)
    return item


# -------------------------------------------------------------- create topics


def test_a_new_topic_spreads_replicas_and_leaders_evenly_over_the_brokers() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    written, response = create(s, new_topic("orders", partitions=6, factor=3))

    (result,) = response.topics
    assert error_of(result) is ApiError.NONE
    assert (result.num_partitions, result.replication_factor) == (6, 3)
    topic = s.topic_image("orders")
    assert topic.topic_id == result.topic_id
    assert written == 1 + 6  # one TopicRecord, one PartitionRecord per partition
    assert s.image.partition_count == 6
    parts = [topic.partitions[p] for p in range(6)]
    assert all(sorted(p.replicas) == [1, 2, 3] for p in parts)
    assert all(p.isr == p.replicas and p.leader == p.replicas[0] for p in parts)
    assert all(epochs(p) == (0, 0) for p in parts)
    assert Counter(p.leader for p in parts) == {1: 2, 2: 2, 3: 2}


def test_replicas_span_every_rack_when_brokers_have_racks() -> None:
    s = Scenario()
    for broker, rack in [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]:
        s.broker(broker, rack=rack)
    create(s, new_topic("orders", partitions=12, factor=3))

    rack_of = {b.broker_id: b.rack for b in s.image.brokers.values()}
    for part in s.topic_image("orders").partitions.values():
        assert {rack_of[r] for r in part.replicas} == {"a", "b", "c"}, part.replicas
    leaders = Counter(p.leader for p in s.topic_image("orders").partitions.values())
    assert sorted(leaders.values()) == [2] * 6


def test_brokers_with_and_without_racks_cannot_be_mixed() -> None:
    s = Scenario()
    s.broker(1, rack="a")
    s.broker(2)
    written, response = create(s, new_topic("orders", partitions=1, factor=2))
    assert error_of(response.topics[0]) is ApiError.INVALID_REPLICA_ASSIGNMENT
    assert written == 0 and s.image.topic("orders") is None


def test_an_explicit_assignment_is_taken_as_given() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    _, response = create(s, new_topic("orders", assignments={0: [3, 1], 1: [2, 3]}))
    assert error_of(response.topics[0]) is ApiError.NONE
    assert (response.topics[0].num_partitions, response.topics[0].replication_factor) == (2, 2)
    assert [(p.replicas, p.leader) for p in s.topic_image("orders").partitions.values()] == [
        ((3, 1), 3),
        ((2, 3), 2),
    ]


def test_an_assignment_naming_a_fenced_broker_starts_with_it_out_of_the_isr() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.broker(3, fenced=True)
    create(s, new_topic("orders", assignments={0: [3, 1, 2]}))
    part = s.part("orders")
    assert part.replicas == (3, 1, 2)
    assert (part.leader, part.isr) == (1, (1, 2))


def test_an_assignment_of_only_fenced_brokers_creates_an_offline_partition() -> None:
    s = Scenario()
    s.broker(1)
    s.broker(2, fenced=True)
    create(s, new_topic("orders", assignments={0: [2]}))
    part = s.part("orders")
    assert (part.leader, part.isr) == (-1, (2,))


@pytest.mark.parametrize(
    "assignments",
    [
        {0: [1, 9]},  # broker 9 is not registered
        {0: [1, 1]},  # a broker twice
        {0: [1], 2: [2]},  # partition 1 missing
        {1: [1]},  # does not start at 0
        {0: [1, 2], 1: [2]},  # two replication factors
    ],
)
def test_a_bad_assignment_is_refused_and_creates_nothing(assignments: dict[int, list[int]]) -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    written, response = create(s, new_topic("orders", assignments=assignments))
    assert error_of(response.topics[0]) is ApiError.INVALID_REPLICA_ASSIGNMENT
    assert written == 0 and s.image.topic("orders") is None


def test_an_assignment_with_counts_as_well_is_refused() -> None:
    s = Scenario()
    s.brokers(1, 2)
    _, response = create(s, new_topic("orders", partitions=1, assignments={0: [1, 2]}))
    assert error_of(response.topics[0]) is ApiError.INVALID_REQUEST
    assert s.image.topic("orders") is None


def test_a_partition_assigned_twice_is_refused() -> None:
    s = Scenario()
    s.brokers(1, 2)
    item = new_topic("orders")
    item.assignments.add(partition_index=0, broker_ids=[1])
    item.assignments.add(partition_index=0, broker_ids=[2])
    _, response = create(s, item)
    assert error_of(response.topics[0]) is ApiError.INVALID_REPLICA_ASSIGNMENT


def test_configs_given_at_creation_are_written_with_the_topic() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    configs = {"cleanup.policy": "compact", "min.insync.replicas": "2"}
    written, response = create(s, new_topic("orders", partitions=1, factor=3, configs=configs))
    assert written == 1 + 1 + 2
    assert s.image.config(2, "orders") == configs
    shown = {(c.name, c.value, c.source) for c in response.topics[0].configs}
    assert shown == {
        ("cleanup.policy", "compact", api.DYNAMIC_TOPIC_CONFIG),
        ("min.insync.replicas", "2", api.DYNAMIC_TOPIC_CONFIG),
    }


@pytest.mark.parametrize(
    "configs",
    [
        {"retention.ms": "forever"},
        {"retention.ms": "1_000"},
        {"retention.ms": "-2"},
        {"unclean.leader.election.enable": "yes"},
        {"cleanup.policy": "shred"},
        {"no.such.key": "1"},
        {"min.insync.replicas": "3"},  # more than the replication factor of 2
    ],
)
def test_an_invalid_config_refuses_the_topic(configs: dict[str, str]) -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    written, response = create(s, new_topic("orders", partitions=1, factor=2, configs=configs))
    assert error_of(response.topics[0]) is ApiError.INVALID_CONFIG
    assert written == 0 and s.image.topic("orders") is None and s.image.configs == {}


def test_validate_only_answers_as_a_create_would_and_writes_nothing() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    before = s.image.digest()
    written, response = create(
        s,
        new_topic("orders", partitions=4, factor=3, configs={"retention.ms": "1000"}),
        new_topic("bad", partitions=1, factor=4),
        validate_only=True,
    )
    ok, bad = response.topics
    assert error_of(ok) is ApiError.NONE and ok.topic_id
    assert (ok.num_partitions, ok.replication_factor, len(ok.configs)) == (4, 3, 1)
    assert error_of(bad) is ApiError.INVALID_REPLICATION_FACTOR
    assert written == 0 and s.image.digest() == before


def test_an_existing_topic_is_refused_and_the_other_topics_are_created() -> None:
    s = Scenario()
    s.brokers(1, 2)
    create(s, new_topic("orders", partitions=1, factor=1))
    old_id = s.topic_image("orders").topic_id
    _, response = create(
        s, new_topic("orders", partitions=3, factor=2), new_topic("payments", partitions=2)
    )
    assert [error_of(t) for t in response.topics] == [ApiError.TOPIC_ALREADY_EXISTS, ApiError.NONE]
    assert s.topic_image("orders").topic_id == old_id
    assert len(s.topic_image("orders").partitions) == 1
    assert len(s.topic_image("payments").partitions) == 2


def test_a_name_twice_in_one_request_creates_it_once() -> None:
    s = Scenario()
    s.brokers(1)
    written, response = create(
        s, new_topic("orders", partitions=1), new_topic("orders", partitions=5)
    )
    assert [error_of(t) for t in response.topics] == [ApiError.NONE, ApiError.INVALID_REQUEST]
    assert len(s.topic_image("orders").partitions) == 1
    assert written == 2


@pytest.mark.parametrize("factor", [4, 3])
def test_a_replication_factor_beyond_the_usable_brokers_is_refused(factor: int) -> None:
    """Fenced brokers and brokers shutting down hold no new replicas."""
    s = Scenario()
    s.brokers(1, 2)
    s.broker(3, fenced=True)
    written, response = create(s, new_topic("orders", partitions=1, factor=factor))
    assert error_of(response.topics[0]) is ApiError.INVALID_REPLICATION_FACTOR
    assert written == 0


def test_new_replicas_avoid_fenced_brokers() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.fence(2)
    create(s, new_topic("orders", partitions=8, factor=2))
    assert all(2 not in p.replicas for p in s.topic_image("orders").partitions.values())


def test_unset_counts_take_the_cluster_defaults() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.config(CLUSTER, "", "num.partitions", "5")
    s.config(CLUSTER, "", "default.replication.factor", "2")
    _, response = create(s, new_topic("orders"), new_topic("minus-one", partitions=-1, factor=-1))
    for name, result in zip(["orders", "minus-one"], response.topics, strict=True):
        assert (result.num_partitions, result.replication_factor) == (5, 2)
        topic = s.topic_image(name)
        assert len(topic.partitions) == 5
        assert {len(p.replicas) for p in topic.partitions.values()} == {2}


def test_without_cluster_defaults_a_topic_has_one_partition_of_one_replica() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    create(s, new_topic("orders"))
    topic = s.topic_image("orders")
    assert len(topic.partitions) == 1 and len(topic.partitions[0].replicas) == 1


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a b", "x" * 250, "ordérs"])
def test_an_illegal_name_is_refused(name: str) -> None:
    s = Scenario()
    s.brokers(1)
    written, response = create(s, new_topic(name, partitions=1))
    assert error_of(response.topics[0]) is ApiError.INVALID_TOPIC_EXCEPTION
    assert written == 0


def test_a_dot_underscore_collision_is_created_with_a_warning() -> None:
    s = Scenario()
    s.brokers(1)
    _, first = create(s, new_topic("metrics.cpu", partitions=1))
    _, second = create(s, new_topic("metrics_cpu", partitions=1), new_topic("plain", partitions=1))
    assert first.topics[0].warning == ""
    assert error_of(second.topics[0]) is ApiError.NONE
    assert "metrics.cpu" in second.topics[0].warning
    assert second.topics[1].warning == ""
    assert s.image.topic("metrics_cpu") is not None


def test_a_collision_within_one_request_is_warned_about_too() -> None:
    s = Scenario()
    s.brokers(1)
    _, response = create(s, new_topic("a.b", partitions=1), new_topic("a_b", partitions=1))
    assert response.topics[0].warning == ""
    assert "'a.b'" in response.topics[1].warning


def test_topic_ids_are_distinct_and_follow_the_seeded_rng() -> None:
    ids = []
    for _ in range(2):
        s = Scenario(seed=3)
        s.brokers(1)
        _, response = create(s, new_topic("a", partitions=1), new_topic("b", partitions=1))
        ids.append([t.topic_id for t in response.topics])
    assert ids[0] == ids[1] and len(set(ids[0])) == 2 and all(len(i) == 22 for i in ids[0])


# -------------------------------------------------------------- delete topics


def test_deleting_a_topic_removes_its_partitions_and_configs() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2], [2, 1]], configs={"retention.ms": "1000"})
    s.topic("payments", [[1]])
    records, response = build_delete_topics(s.image, api.DeleteTopicsRequest(names=["orders"]))
    assert kinds(records) == ["remove_topic"]
    (result,) = response.topics
    assert error_of(result) is ApiError.NONE and result.topic_id == "topic-1-orders"
    s.commit(records)
    assert s.image.topic("orders") is None and s.image.topic_by_id("topic-1-orders") is None
    assert s.image.config(2, "orders") == {}
    assert s.image.partition_count == 1 and s.image.topic("payments") is not None


def test_a_topic_named_by_name_and_by_id_is_removed_once() -> None:
    s = Scenario()
    s.brokers(1)
    tid = s.topic("orders", [[1]])
    records, response = build_delete_topics(
        s.image, api.DeleteTopicsRequest(names=["orders"], topic_ids=[tid])
    )
    assert kinds(records) == ["remove_topic"]
    assert [(t.name, t.topic_id, error_of(t)) for t in response.topics] == [
        ("orders", tid, ApiError.NONE),
        ("orders", tid, ApiError.NONE),
    ]


def test_deleting_unknown_topics_names_the_kind_of_miss() -> None:
    s = Scenario()
    s.brokers(1)
    s.topic("orders", [[1]])
    records, response = build_delete_topics(
        s.image, api.DeleteTopicsRequest(names=["nope", "orders"], topic_ids=["no-such-id"])
    )
    assert [error_of(t) for t in response.topics] == [
        ApiError.UNKNOWN_TOPIC_OR_PARTITION,
        ApiError.NONE,
        ApiError.UNKNOWN_TOPIC_ID,
    ]
    s.commit(records)
    assert s.image.topic_count == 0


def test_a_deleted_name_can_be_created_again_with_a_new_id() -> None:
    s = Scenario()
    s.brokers(1)
    old = s.topic("orders", [[1]])
    records, _ = build_delete_topics(s.image, api.DeleteTopicsRequest(names=["orders"]))
    s.commit(records)
    _, response = create(s, new_topic("orders", partitions=2))
    assert error_of(response.topics[0]) is ApiError.NONE
    assert s.topic_image("orders").topic_id not in ("", old)


# ---------------------------------------------------------- create partitions


def add_partitions(
    s: Scenario,
    name: str,
    count: int,
    assignments: dict[int, list[int]] | None = None,
    validate_only: bool = False,
) -> tuple[int, api.CreatePartitionsTopicResult]:
    item = api.CreatePartitionsTopic(name=name, count=count)
    for pid, brokers in (assignments or {}).items():
        item.assignments.add(partition_index=pid, broker_ids=brokers)
    records, response = build_create_partitions(
        s.image, api.CreatePartitionsRequest(topics=[item], validate_only=validate_only), s.rng
    )
    s.commit(records)
    return len(records), response.topics[0]


def test_new_partitions_keep_the_replication_factor_and_number_on() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2], [2, 3]])
    written, result = add_partitions(s, "orders", 5)
    assert error_of(result) is ApiError.NONE and written == 3
    topic = s.topic_image("orders")
    assert sorted(topic.partitions) == [0, 1, 2, 3, 4]
    assert topic.partitions[0].replicas == (1, 2)  # the old ones are untouched
    for pid in (2, 3, 4):
        part = topic.partitions[pid]
        assert len(set(part.replicas)) == 2 and part.leader == part.replicas[0]
    assert s.image.partition_count == 5


def test_new_partitions_may_be_assigned_explicitly() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2]])
    _, result = add_partitions(s, "orders", 3, assignments={1: [3, 1], 2: [2, 3]})
    assert error_of(result) is ApiError.NONE
    assert s.part("orders", 1).replicas == (3, 1)
    assert s.part("orders", 2).replicas == (2, 3)


@pytest.mark.parametrize(
    "assignments",
    [
        {1: [3, 1]},  # one partition short
        {1: [3], 2: [1]},  # another replication factor
        {0: [3, 1], 1: [1, 2]},  # numbered from 0, not from the current count
        {1: [3, 9], 2: [1, 2]},  # unknown broker
    ],
)
def test_a_bad_assignment_of_new_partitions_is_refused(assignments: dict[int, list[int]]) -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2]])
    written, result = add_partitions(s, "orders", 3, assignments=assignments)
    assert error_of(result) is ApiError.INVALID_REPLICA_ASSIGNMENT
    assert written == 0 and len(s.topic_image("orders").partitions) == 1


@pytest.mark.parametrize("count", [1, 2])
def test_the_partition_count_can_only_grow(count: int) -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1], [2]])
    written, result = add_partitions(s, "orders", count)
    assert error_of(result) is ApiError.INVALID_PARTITIONS
    assert written == 0


def test_adding_partitions_to_an_unknown_topic_is_refused() -> None:
    s = Scenario()
    s.brokers(1)
    written, result = add_partitions(s, "nope", 3)
    assert error_of(result) is ApiError.UNKNOWN_TOPIC_OR_PARTITION and written == 0


def test_adding_partitions_with_validate_only_writes_nothing() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("orders", [[1, 2]])
    written, result = add_partitions(s, "orders", 4, validate_only=True)
    assert error_of(result) is ApiError.NONE
    assert written == 0 and len(s.topic_image("orders").partitions) == 1


def test_adding_partitions_needs_enough_usable_brokers() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]])
    s.fence(3)
    written, result = add_partitions(s, "orders", 2)
    assert error_of(result) is ApiError.INVALID_REPLICATION_FACTOR and written == 0


def test_the_partition_budget_refuses_the_whole_request() -> None:
    s = Scenario()
    s.brokers(1)
    s.topic("orders", [[1]] * 4)
    request = api.CreatePartitionsRequest(
        topics=[api.CreatePartitionsTopic(name="orders", count=9)]
    )
    with pytest.raises(ControllerError) as caught:
        build_create_partitions(s.image, request, s.rng, RequestLimits(max_partitions=8))
    assert caught.value.error is ApiError.POLICY_VIOLATION


# ---------------------------------------------------------------------- reads


def test_describe_shows_offline_replicas_and_the_min_isr_state() -> None:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.config(CLUSTER, "", "min.insync.replicas", "2")
    s.topic("orders", [[1, 2, 3], [2, 3, 1]], isr=[[1, 2, 3], [2]], leaders=[1, 2])
    s.topic("logs", [[3, 1]], configs={"min.insync.replicas": "1"})
    s.fence(3)
    response = describe_topics(s.image, api.DescribeTopicsRequest())
    assert [t.name for t in response.topics] == ["logs", "orders"]
    logs, orders = response.topics
    assert (logs.partitions[0].min_isr, logs.partitions[0].under_min_isr) == (1, False)
    p0, p1 = orders.partitions
    assert list(p0.offline_replicas) == [3] and list(p1.offline_replicas) == [3]
    assert (p0.min_isr, p0.under_min_isr, p0.under_replicated) == (2, False, False)
    assert (p1.min_isr, p1.under_min_isr, p1.under_replicated) == (2, True, True)
    assert (p1.leader, list(p1.replicas), list(p1.isr)) == (2, [2, 3, 1], [2])


def test_describe_answers_an_unknown_topic_per_topic() -> None:
    s = Scenario()
    s.brokers(1)
    s.topic("orders", [[1]])
    response = describe_topics(s.image, api.DescribeTopicsRequest(names=["nope", "orders"]))
    assert [error_of(t) for t in response.topics] == [
        ApiError.UNKNOWN_TOPIC_OR_PARTITION,
        ApiError.NONE,
    ]
    assert len(response.topics[1].partitions) == 1


def test_list_topics_gives_counts_sorted_by_name() -> None:
    s = Scenario()
    s.brokers(1, 2)
    s.topic("zeta", [[1, 2]] * 3)
    s.topic("alpha", [[2]])
    listing = [(t.name, t.partitions, t.replication_factor) for t in list_topics(s.image).topics]
    assert listing == [("alpha", 1, 1), ("zeta", 3, 2)]


def test_collision_warnings_index_the_names_once_and_only_when_needed() -> None:
    scanned: list[str] = []

    class Names:
        def __iter__(self) -> Iterator[str]:
            for name in ("a.b", "plain", "x_y", "x.y"):
                scanned.append(name)
                yield name

    warnings = CollisionWarnings(Names())
    assert warnings.warning("plain2") == ""
    assert scanned == []  # no name of the request can collide: no scan
    assert "'a.b'" in warnings.warning("a_b")
    assert warnings.warning("x.y_") == ""  # x_y_ is not x_y
    assert "'x_y'" in warnings.warning("x.y")  # the first of the names that fold alike
    assert warnings.warning("q.r") == ""
    warnings.created("q.r")
    assert "'q.r'" in warnings.warning("q_r")
    assert warnings.warning("a.b") == ""  # a name never collides with itself
    assert scanned == ["a.b", "plain", "x_y", "x.y"]  # one pass over the image's names
