"""Topic auto-creation as Kafka's brokers do it: a producer's first Metadata
request for an unknown topic creates it through the controller with the
broker's `num.partitions` / `default.replication.factor`; a broker with
`auto.create.topics.enable=false` answers UNKNOWN_TOPIC_OR_PARTITION and
creates nothing; internal topics and bad names are never created this way."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.kafka.codec import NULL_UUID
from tests.integration.controller_cluster import Cluster, ctl_json, running_cluster
from tests.integration.kafka_wire import KafkaSocket

pytestmark = pytest.mark.slow
CREATES, REFUSES = 101, 102
METADATA = 3


def started(c: Cluster, count: int) -> Cluster:
    c.start_brokers()
    c.wait_until(
        lambda: [r["State"] for r in ctl_json(c, "brokers", "list")] == ["ONLINE"] * count,
        20,
        "the brokers ONLINE",
    )
    return c


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two brokers that create topics with 3 partitions of 2 replicas."""
    with running_cluster(tmp_path_factory.mktemp("auto-create")) as c:
        for broker_id in (CREATES, CREATES + 1):
            c.add_brokers(broker_id, broker__heartbeat__interval__ms="500",
                          num__partitions="3", default__replication__factor="2")  # fmt: skip
        yield started(c, 2)


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A broker with auto.create.topics.enable=false (alone: a client may ask any broker)."""
    with running_cluster(tmp_path_factory.mktemp("no-auto-create")) as c:
        c.add_brokers(REFUSES, broker__heartbeat__interval__ms="500",
                      auto__create__topics__enable="false")  # fmt: skip
        yield started(c, 1)


def metadata_error(port: int, name: str, allow: bool) -> ErrorCode:
    with KafkaSocket("127.0.0.1", port) as sock:
        answer = sock.request(
            METADATA, 12,
            {"topics": [{"name": name, "topic_id": NULL_UUID}], "allow_auto_topic_creation": allow,
             "include_topic_authorized_operations": False},
        )  # fmt: skip
    return answer.topics[0].error_code  # type: ignore[no-any-return]


def topics(cluster: Cluster) -> dict[str, tuple[int, int]]:
    return {
        t["Topic"]: (t["PartitionCount"], t["ReplicationFactor"])
        for t in ctl_json(cluster, "topics", "list")
    }


def kcat_produce(cluster: Cluster, broker_id: int, topic: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kcat", "-b", f"127.0.0.1:{cluster.brokers[broker_id].port}", "-P", "-t", topic,
         "-X", "message.timeout.ms=5000", "-X", "topic.metadata.propagation.max.ms=1000"],
        input="one\ntwo\n", capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_kcat_creates_an_unknown_topic_with_the_broker_defaults(cluster: Cluster) -> None:
    produced = kcat_produce(cluster, CREATES, "new-topic")
    assert produced.returncode == 0, produced.stderr
    assert topics(cluster)["new-topic"] == (3, 2)
    consumed = subprocess.run(
        ["kcat", "-b", f"127.0.0.1:{cluster.brokers[CREATES].port}", "-C", "-t", "new-topic",
         "-o", "beginning", "-e", "-f", "%s\n"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert sorted(consumed.stdout.split()) == ["one", "two"]


def test_auto_creation_off_answers_unknown_topic_and_creates_nothing(refusing: Cluster) -> None:
    produced = kcat_produce(refusing, REFUSES, "not-wanted")
    assert produced.returncode != 0
    assert "Unknown topic" in produced.stderr, produced.stderr
    port = refusing.brokers[REFUSES].port
    assert metadata_error(port, "not-wanted", allow=True) == ErrorCode.unknown_topic_or_partition
    assert topics(refusing) == {}


def test_metadata_creates_only_when_allowed_and_never_internal_or_bad_names(
    cluster: Cluster,
) -> None:
    port = cluster.brokers[CREATES].port

    def ask(name: str, allow: bool) -> ErrorCode:
        return metadata_error(port, name, allow)

    assert ask("consumer-side", allow=False) == ErrorCode.unknown_topic_or_partition
    assert ask("__consumer_offsets", allow=True) == ErrorCode.unknown_topic_or_partition
    assert ask("a/b", allow=True) == ErrorCode.invalid_topic_exception
    assert ask("producer-side", allow=True) == ErrorCode.none  # created and answered at once
    listed = topics(cluster)
    assert "producer-side" in listed
    assert not {"consumer-side", "__consumer_offsets", "a/b"} & set(listed)
