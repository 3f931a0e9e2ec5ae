"""The admin API and broker registration over real gRPC on three real controllers.

One cluster serves most of the module's tests, in any order: each builds the state
it asserts on through fixtures (brokers registered and unfenced, the topic `orders`)
or under names of its own, and asserts on listings relative to what it found. The
broker sessions outlast the module, so nothing changes with the clock between
tests. The test that moves the leaderships of every topic (a controlled shutdown)
and the failover test start clusters of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from controller_cluster import Cluster, run, running_cluster

from quorum.admin_client import AdminClient, AdminError
from quorum.common.meta_properties import random_uuid
from quorum.gen import admin_pb2 as api
from quorum.gen import admin_pb2_grpc as api_grpc
from quorum.gen import broker_pb2 as bpb
from quorum.rpc.wire_errors import wire_error

BROKERS = (1, 2, 3)

# The module's tests share one cluster, so `make test` distributes tests by module
# (`--dist loadscope`): one worker starts it once.

# Longer than the module runs: a session that ran out would fence the brokers
# (placement then refuses replication factor 3) and write records in the middle of
# a test that checks an unchanged image.
SESSIONS = {"broker.session.timeout.ms": "600000"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(Path(tmp_path_factory.mktemp("admin")), extra=SESSIONS) as c:
        yield c


def call(cluster: Cluster, kind: str, method: str, request: Any) -> Any:
    return cluster.call(kind, method, request)


def admin(cluster: Cluster, method: str, request: Any) -> Any:
    return call(cluster, "admin", method, request)


def refused(cluster: Cluster, kind: str, method: str, request: Any) -> tuple[str, grpc.StatusCode]:
    with pytest.raises(AdminError) as caught:
        call(cluster, kind, method, request)
    return caught.value.name, caught.value.error.status


def leader_state(cluster: Cluster) -> tuple[int, str]:
    view = cluster.describe(cluster.wait_for_leader().leader_id)
    return view.applied_offset, view.image_digest


def all_digests_agree(cluster: Cluster) -> None:
    def agree() -> bool:
        views = [cluster.describe(i) for i in cluster.procs if cluster.procs[i].alive()]
        return len({(v.applied_offset, v.image_digest) for v in views}) == 1

    cluster.wait_until(agree, 15, "the same image digest on every controller")


def register_brokers(cluster: Cluster) -> dict[int, int]:
    epochs = {}
    for b in BROKERS:
        reply = call(cluster, "broker", "RegisterBroker", bpb.RegisterBrokerRequest(
            broker_id=b, incarnation_id=random_uuid(),
            listeners=[bpb.Listener(name="PLAINTEXT", host="127.0.0.1", port=19090 + b,
                                    security_protocol="PLAINTEXT")],
        ))  # fmt: skip
        epochs[b] = reply.broker_epoch
    return epochs


def heartbeat(cluster: Cluster, broker: int, epoch: int, offset: int, **flags: bool) -> Any:
    return call(cluster, "broker", "BrokerHeartbeat", bpb.BrokerHeartbeatRequest(
        broker_id=broker, broker_epoch=epoch, current_metadata_offset=offset, **flags
    ))  # fmt: skip


@pytest.fixture(scope="module")
def brokers(cluster: Cluster) -> dict[int, int]:
    return online_brokers(cluster)


def online_brokers(cluster: Cluster) -> dict[int, int]:
    """Brokers 1-3 registered (fenced) and unfenced by a caught-up heartbeat."""
    epochs = register_brokers(cluster)
    states = {
        b.broker_id: b.state
        for b in admin(cluster, "DescribeCluster", api.DescribeClusterRequest()).brokers
    }
    assert states == {1: "FENCED", 2: "FENCED", 3: "FENCED"}
    behind = heartbeat(cluster, 1, epochs[1], 0)
    assert behind.is_fenced and not behind.is_caught_up
    for b, epoch in epochs.items():
        hw = cluster.describe(cluster.wait_for_leader().leader_id).high_watermark
        beat = heartbeat(cluster, b, epoch, hw)
        assert beat.is_caught_up and not beat.is_fenced
    states = {
        b.broker_id: b.state
        for b in admin(cluster, "DescribeCluster", api.DescribeClusterRequest()).brokers
    }
    assert states == {1: "ONLINE", 2: "ONLINE", 3: "ONLINE"}
    return epochs


def create(cluster: Cluster, *topics: api.CreatableTopic, validate_only: bool = False) -> Any:
    return admin(
        cluster,
        "CreateTopics",
        api.CreateTopicsRequest(topics=list(topics), validate_only=validate_only),
    )


def describe(cluster: Cluster, name: str) -> api.TopicDescription:
    reply = admin(cluster, "DescribeTopics", api.DescribeTopicsRequest(names=[name]))
    return reply.topics[0]


def create_orders(cluster: Cluster) -> api.CreatableTopicResult:
    """`orders`: 6 partitions over the 3 brokers, min.insync.replicas 2."""
    reply = create(cluster, api.CreatableTopic(
        name="orders", num_partitions=6, replication_factor=3,
        configs={"min.insync.replicas": "2"}))  # fmt: skip
    return reply.topics[0]


@pytest.fixture(scope="module")
def orders(cluster: Cluster, brokers: dict[int, int]) -> api.CreatableTopicResult:
    """The shared topic; no test of the shared cluster moves its leaders or ISR."""
    return create_orders(cluster)


def names_listed(cluster: Cluster) -> list[str]:
    return [t.name for t in admin(cluster, "ListTopics", api.ListTopicsRequest()).topics]


def test_topics_are_placed_evenly_led_by_their_first_replica_and_agree_everywhere(
    cluster: Cluster, orders: api.CreatableTopicResult
) -> None:
    result = orders
    assert result.error.error_code == 0, result.error
    assert (result.num_partitions, result.replication_factor) == (6, 3)
    topic = describe(cluster, "orders")
    assert topic.topic_id == result.topic_id and len(topic.partitions) == 6
    leaders = [p.leader for p in topic.partitions]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    for p in topic.partitions:
        assert p.leader == p.replicas[0] and sorted(p.isr) == [1, 2, 3]
        assert p.min_isr == 2 and not p.under_min_isr
    listing = admin(cluster, "ListTopics", api.ListTopicsRequest())
    assert [
        (t.name, t.partitions, t.replication_factor) for t in listing.topics if t.name == "orders"
    ] == [("orders", 6, 3)]
    all_digests_agree(cluster)


def test_a_batch_reports_each_item_and_commits_only_the_valid_ones(
    cluster: Cluster, orders: api.CreatableTopicResult
) -> None:
    before = names_listed(cluster)
    reply = create(
        cluster,
        api.CreatableTopic(name="good.one", num_partitions=2, replication_factor=2),
        api.CreatableTopic(name="orders", num_partitions=1, replication_factor=1),
        api.CreatableTopic(name="bad/name", num_partitions=1, replication_factor=1),
        api.CreatableTopic(name="too-many", num_partitions=1, replication_factor=4),
        api.CreatableTopic(name="no-parts", num_partitions=-5, replication_factor=1,
                           assignments=[api.ReplicaAssignment(partition_index=0, broker_ids=[1])]),
        api.CreatableTopic(name="bad-assign",
                           assignments=[api.ReplicaAssignment(partition_index=0,
                                                              broker_ids=[1, 1])]),
        api.CreatableTopic(name="min-isr", num_partitions=1, replication_factor=2,
                           configs={"min.insync.replicas": "3"}),
        api.CreatableTopic(name="unknown-key", num_partitions=1, replication_factor=1,
                           configs={"retention.mss": "1"}),
        api.CreatableTopic(name="good_one", num_partitions=1, replication_factor=1),
    )  # fmt: skip
    errors = {t.name: t.error.error_name or "NONE" for t in reply.topics}
    assert errors == {
        "good.one": "NONE",
        "orders": "TOPIC_ALREADY_EXISTS",
        "bad/name": "INVALID_TOPIC_EXCEPTION",
        "too-many": "INVALID_REPLICATION_FACTOR",
        "no-parts": "INVALID_REQUEST",
        "bad-assign": "INVALID_REPLICA_ASSIGNMENT",
        "min-isr": "INVALID_CONFIG",
        "unknown-key": "INVALID_CONFIG",
        "good_one": "NONE",
    }
    assert "collides" in next(t.warning for t in reply.topics if t.name == "good_one")
    names = names_listed(cluster)
    assert [n for n in names if n not in before] == ["good.one", "good_one"]
    assert names == sorted(names)


def test_rejected_requests_change_nothing(
    cluster: Cluster, brokers: dict[int, int], orders: api.CreatableTopicResult
) -> None:
    before = leader_state(cluster)
    orders = describe(cluster, "orders")
    part = orders.partitions[0]

    assert describe(cluster, "missing").error.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
    deleted = admin(
        cluster, "DeleteTopics", api.DeleteTopicsRequest(names=["missing"], topic_ids=["nope"])
    )
    assert [t.error.error_name for t in deleted.topics] == [
        "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID"]  # fmt: skip
    grown = admin(cluster, "CreatePartitions", api.CreatePartitionsRequest(topics=[
        api.CreatePartitionsTopic(name="orders", count=3),
        api.CreatePartitionsTopic(name="missing", count=3)]))  # fmt: skip
    assert [t.error.error_name for t in grown.topics] == [
        "INVALID_PARTITIONS", "UNKNOWN_TOPIC_OR_PARTITION"]  # fmt: skip
    altered = admin(cluster, "IncrementalAlterConfigs", api.IncrementalAlterConfigsRequest(
        resources=[
            api.AlterConfigsResource(resource_type=api.TOPIC, resource_name="orders", configs=[
                api.AlterableConfig(name="retention.ms", op=api.SET, value="soon")]),
            api.AlterConfigsResource(resource_type=api.TOPIC, resource_name="orders", configs=[
                api.AlterableConfig(name="min.insync.replicas", op=api.SET, value="4")]),
            api.AlterConfigsResource(resource_type=api.TOPIC, resource_name="missing"),
            api.AlterConfigsResource(resource_type=api.BROKER, resource_name="1", configs=[
                api.AlterableConfig(name="no.such.key", op=api.SET, value="1")]),
        ]))  # fmt: skip
    assert [r.error.error_name for r in altered.resources] == [
        "INVALID_CONFIG",
        "INVALID_CONFIG",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "INVALID_CONFIG",
    ]
    acls = admin(cluster, "CreateAcls", api.CreateAclsRequest(creations=[
        api.AclBinding(resource_type=2, resource_name="orders", pattern_type=3,
                       principal="alice", host="*", operation=3, permission_type=3)]))  # fmt: skip
    assert acls.results[0].error.error_name == "INVALID_REQUEST"
    elected = admin(cluster, "ElectLeaders", api.ElectLeadersRequest(partitions=[
        api.TopicPartitions(topic="orders", partitions=[0, 99])]))  # fmt: skip
    assert [r.error.error_name for r in elected.results] == [
        "ELECTION_NOT_NEEDED",
        "UNKNOWN_TOPIC_OR_PARTITION",
    ]
    features = admin(cluster, "UpdateFeatures", api.UpdateFeaturesRequest(updates=[
        api.FeatureUpdate(feature="metadata.version", max_version_level=9),
        api.FeatureUpdate(feature="made.up", max_version_level=1)]))  # fmt: skip
    assert [r.error.error_name for r in features.results] == ["INVALID_UPDATE_VERSION"] * 2

    leader, epoch = part.leader, brokers[part.leader]
    follower = next(r for r in part.replicas if r != leader)
    cases = [
        (follower, brokers[follower], part.leader_epoch, part.partition_epoch, [1, 2, 3],
         "NOT_LEADER_OR_FOLLOWER"),
        (leader, epoch, part.leader_epoch, part.partition_epoch + 7, [1, 2, 3],
         "INVALID_UPDATE_VERSION"),
        (leader, epoch, part.leader_epoch, part.partition_epoch, [leader, 42],
         "INELIGIBLE_REPLICA"),
        (leader, epoch, part.leader_epoch, part.partition_epoch, [follower], "INVALID_REQUEST"),
        (leader, epoch + 1, part.leader_epoch, part.partition_epoch, [leader],
         "STALE_BROKER_EPOCH"),
    ]  # fmt: skip
    for broker, broker_epoch, leader_epoch, partition_epoch, isr, expected in cases:
        reply = admin(cluster, "AlterPartition", api.AlterPartitionRequest(
            broker_id=broker, broker_epoch=broker_epoch, partitions=[api.AlterPartitionItem(
                topic_id=orders.topic_id, partition=0, leader_epoch=leader_epoch,
                new_isr=isr, partition_epoch=partition_epoch)]))  # fmt: skip
        assert reply.results[0].error.error_name == expected, (isr, expected)

    assert refused(cluster, "admin", "AllocateProducerIds", api.AllocateProducerIdsRequest(
        broker_id=1, broker_epoch=brokers[1] + 9)) == (
        "STALE_BROKER_EPOCH", grpc.StatusCode.FAILED_PRECONDITION)  # fmt: skip
    assert refused(
        cluster,
        "broker",
        "BrokerHeartbeat",
        bpb.BrokerHeartbeatRequest(broker_id=77, broker_epoch=1),
    ) == ("BROKER_ID_NOT_REGISTERED", grpc.StatusCode.NOT_FOUND)
    assert refused(cluster, "broker", "RegisterBroker", bpb.RegisterBrokerRequest(
        broker_id=2, incarnation_id=random_uuid())) == (
        "DUPLICATE_BROKER_REGISTRATION", grpc.StatusCode.ALREADY_EXISTS)  # fmt: skip
    wrong = api.CreateTopicsRequest(cluster_id="AAAAAAAAAAAAAAAAAAAAAA", topics=[
        api.CreatableTopic(name="x", num_partitions=1, replication_factor=1)])  # fmt: skip
    assert refused(cluster, "admin", "CreateTopics", wrong) == (
        "INCONSISTENT_CLUSTER_ID",
        grpc.StatusCode.FAILED_PRECONDITION,
    )

    assert leader_state(cluster) == before
    all_digests_agree(cluster)


def test_a_standby_controller_answers_not_controller_with_the_active_address(
    cluster: Cluster, orders: api.CreatableTopicResult
) -> None:
    view = cluster.wait_for_leader()
    standby = next(p for i, p in cluster.procs.items() if i != view.leader_id)

    async def go() -> grpc.aio.AioRpcError:
        async with grpc.aio.insecure_channel(standby.address) as channel:
            request = api.CreateTopicsRequest(topics=[api.CreatableTopic(name="x")])
            try:
                await api_grpc.AdminStub(channel).CreateTopics(request, timeout=5)
            except grpc.aio.AioRpcError as err:
                return err
        raise AssertionError("a standby accepted a write")

    error = wire_error(run(go()))
    assert error.status is grpc.StatusCode.FAILED_PRECONDITION
    assert error.error is not None and error.error.name == "NOT_CONTROLLER"
    assert error.leader_address == cluster.procs[view.leader_id].address

    # Reads are served by any controller from its committed image.
    async def read() -> api.ListTopicsResponse:
        async with grpc.aio.insecure_channel(standby.address) as channel:
            return await api_grpc.AdminStub(channel).ListTopics(api.ListTopicsRequest(), timeout=5)

    cluster.wait_until(lambda: "orders" in [t.name for t in run(read()).topics], 10, "standby read")


def test_the_client_follows_not_controller_and_reuses_its_stub_per_controller(
    cluster: Cluster, orders: api.CreatableTopicResult
) -> None:
    """Bootstrapped at a standby, the client's first write is refused NOT_CONTROLLER
    and goes on to the active controller; further calls reuse that controller's
    stub (a stub is built once per channel, not per call)."""
    view = cluster.wait_for_leader()
    standby = next(p for i, p in cluster.procs.items() if i != view.leader_id)
    active = cluster.procs[view.leader_id].address

    async def go() -> list[Any]:
        client = AdminClient([standby.address], cluster.cluster_id)
        stubs = []
        try:
            for _ in range(3):
                request = api.CreateTopicsRequest(
                    validate_only=True, topics=[api.CreatableTopic(name="stub-reuse")]
                )
                reply = await client.admin("CreateTopics", request, deadline_s=10)
                assert reply.topics[0].error.error_code == 0, reply
                stubs.append(client._stubs[(api_grpc.AdminStub, active)])
            return stubs
        finally:
            await client.close()

    first, *others = run(go())
    assert all(stub is first for stub in others)


def test_configs_acls_producer_ids_and_features_round_trip(
    cluster: Cluster, brokers: dict[int, int]
) -> None:
    made = create(cluster, api.CreatableTopic(name="configured", num_partitions=1,
                                              replication_factor=1))  # fmt: skip
    assert made.topics[0].error.error_code == 0, made.topics[0].error
    topic = api.AlterConfigsResource(resource_type=api.TOPIC, resource_name="configured", configs=[
        api.AlterableConfig(name="retention.ms", op=api.SET, value="3600000"),
        api.AlterableConfig(name="cleanup.policy", op=api.APPEND, value="compact")])  # fmt: skip
    reply = admin(cluster, "IncrementalAlterConfigs",
                  api.IncrementalAlterConfigsRequest(resources=[topic]))  # fmt: skip
    assert reply.resources[0].error.error_code == 0
    described = admin(
        cluster,
        "DescribeConfigs",
        api.DescribeConfigsRequest(
            resources=[
                api.DescribeConfigsResource(
                    resource_type=api.TOPIC,
                    resource_name="configured",
                    names=["retention.ms", "cleanup.policy", "segment.ms"],
                )
            ]
        ),
    )
    entries = {c.name: (c.value, api.ConfigSource.Name(c.source))
               for c in described.resources[0].configs}  # fmt: skip
    assert entries == {
        "cleanup.policy": ("delete,compact", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG"),
        "segment.ms": ("604800000", "DEFAULT_CONFIG"),
    }

    binding = api.AclBinding(
        resource_type=2,
        resource_name="orders",
        pattern_type=3,
        principal="User:alice",
        host="*",
        operation=3,
        permission_type=3,
    )
    for _ in range(2):  # creating the same ACL twice keeps one
        created = admin(cluster, "CreateAcls", api.CreateAclsRequest(creations=[binding]))
        assert created.results[0].error.error_code == 0
    listed = admin(
        cluster,
        "DescribeAcls",
        api.DescribeAclsRequest(filter=api.AclBindingFilter(resource_type=1)),
    )
    assert list(listed.bindings) == [binding]
    gone = admin(cluster, "DeleteAcls", api.DeleteAclsRequest(filters=[
        api.AclBindingFilter(resource_type=1, principal="User:alice")]))  # fmt: skip
    assert list(gone.results[0].matching) == [binding]
    assert not admin(cluster, "DescribeAcls", api.DescribeAclsRequest()).bindings

    first = admin(
        cluster,
        "AllocateProducerIds",
        api.AllocateProducerIdsRequest(broker_id=1, broker_epoch=brokers[1]),
    )
    second = admin(
        cluster,
        "AllocateProducerIds",
        api.AllocateProducerIdsRequest(broker_id=2, broker_epoch=brokers[2]),
    )
    assert second.producer_id_start == first.producer_id_start + first.producer_id_len

    up = admin(cluster, "UpdateFeatures", api.UpdateFeaturesRequest(updates=[
        api.FeatureUpdate(feature="metadata.version", max_version_level=1)]))  # fmt: skip
    assert up.results[0].error.error_code == 0
    info = admin(cluster, "DescribeCluster", api.DescribeClusterRequest())
    assert [(f.name, f.level) for f in info.features] == [("metadata.version", 1)]
    all_digests_agree(cluster)


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """For a test that changes what every topic's partitions look like."""
    with running_cluster(tmp_path, extra=SESSIONS) as c:
        yield c


