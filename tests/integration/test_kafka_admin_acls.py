"""Forwarded admin requests with ACLs on: the broker forwards each Kafka client's
principal (its certificate's subject on the SSL listener), and the active
controller's authorizer decides for that client, not for the broker.

Controllers and CN=admin are super users; broker 101 has CLUSTER_ACTION (which
alone lets it forward a principal); CN=alice has nothing, CN=bob has CREATE on
the cluster. Through the same broker alice is refused (TOPIC_AUTHORIZATION_FAILED,
nothing created) and bob succeeds; auto-creation needs CREATE the same way; a
client that is not a broker cannot assert a principal over gRPC."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from quorum.admin_client import AdminClient, AdminError
from quorum.authz.authorizer import (
    CLUSTER_NAME,
    STANDARD_AUTHORIZER,
    Operation,
    Permission,
    ResourceType,
)
from quorum.common.local_ca import IssuedFiles, LocalCa
from quorum.common.tls import FORWARDED_PRINCIPAL
from quorum.gen import admin_pb2 as api
from tests.integration.controller_cluster import Cluster, free_port, run
from tests.security.secure_cluster import client_settings, create_mtls_cluster, tls_properties

pytestmark = pytest.mark.slow
SUPER_USERS = "User:CN=controller-1;User:CN=controller-2;User:CN=controller-3;User:CN=admin"
BROKER = 101


@dataclass
class Secured:
    cluster: Cluster
    ca: LocalCa
    ssl_port: int

    def client(self, name: str) -> IssuedFiles:
        return self.ca.write(self.cluster.root / "certs", name)


def allow(
    principal: str, resource_type: ResourceType, name: str, op: Operation, prefixed: bool = False
) -> api.AclBinding:
    return api.AclBinding(
        resource_type=resource_type, resource_name=name, pattern_type=4 if prefixed else 3,
        principal=principal,
        host="*", operation=op, permission_type=Permission.ALLOW,
    )  # fmt: skip


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = Path(tmp_path_factory.mktemp("kafka-admin-acls"))
    ca = LocalCa("kafka admin ACLs CA")
    cluster = create_mtls_cluster(
        root, ca, extra={"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": SUPER_USERS}
    )
    cluster.start()
    try:
        cluster.wait_for_leader(timeout_s=30)
        reply = cluster.call("admin", "CreateAcls", api.CreateAclsRequest(creations=[
            allow(f"User:CN=broker-{BROKER}", ResourceType.CLUSTER, CLUSTER_NAME,
                  Operation.CLUSTER_ACTION),
            allow("User:CN=bob", ResourceType.CLUSTER, CLUSTER_NAME, Operation.CREATE),
            allow("User:CN=bob", ResourceType.TOPIC, "bob", Operation.WRITE, prefixed=True),
            # Metadata answers leave out what a client may not DESCRIBE
            allow("User:*", ResourceType.TOPIC, "*", Operation.DESCRIBE),
        ]))  # fmt: skip
        assert all(r.error.error_code == 0 for r in reply.results), reply
        files = ca.write(root / "certs", f"broker-{BROKER}")
        ssl_port = free_port()
        props = tls_properties(files, None)
        cluster.add_brokers(
            BROKER,
            broker__heartbeat__interval__ms="500",
            listeners=f"SSL://127.0.0.1:{ssl_port}",
            listener__security__protocol__map="SSL:SSL,CONTROLLER:SSL",
            ssl__certificate__location=props["ssl.certificate.location"],
            ssl__key__location=props["ssl.key.location"],
            ssl__ca__location=props["ssl.ca.location"],
            ssl__client__auth="required",
            authorizer__class__name=STANDARD_AUTHORIZER,
            super__users=SUPER_USERS,
        )
        cluster.start_brokers()
        cluster.wait_until(lambda: _online(cluster), 30, "the broker ONLINE")
        yield Secured(cluster, ca, ssl_port)
    finally:
        cluster.stop_all()


def _online(cluster: Cluster) -> bool:
    view = cluster.call("admin", "DescribeCluster", api.DescribeClusterRequest())
    return [b.state for b in view.brokers] == ["ONLINE"]


def kafka_config(secured: Secured, name: str) -> dict[str, str]:
    files = secured.client(name)
    return {
        "bootstrap.servers": f"127.0.0.1:{secured.ssl_port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(files.ca),
        "ssl.certificate.location": str(files.certificate),
        "ssl.key.location": str(files.key),
    }


def topic_names(cluster: Cluster) -> set[str]:
    return {t.name for t in cluster.call("admin", "ListTopics", api.ListTopicsRequest()).topics}


def test_create_topics_is_decided_for_the_client_not_the_broker(secured: Secured) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import NewTopic

    alice = KafkaAdmin(kafka_config(secured, "alice"))
    with pytest.raises(KafkaException) as refused:
        alice.create_topics([NewTopic("alices", 1, 1)], operation_timeout=10)["alices"].result()
    assert refused.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    assert "User:CN=alice" in refused.value.args[0].str()
    assert "alices" not in topic_names(secured.cluster)

    bob = KafkaAdmin(kafka_config(secured, "bob"))
    bob.create_topics([NewTopic("bobs", 1, 1)], operation_timeout=10)["bobs"].result()
    assert "bobs" in topic_names(secured.cluster)
    assert "bobs" in bob.list_topics(timeout=10).topics


def test_auto_creation_needs_create_too(secured: Secured) -> None:
    from confluent_kafka import Producer

    def produce(name: str, topic: str) -> str | None:
        errors: list[str] = []
        producer = Producer({**kafka_config(secured, name), "message.timeout.ms": 5000,
                             "topic.metadata.propagation.max.ms": 1000})  # fmt: skip
        producer.produce(topic, b"x", on_delivery=lambda e, m: errors.append(str(e) if e else ""))
        producer.flush(15)
        return errors[0] if errors else "no answer"

    assert produce("alice", "alice-auto") != ""
    assert "alice-auto" not in topic_names(secured.cluster)
    assert produce("bob", "bob-auto") == ""
    assert "bob-auto" in topic_names(secured.cluster)


def test_only_a_broker_may_forward_a_principal(secured: Secured) -> None:
    """alice's own gRPC call claiming to be the super user CN=admin is refused
    before the request is looked at."""
    tls = client_settings(secured.client("alice"))

    async def claim() -> None:
        client = AdminClient(secured.cluster.voter_addresses(), secured.cluster.cluster_id,
                             tls=tls)  # fmt: skip
        try:
            await client.admin(
                "CreateTopics",
                api.CreateTopicsRequest(topics=[api.CreatableTopic(name="forged")]),
                deadline_s=10,
                metadata=((FORWARDED_PRINCIPAL, b"User:CN=admin"),),
            )
        finally:
            await client.close()

    with pytest.raises(AdminError) as refused:
        run(claim())
    assert refused.value.name == "CLUSTER_AUTHORIZATION_FAILED"
    assert refused.value.error.status is grpc.StatusCode.PERMISSION_DENIED
    assert "forward" in str(refused.value)
    assert "forged" not in topic_names(secured.cluster)
