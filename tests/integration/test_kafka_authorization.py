"""ACLs on the Kafka requests, on real brokers with SSL listeners and client
certificates: Produce needs WRITE, a consumer's Fetch READ, Metadata DESCRIBE,
a follower's Fetch CLUSTER_ACTION (the brokers replicate over their SSL
inter-broker listener with their own certificates); denials are Kafka's
TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.kafka.versions import ApiKey
from quorum.common.local_ca import IssuedFiles, LocalCa
from tests.integration.controller_cluster import (
    Cluster,
    ctl,
    ctl_json,
    free_port,
    running_cluster,
)
from tests.integration.kafka_wire import KafkaSocket, fetch_values, metadata_v12

pytestmark = pytest.mark.slow
BROKERS = (101, 102, 103)
TOPIC = "guarded"


@dataclass
class Secured:
    cluster: Cluster
    ssl_ports: dict[int, int]
    plaintext_ports: dict[int, int]
    writer: IssuedFiles
    reader: IssuedFiles


def acl(cluster: Cluster, principal: str, operation: str, *resource: str) -> None:
    done = ctl(cluster, "acls", "add", "--allow-principal", principal, "--operation", operation,
               *resource)  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("kafka-acls")
    ca = LocalCa("kafka ACL CA")
    certs = root / "certs"
    with running_cluster(root) as cluster:
        for b in BROKERS:
            acl(cluster, f"User:CN=broker-{b}", "cluster-action", "--cluster")
        acl(cluster, "User:CN=writer", "write", "--topic", TOPIC)
        acl(cluster, "User:CN=reader", "read", "--topic", TOPIC)
        ssl_ports = {b: free_port() for b in BROKERS}
        plaintext_ports = {b: free_port() for b in BROKERS}
        for b in BROKERS:
            files = ca.write(certs, f"broker-{b}")
            cluster.add_brokers(
                b,
                broker__heartbeat__interval__ms="500",
                listeners=f"SSL://127.0.0.1:{ssl_ports[b]},"
                f"PLAINTEXT://127.0.0.1:{plaintext_ports[b]}",
                inter__broker__listener__name="SSL",
                ssl__certificate__location=str(files.certificate),
                ssl__key__location=str(files.key),
                ssl__ca__location=str(files.ca),
                ssl__client__auth="required",
                authorizer__class__name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            )
        cluster.start_brokers()
        cluster.wait_until(
            lambda: [r["State"] for r in ctl_json(cluster, "brokers", "list")] == ["ONLINE"] * 3,
            30,
            "the brokers ONLINE",
        )
        ctl_json(cluster, "topics", "create", TOPIC, "--partitions", "1",
                 "--replication-factor", "3")  # fmt: skip
        yield Secured(
            cluster, ssl_ports, plaintext_ports,
            ca.write(certs, "writer"), ca.write(certs, "reader"),
        )  # fmt: skip


def client_config(secured: Secured, files: IssuedFiles) -> dict[str, str]:
    return {
        "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in secured.ssl_ports.values()),
        "security.protocol": "SSL",
        "ssl.ca.location": str(files.ca),
        "ssl.certificate.location": str(files.certificate),
        "ssl.key.location": str(files.key),
    }


def produce(secured: Secured, files: IssuedFiles, values: list[bytes]) -> list[str]:
    from confluent_kafka import Producer

    outcomes: list[str] = []
    producer = Producer({**client_config(secured, files), "acks": "all",
                         "message.timeout.ms": 20000})  # fmt: skip
    for value in values:
        producer.produce(TOPIC, value, on_delivery=lambda err, _m: outcomes.append(
            "ok" if err is None else err.name()))  # fmt: skip
    producer.flush(30)
    return outcomes


def consume(secured: Secured, files: IssuedFiles, want: int) -> tuple[list[bytes], list[str]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**client_config(secured, files), "group.id": "unused",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[bytes] = []
    errors: list[str] = []
    deadline = time.monotonic() + 15
    try:
        while len(values) < want and not errors and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=0.5):
                if msg.error():
                    errors.append(msg.error().name())
                else:
                    values.append(msg.value())
    finally:
        consumer.close()
    return values, errors


def test_a_writer_produces_with_acks_all_and_a_reader_reads(secured: Secured) -> None:
    # acks=all completes only when the followers, fetching over SSL as
    # User:CN=broker-N with CLUSTER_ACTION, have the records.
    assert produce(secured, secured.writer, [b"one", b"two"]) == ["ok", "ok"]
    values, errors = consume(secured, secured.reader, 2)
    assert not errors and values[:2] == [b"one", b"two"]


def test_a_reader_may_not_write_nor_a_writer_read(secured: Secured) -> None:
    assert produce(secured, secured.reader, [b"nope"]) == ["TOPIC_AUTHORIZATION_FAILED"]
    values, errors = consume(secured, secured.writer, 1)
    assert values == [] and errors == ["TOPIC_AUTHORIZATION_FAILED"]


def test_anonymous_sees_no_topic_and_cannot_fetch_as_a_replica(secured: Secured) -> None:
    port = secured.plaintext_ports[BROKERS[0]]
    with KafkaSocket("127.0.0.1", port) as s:
        listing = s.request(ApiKey.METADATA, 12, metadata_v12(None))
        assert [t.name for t in listing.topics] == []
        named = s.request(ApiKey.METADATA, 12, metadata_v12([TOPIC]))
        assert named.topics[0].error_code == ErrorCode.topic_authorization_failed
        as_replica = {**fetch_values(TOPIC, 0), "replica_id": BROKERS[1]}
        answer = s.request(ApiKey.FETCH, 12, as_replica)
        assert answer.responses[0].partitions[0].error_code == (
            ErrorCode.topic_authorization_failed
        )