def test_isr_changes_controlled_shutdown_and_preferred_election(own_cluster: Cluster) -> None:
    cluster = own_cluster
    brokers = online_brokers(cluster)
    created = create_orders(cluster)
    assert created.error.error_code == 0, created.error
    orders = describe(cluster, "orders")
    part = orders.partitions[0]
    leader = part.leader
    follower = part.replicas[-1]
    shrunk = [r for r in part.isr if r != follower]
    reply = admin(cluster, "AlterPartition", api.AlterPartitionRequest(
        broker_id=leader, broker_epoch=brokers[leader], partitions=[api.AlterPartitionItem(
            topic_id=orders.topic_id, partition=0, leader_epoch=part.leader_epoch,
            new_isr=shrunk, partition_epoch=part.partition_epoch)]))  # fmt: skip
    assert reply.results[0].error.error_code == 0
    after = describe(cluster, "orders").partitions[0]
    assert sorted(after.isr) == sorted(shrunk)
    assert after.partition_epoch == part.partition_epoch + 1
    assert after.leader_epoch == part.leader_epoch

    # Controlled shutdown of the leader moves its leaderships to ISR members.
    hw = cluster.describe(cluster.wait_for_leader().leader_id).high_watermark
    heartbeat(cluster, leader, brokers[leader], hw, want_shutdown=True)
    states = {
        b.broker_id: b.state
        for b in admin(cluster, "DescribeCluster", api.DescribeClusterRequest()).brokers
    }
    assert states[leader] == "STOPPING"
    moved = describe(cluster, "orders")
    assert all(p.leader != leader for p in moved.partitions)
    assert all(p.leader_epoch > 0 for p in moved.partitions if p.replicas[0] == leader)
    final = heartbeat(cluster, leader, brokers[leader], hw, want_shutdown=True)
    assert final.should_shut_down

    # It comes back with a new incarnation: fenced until caught up, then preferred again.
    epoch = call(cluster, "broker", "RegisterBroker", bpb.RegisterBrokerRequest(
        broker_id=leader, incarnation_id=random_uuid())).broker_epoch  # fmt: skip
    brokers[leader] = epoch
    hw = cluster.describe(cluster.wait_for_leader().leader_id).high_watermark
    assert not heartbeat(cluster, leader, epoch, hw).is_fenced
    elected = admin(cluster, "ElectLeaders", api.ElectLeadersRequest(partitions=[
        api.TopicPartitions(topic="orders")]))  # fmt: skip
    outcomes = {r.partition: r.error.error_name or "NONE" for r in elected.results}
    final_view = describe(cluster, "orders")
    for p in final_view.partitions:
        if p.replicas[0] in p.isr:
            assert p.leader == p.replicas[0], (p, outcomes)
        else:
            assert outcomes[p.partition] == "PREFERRED_LEADER_NOT_AVAILABLE"
    all_digests_agree(cluster)


