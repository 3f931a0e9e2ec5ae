"""Issue 17, items 3 and 9, reproduced against three real controllers.

Each test sends what the report sent (over gRPC, or with `quorumctl` as a
subprocess) and checks the refusal (gRPC status and Kafka's error name, or the
CLI's exit code) and that nothing changed: the high watermark, the applied
offset and the image digest are the same before and after.

The cluster runs with `max.partitions=200` (so the cluster-wide cap can be
reached cheaply) and `socket.request.max.bytes` of 64 MiB (above the report's
50 MB principal, so that one reaches the name bound); brokers are registered
over gRPC with a long session, so placement has live brokers without agents.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from controller_cluster import Cluster, ctl

from quorum.admin_client import AdminError
from quorum.common.meta_properties import random_uuid
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb

pytestmark = pytest.mark.slow

BROKERS = (1, 2, 3)
MAX_PARTITIONS = 200
SOCKET_MAX = 64 << 20
SEED_PARTITIONS = 10


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster.create(
        Path(tmp_path_factory.mktemp("admin-validation")),
        extra={
            "max.partitions": str(MAX_PARTITIONS),
            "socket.request.max.bytes": str(SOCKET_MAX),
            "broker.session.timeout.ms": "600000",
        },
    )
    c.start()
    try:
        c.wait_for_leader()
        register_brokers(c)
        seed = c.call("admin", "CreateTopics", api.CreateTopicsRequest(topics=[
            api.CreatableTopic(name="seed", num_partitions=SEED_PARTITIONS,
                               replication_factor=3)]))  # fmt: skip
        assert seed.topics[0].error.error_code == 0, seed.topics[0].error
        yield c
    finally:
        c.stop_all()


def register_brokers(cluster: Cluster) -> None:
    for b in BROKERS:
        reply = cluster.call("broker", "RegisterBroker", bpb.RegisterBrokerRequest(
            broker_id=b, incarnation_id=random_uuid(),
            listeners=[bpb.Listener(name="PLAINTEXT", host="127.0.0.1", port=29090 + b,
                                    security_protocol="PLAINTEXT")]))  # fmt: skip
        hw = cluster.describe(cluster.wait_for_leader().leader_id).high_watermark
        beat = cluster.call("broker", "BrokerHeartbeat", bpb.BrokerHeartbeatRequest(
            broker_id=b, broker_epoch=reply.broker_epoch, current_metadata_offset=hw))  # fmt: skip
        assert not beat.is_fenced


def state(cluster: Cluster) -> tuple[int, int, str]:
    """What a refused request must leave alone: commits, applies, the image."""
    view = cluster.describe(cluster.wait_for_leader().leader_id)
    return view.high_watermark, view.applied_offset, view.image_digest


def refused(cluster: Cluster, method: str, request: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(AdminError) as caught:
        cluster.call("admin", method, request)
    return caught.value.error.status, caught.value.name


def usage_error(done: subprocess.CompletedProcess[str], option: str) -> bool:
    return done.returncode == 2 and option in done.stderr and "Traceback" not in done.stderr


def leader_rss_bytes(cluster: Cluster) -> int:
    proc = cluster.procs[cluster.wait_for_leader().leader_id]
    assert proc.popen is not None
    status = Path(f"/proc/{proc.popen.pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


# ------------------------------------------------------------ item 3: bounds


def test_a_billion_partitions_is_refused_and_the_controller_lives_on(cluster: Cluster) -> None:
    before = state(cluster)
    big = api.CreatableTopic(name="huge", num_partitions=10**9, replication_factor=3)
    assert refused(cluster, "CreateTopics", api.CreateTopicsRequest(topics=[big])) == (
        grpc.StatusCode.INVALID_ARGUMENT, "POLICY_VIOLATION")  # fmt: skip
    grow = api.CreatePartitionsTopic(name="seed", count=10**9)
    assert refused(cluster, "CreatePartitions", api.CreatePartitionsRequest(topics=[grow])) == (
        grpc.StatusCode.INVALID_ARGUMENT, "POLICY_VIOLATION")  # fmt: skip
    assert all(p.alive() for p in cluster.procs.values())
    assert leader_rss_bytes(cluster) < 1 << 30  # the report: 5.6 GB, then MemoryError
    assert state(cluster) == before


def test_the_cluster_wide_partition_cap_refuses_the_whole_request(cluster: Cluster) -> None:
    listing = cluster.call("admin", "ListTopics", api.ListTopicsRequest())
    room = MAX_PARTITIONS - sum(t.partitions for t in listing.topics)
    before = state(cluster)
    request = api.CreateTopicsRequest(topics=[
        api.CreatableTopic(name="fits", num_partitions=1, replication_factor=1),
        api.CreatableTopic(name="over", num_partitions=room, replication_factor=1)])  # fmt: skip
    assert refused(cluster, "CreateTopics", request) == (
        grpc.StatusCode.INVALID_ARGUMENT, "POLICY_VIOLATION")  # fmt: skip
    assert state(cluster) == before
    check = api.CreateTopicsRequest(validate_only=True, topics=[
        api.CreatableTopic(name="fits", num_partitions=room, replication_factor=1)])  # fmt: skip
    assert cluster.call("admin", "CreateTopics", check).topics[0].error.error_code == 0


def test_a_50_mb_principal_is_refused_by_name_length(cluster: Cluster) -> None:
    before = state(cluster)
    binding = api.AclBinding(resource_type=2, resource_name="seed", pattern_type=3,
                             principal="User:" + "p" * 50_000_000, host="*", operation=3,
                             permission_type=3)  # fmt: skip
    status, name = refused(cluster, "CreateAcls", api.CreateAclsRequest(creations=[binding]))
    assert (status, name) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    assert state(cluster) == before


def test_a_request_above_socket_request_max_bytes_is_refused_before_decoding(
    cluster: Cluster,
) -> None:
    before = state(cluster)
    binding = api.AclBinding(principal="User:" + "p" * (SOCKET_MAX + 1024))
    status, _ = refused(cluster, "CreateAcls", api.CreateAclsRequest(creations=[binding]))
    assert status == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert state(cluster) == before


def test_too_many_items_and_overlong_fields_are_refused_whole(cluster: Cluster) -> None:
    before = state(cluster)
    many = api.DeleteTopicsRequest(names=[f"t{i}" for i in range(10_001)])
    assert refused(cluster, "DeleteTopics", many) == (
        grpc.StatusCode.INVALID_ARGUMENT, "POLICY_VIOLATION")  # fmt: skip
    value = api.IncrementalAlterConfigsRequest(resources=[api.AlterConfigsResource(
        resource_type=api.TOPIC, resource_name="seed",
        configs=[api.AlterableConfig(name="retention.ms", value="1" * 5000)])])  # fmt: skip
    assert refused(cluster, "IncrementalAlterConfigs", value) == (
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CONFIG")  # fmt: skip
    assert state(cluster) == before


# ------------------------------------------------------ item 9: lax validation


@pytest.mark.parametrize(
    "args",
    [
        ("--partitions", "-5"), ("--partitions", "0"), ("--partitions", "-1"),
        ("--replication-factor", "-3"), ("--replication-factor", "0"),
        ("--partitions", "2147483648"), ("--partitions", "1_000"),
        ("--replication-factor", "99999999999999999999"),
    ],
)  # fmt: skip
def test_quorumctl_refuses_non_positive_and_overflowing_counts(
    cluster: Cluster, args: tuple[str, str]
) -> None:
    before = state(cluster)
    assert usage_error(ctl(cluster, "topics", "create", "lax", *args), args[0])
    assert state(cluster) == before


def test_quorumctl_refuses_overflowing_numbers_everywhere(cluster: Cluster) -> None:
    before = state(cluster)
    big = "2147483648"
    assert usage_error(ctl(cluster, "topics", "alter", "--topic", "seed", "--partitions", big),
                       "--partitions")  # fmt: skip
    assert usage_error(ctl(cluster, "brokers", "unregister", "--id", big), "--id")
    assert usage_error(ctl(cluster, "elect-leaders", "--election-type", "preferred",
                           "--topic", "seed", "--partition", big), "--partition")  # fmt: skip
    assert usage_error(ctl(cluster, "features", "upgrade", "--feature",
                           f"metadata.version={big}"), "--feature")  # fmt: skip
    assert usage_error(ctl(cluster, "topics", "create", "pin", "--replica-assignment",
                           f"1:{big}"), "--replica-assignment")  # fmt: skip
    assert state(cluster) == before


def test_counts_on_the_wire_are_minus_one_or_positive(cluster: Cluster) -> None:
    before = state(cluster)
    reply = cluster.call("admin", "CreateTopics", api.CreateTopicsRequest(topics=[
        api.CreatableTopic(name="w1", num_partitions=-5, replication_factor=1),
        api.CreatableTopic(name="w2", num_partitions=0, replication_factor=1),
        api.CreatableTopic(name="w3", num_partitions=1, replication_factor=-3),
        api.CreatableTopic(name="w4", num_partitions=1, replication_factor=0)]))  # fmt: skip
    assert [t.error.error_name for t in reply.topics] == [
        "INVALID_PARTITIONS", "INVALID_PARTITIONS",
        "INVALID_REPLICATION_FACTOR", "INVALID_REPLICATION_FACTOR"]  # fmt: skip
    assert state(cluster) == before


def test_an_empty_replica_assignment_is_a_usage_error(cluster: Cluster) -> None:
    before = state(cluster)
    assert usage_error(ctl(cluster, "topics", "create", "empty-pin", "--replica-assignment", ""),
                       "--replica-assignment")  # fmt: skip
    assert "empty-pin" not in ctl(cluster, "topics", "list").stdout.splitlines()
    assert state(cluster) == before


@pytest.mark.parametrize(
    "config",
    ["retention.ms=\u0663\u0660\u0660", "retention.ms=1_000", "min.insync.replicas=\uff11"],
)
def test_config_values_take_ascii_digits_only(cluster: Cluster, config: str) -> None:
    before = state(cluster)
    done = ctl(cluster, "configs", "alter", "--entity-type", "topics", "--entity-name", "seed",
               "--add-config", config)  # fmt: skip
    assert done.returncode == 1 and "INVALID_CONFIG" in done.stderr, done.stderr
    created = ctl(cluster, "topics", "create", "digits", "--config", config)
    assert created.returncode == 1 and "INVALID_CONFIG" in created.stderr, created.stderr
    assert state(cluster) == before


def test_a_broker_config_needs_an_ascii_broker_id(cluster: Cluster) -> None:
    before = state(cluster)
    done = ctl(cluster, "configs", "alter", "--entity-type", "brokers", "--entity-name",
               "\u00b2", "--add-config", "num.partitions=2")  # fmt: skip
    assert usage_error(done, "--entity-name")
    reply = cluster.call("admin", "IncrementalAlterConfigs", api.IncrementalAlterConfigsRequest(
        resources=[api.AlterConfigsResource(resource_type=api.BROKER, resource_name=name,
                                            configs=[api.AlterableConfig(name="num.partitions",
                                                                         value="2")])
                   for name in ("\u00b2", "\u0661", "2147483648")]))  # fmt: skip
    assert [r.error.error_name for r in reply.resources] == ["INVALID_REQUEST"] * 3
    assert state(cluster) == before


@pytest.mark.parametrize(
    ("principal", "why"),
    [("User:", "not Type:name"), ("User:al\x1bice", "control characters"),
     ("User:" + "a" * 10_000, "longer than")],
)  # fmt: skip
def test_acl_principals_must_be_sane(cluster: Cluster, principal: str, why: str) -> None:
    before = state(cluster)
    done = ctl(cluster, "acls", "add", "--allow-principal", principal, "--operation", "read",
               "--topic", "seed")  # fmt: skip
    assert done.returncode == 1 and "INVALID_REQUEST" in done.stderr and why in done.stderr
    assert "Traceback" not in done.stderr
    assert state(cluster) == before


def test_an_upgrade_to_level_zero_of_an_unset_feature_is_refused(cluster: Cluster) -> None:
    before = state(cluster)
    done = ctl(cluster, "features", "upgrade", "--feature", "metadata.version=0")
    assert usage_error(done, "--feature") and "upgraded" not in done.stdout
    reply = cluster.call("admin", "UpdateFeatures", api.UpdateFeaturesRequest(updates=[
        api.FeatureUpdate(feature="metadata.version", max_version_level=0)]))  # fmt: skip
    assert reply.results[0].error.error_name == "INVALID_UPDATE_VERSION"
    assert state(cluster) == before
