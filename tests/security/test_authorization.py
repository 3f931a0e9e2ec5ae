"""The StandardAuthorizer on a real mTLS cluster: principals from certificates,
ACLs from the metadata log, refusals that change nothing.

Controllers and the operator (CN=admin) are super users; broker 101 gets in with
a CLUSTER_ACTION ACL; alice and the broker's certificate get only what ACLs give.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from quorum.admin_client import AdminClient, AdminError
from quorum.authz.authorizer import (
    CLUSTER_NAME,
    STANDARD_AUTHORIZER,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from quorum.common.local_ca import IssuedFiles, LocalCa
from quorum.common.tls import TlsSettings
from quorum.gen import admin_pb2 as api
from tests.integration.controller_cluster import Cluster, run
from tests.security.secure_cluster import (
    add_mtls_brokers,
    binding,
    client_settings,
    create_acls,
    create_mtls_cluster,
    denials,
    state,
)

SUPER_USERS = "User:CN=controller-1;User:CN=controller-2;User:CN=controller-3;User:CN=admin"
BROKER = 101


@pytest.fixture(scope="module")
def ca() -> LocalCa:
    return LocalCa("authorization CA")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, ca: LocalCa) -> Iterator[Cluster]:
    root = Path(tmp_path_factory.mktemp("authz"))
    c = create_mtls_cluster(
        root, ca, extra={"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": SUPER_USERS}
    )
    c.start()
    try:
        c.wait_for_leader(timeout_s=30)
        create_acls(c, binding(ResourceType.CLUSTER, CLUSTER_NAME, f"User:CN=broker-{BROKER}",
                               Operation.CLUSTER_ACTION))  # fmt: skip
        add_mtls_brokers(c, ca, BROKER, broker__heartbeat__interval__ms="500")
        c.start_brokers()
        # Registered and unfenced before any test: tests that check nothing changed
        # must not see the broker's own records land meanwhile, in any order.
        c.wait_until(
            lambda: (
                [
                    (b.broker_id, b.state)
                    for b in c.call(
                        "admin", "DescribeCluster", api.DescribeClusterRequest()
                    ).brokers
                ]
                == [(BROKER, "ONLINE")]
            ),
            30,
            f"broker {BROKER} ONLINE",
        )
        yield c
    finally:
        c.stop_all()


def identity(cluster: Cluster, ca: LocalCa, name: str) -> TlsSettings:
    return client_settings(ca.write(cluster.root / "certs", name))


def call_as(
    cluster: Cluster, tls: TlsSettings, method: str, request: Any, kind: str = "admin"
) -> Any:
    async def go() -> Any:
        client = AdminClient(cluster.voter_addresses(), cluster.cluster_id, tls=tls)
        try:
            return await client.admin(method, request, deadline_s=15)
        finally:
            await client.close()

    return run(go())


def refused_as(cluster: Cluster, tls: TlsSettings, method: str, request: Any) -> AdminError:
    with pytest.raises(AdminError) as refused:
        call_as(cluster, tls, method, request)
    assert refused.value.error.status is grpc.StatusCode.PERMISSION_DENIED
    return refused.value


def create_topic(name: str) -> api.CreateTopicsRequest:
    return api.CreateTopicsRequest(topics=[
        api.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
    ])  # fmt: skip


def test_a_valid_certificate_without_an_acl_is_denied_and_nothing_changes(
    cluster: Cluster, ca: LocalCa
) -> None:
    alice = identity(cluster, ca, "alice")
    before = state(cluster)
    # Denials are logged at most 5 a second (the rest summed): a fresh second, so
    # this test's line is logged whatever denials an earlier test flooded.
    time.sleep(1.1)
    error = refused_as(cluster, alice, "CreateTopics", create_topic("alice-topic"))
    assert error.name == "TOPIC_AUTHORIZATION_FAILED"
    assert "User:CN=alice" in error.error.message
    assert refused_as(cluster, alice, "CreateAcls", api.CreateAclsRequest(creations=[
        binding(ResourceType.TOPIC, "*", "User:CN=alice", Operation.ALL)
    ])).name == "CLUSTER_AUTHORIZATION_FAILED"  # fmt: skip
    assert refused_as(cluster, alice, "UpdateFeatures", api.UpdateFeaturesRequest(
        updates=[api.FeatureUpdate(feature="metadata.version", max_version_level=1)]
    )).name == "CLUSTER_AUTHORIZATION_FAILED"  # fmt: skip
    assert state(cluster) == before
    assert denials(cluster, "TOPIC_AUTHORIZATION_FAILED", "CreateTopics") >= 1
    logs = "".join(p.log_text() for p in cluster.procs.values())
    assert "denied CreateTopics to User:CN=alice" in logs


def test_a_broker_certificate_cannot_call_admin_apis(cluster: Cluster) -> None:
    certs = cluster.root / "certs"  # the files add_mtls_brokers wrote
    broker_tls = client_settings(
        IssuedFiles(
            certs / f"broker-{BROKER}.pem", certs / f"broker-{BROKER}.key", certs / "ca.pem"
        )
    )

    def online() -> bool:
        reply = cluster.call("admin", "DescribeCluster", api.DescribeClusterRequest())
        return any(b.broker_id == BROKER and b.state == "ONLINE" for b in reply.brokers)

    cluster.wait_until(online, 30, "broker ONLINE with its CLUSTER_ACTION ACL")
    before = state(cluster)
    for method, request in (
        ("CreateTopics", create_topic("from-broker")),
        ("DeleteAcls", api.DeleteAclsRequest(filters=[api.AclBindingFilter(resource_type=1)])),
        ("UnregisterBroker", api.UnregisterBrokerRequest(broker_id=BROKER)),
        ("ElectLeaders", api.ElectLeadersRequest(election_type=0)),
    ):
        refused_as(cluster, broker_tls, method, request)
    assert state(cluster) == before


def test_super_users_can_do_everything(cluster: Cluster) -> None:
    admin = cluster.client_tls
    assert admin is not None
    reply = call_as(cluster, admin, "CreateTopics", create_topic("admin-topic"))
    assert reply.topics[0].error.error_code == 0
    alter = api.IncrementalAlterConfigsRequest(resources=[api.AlterConfigsResource(
        resource_type=api.TOPIC, resource_name="admin-topic",
        configs=[api.AlterableConfig(name="retention.ms", value="1000")],
    )])  # fmt: skip
    assert (
        call_as(cluster, admin, "IncrementalAlterConfigs", alter).resources[0].error.error_code == 0
    )
    assert call_as(cluster, admin, "DescribeAcls", api.DescribeAclsRequest(
        filter=api.AclBindingFilter(resource_type=1, pattern_type=1, operation=1, permission_type=1)
    )).bindings  # fmt: skip
    deleted = call_as(
        cluster, admin, "DeleteTopics", api.DeleteTopicsRequest(names=["admin-topic"])
    )
    assert deleted.topics[0].error.error_code == 0


def test_deny_beats_allow_and_prefixed_acls_match_as_kafkas(cluster: Cluster, ca: LocalCa) -> None:
    bob = identity(cluster, ca, "bob")
    create_acls(
        cluster,
        binding(ResourceType.TOPIC, "team-", "User:CN=bob", Operation.ALL,
                pattern=PatternType.PREFIXED),
        binding(ResourceType.TOPIC, "team-secret", "User:CN=bob", Operation.CREATE,
                Permission.DENY),
    )  # fmt: skip
    assert (
        call_as(cluster, bob, "CreateTopics", create_topic("team-a")).topics[0].error.error_code
        == 0
    )
    before = state(cluster)
    assert refused_as(cluster, bob, "CreateTopics", create_topic("team-secret")).name == (
        "TOPIC_AUTHORIZATION_FAILED"
    )
    for outside in ("team", "xteam-a", "TEAM-b"):
        refused_as(cluster, bob, "CreateTopics", create_topic(outside))
    assert state(cluster) == before
    # Listings leave out what bob may not describe.
    listed = call_as(cluster, bob, "ListTopics", api.ListTopicsRequest())
    assert {t.name for t in listed.topics} == {"team-a"}


def test_a_broker_without_a_cluster_action_acl_is_refused_and_exits(
    cluster: Cluster, ca: LocalCa
) -> None:
    before = state(cluster)
    add_mtls_brokers(cluster, ca, 102)
    cluster.start_brokers(102)
    popen = cluster.brokers[102].popen
    assert popen is not None
    assert popen.wait(30) == 3  # broker-agent's EXIT_REFUSED
    log = cluster.brokers[102].log_text()
    assert "CLUSTER_AUTHORIZATION_FAILED" in log and "User:CN=broker-102" in log
    assert state(cluster) == before