def test_topics_can_be_deleted_and_grown(cluster: Cluster, brokers: dict[int, int]) -> None:
    made = create(
        cluster,
        api.CreatableTopic(name="to.grow", num_partitions=2, replication_factor=2),
        api.CreatableTopic(name="to.delete", num_partitions=1, replication_factor=1),
    )
    assert [t.error.error_code for t in made.topics] == [0, 0], made
    grown = admin(cluster, "CreatePartitions", api.CreatePartitionsRequest(
        topics=[api.CreatePartitionsTopic(name="to.grow", count=5)]))  # fmt: skip
    assert grown.topics[0].error.error_code == 0
    assert len(describe(cluster, "to.grow").partitions) == 5
    deleted = admin(cluster, "DeleteTopics", api.DeleteTopicsRequest(names=["to.delete"]))
    assert deleted.topics[0].error.error_code == 0
    assert describe(cluster, "to.delete").error.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
    all_digests_agree(cluster)


def test_controller_failover_in_a_stream_of_creates_loses_no_acknowledged_topic(
    tmp_path: Path,
) -> None:
    cluster = Cluster.create(tmp_path)
    cluster.start()
    try:
        cluster.wait_for_leader()
        register_and_unfence(cluster)
        acknowledged: list[str] = []
        outcome = run(stream_creates(cluster, acknowledged))
        names = {t.name: t for t in admin(cluster, "ListTopics", api.ListTopicsRequest()).topics}
        for name in acknowledged:
            assert name in names and names[name].partitions == 3, name
        assert set(names) <= set(outcome["attempted"])
        assert len({t.topic_id for t in names.values()}) == len(names)
        old = outcome["killed"]
        cluster.start(old)
        all_digests_agree(cluster)
    finally:
        cluster.stop_all()


def register_and_unfence(cluster: Cluster) -> None:
    epochs = register_brokers(cluster)
    for b, epoch in epochs.items():
        hw = cluster.describe(cluster.wait_for_leader().leader_id).high_watermark
        assert not heartbeat(cluster, b, epoch, hw).is_fenced


async def stream_creates(cluster: Cluster, acknowledged: list[str]) -> dict[str, Any]:
    """Create topics one per request; kill -9 the active controller midway. A
    request that failed is retried under the same name: TOPIC_ALREADY_EXISTS then
    means the unacknowledged attempt had committed, which is allowed once."""
    client = AdminClient(cluster.voter_addresses(), cluster.cluster_id)
    attempted: list[str] = []
    killed = -1
    try:
        for i in range(60):
            if i == 20:
                loop = asyncio.get_running_loop()
                view = await loop.run_in_executor(None, cluster.wait_for_leader)
                killed = view.leader_id
                cluster.kill(killed)
            name = f"stream-{i:03d}"
            attempted.append(name)
            for _attempt in range(20):
                request = api.CreateTopicsRequest(
                    topics=[api.CreatableTopic(name=name, num_partitions=3, replication_factor=3)]
                )
                try:
                    reply = await client.admin("CreateTopics", request, deadline_s=10)
                except AdminError:
                    await asyncio.sleep(0.05)
                    continue
                error = reply.topics[0].error.error_name
                if error in ("", "NONE", "TOPIC_ALREADY_EXISTS"):
                    if not error or error == "NONE":
                        acknowledged.append(name)
                    break
                if error == "INVALID_REPLICATION_FACTOR":  # the killed controller's brokers
                    raise AssertionError(f"brokers were fenced by the failover: {reply}")
                raise AssertionError(f"unexpected {error} for {name}")
    finally:
        await client.close()
    assert len(acknowledged) >= 50
    return {"attempted": attempted, "killed": killed}


def test_controller_metrics_count_topics_partitions_and_the_active_controller(
    cluster: Cluster, brokers: dict[int, int]
) -> None:
    made = create(cluster, api.CreatableTopic(name="counted", num_partitions=2,
                                              replication_factor=2))  # fmt: skip
    assert made.topics[0].error.error_code == 0, made.topics[0].error
    leader = cluster.wait_for_leader().leader_id
    listing = admin(cluster, "ListTopics", api.ListTopicsRequest())
    partitions = sum(t.partitions for t in listing.topics)

    def counted() -> bool:
        # The gauges are refreshed every few seconds: wait for a walk that saw
        # this test's topic and the brokers registered before it.
        m = cluster.procs[leader].metrics()
        return (
            m.get("quorum_controller_global_topics") == len(listing.topics)
            and m.get("quorum_controller_global_partitions") == partitions
            and m.get("quorum_controller_active_brokers", 0)
            + m.get("quorum_controller_fenced_brokers", 0)
            == len(brokers)
        )

    cluster.wait_until(counted, 15, "controller gauges to refresh")
    m = cluster.procs[leader].metrics()
    assert m["quorum_controller_active_controllers"] == 1
    assert m["quorum_controller_active_brokers"] + m["quorum_controller_fenced_brokers"] == 3
    assert m["quorum_controller_event_processing_time_seconds_count"] > 0
    assert (
        m["quorum_controller_last_committed_record_offset"]
        >= m["quorum_controller_last_applied_record_offset"]
        >= 0
    )
    standby = next(i for i in cluster.procs if i != leader)
    assert cluster.procs[standby].metrics()["quorum_controller_active_controllers"] == 0
