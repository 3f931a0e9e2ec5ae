"""Compaction on real brokers (issue 34): librdkafka produces 100,000 records over
1,000 keys to a topic created with `cleanup.policy=compact`; every replica's
cleaner compacts its own log, a consumer from the beginning sees every key's
latest value at strictly increasing offsets with gaps, the replicas agree on
every key's latest (offset, value), and a record without a key is refused.
test_log_cleaner_kills.py SIGKILLs a broker while it cleans."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_agent.partitions.compare import compare_compacted, stored_batches
from broker_agent.partitions.record_batch import parse_header
from broker_agent.partitions.record_codec import UnsupportedCompression, records_of
from tests.integration.controller_cluster import Cluster, ctl_json, running_cluster
from tests.integration.kafka_wire import wait_for_topic_everywhere

pytestmark = pytest.mark.slow
BROKERS = (101, 102, 103)
TOPIC = "changelog"
KEYS = 1_000
RECORDS = 100_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("compaction")) as c:
        c.add_brokers(
            *BROKERS,
            broker__heartbeat__interval__ms="500",
            log__cleaner__backoff__ms="200",
            log__cleaner__dedupe__buffer__size="1048576",
            log__cleaner__threads="2",  # two tasks, never on one partition; 512 KiB maps
        )
        c.start_brokers()
        c.wait_until(
            lambda: sorted(r["Id"] for r in ctl_json(c, "brokers", "list")
                           if r["State"] == "ONLINE") == sorted(BROKERS),
            20, "the brokers ONLINE",
        )  # fmt: skip
        yield c


def bootstrap(cluster: Cluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.brokers[b].port}" for b in BROKERS)


def replica_dir(cluster: Cluster, broker: int, topic: str = TOPIC) -> Path:
    return cluster.brokers[broker].data_dir / f"{topic}-0"


def create_compacted(cluster: Cluster, topic: str) -> None:
    """One partition on the three brokers, compacted, small segments, eager cleaner."""
    ctl_json(cluster, "topics", "create", topic, "--partitions", "1",
             "--replication-factor", "3", "--config", "cleanup.policy=compact",
             "--config", "segment.bytes=262144",
             "--config", "min.cleanable.dirty.ratio=0.1")  # fmt: skip
    wait_for_topic_everywhere(cluster, topic)


def assert_keyless_refused(producer: Any, topic: str) -> None:
    """A record without a key: Kafka's INVALID_RECORD, as a compacted topic answers."""
    from confluent_kafka import KafkaError

    refused: list[Any] = []
    producer.produce(topic, b"no key", on_delivery=lambda e, m: refused.append(e))
    producer.flush(30)
    assert refused and refused[0] is not None
    assert refused[0].code() == KafkaError.INVALID_RECORD


def below_active_segment(directory: Path) -> int:
    """Records a replica holds below its active (newest) segment (a batch it cannot
    read counts as one)."""
    bases = sorted(int(p.name.split(".")[0]) for p in directory.glob("*.log"))
    count = 0
    for base, _, data in stored_batches(directory):
        if base < bases[-1]:
            try:
                count += len(records_of(data)[1])
            except UnsupportedCompression:
                count += 1
    return count


def test_a_compacted_topic_keeps_every_keys_latest_value(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    create_compacted(cluster, TOPIC)
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})  # fmt: skip
    errors: list[str] = []
    latest: dict[bytes, bytes] = {}
    for i in range(RECORDS):
        key, value = b"key-%d" % (i % KEYS), b"value-%d" % i
        latest[key] = value
        producer.produce(TOPIC, value, key, on_delivery=lambda e, m: e and errors.append(str(e)))
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0 and not errors, errors[:3]

    assert_keyless_refused(producer, TOPIC)

    # Every replica cleans its own log until at most a small multiple of the
    # key count is left below its active segment.
    dirs = [replica_dir(cluster, b) for b in BROKERS]
    cluster.wait_until(
        lambda: all(below_active_segment(d) <= 3 * KEYS for d in dirs), 120,
        "every replica compacted",
    )  # fmt: skip

    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "unused",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: dict[bytes, bytes] = {}
    offsets: list[int] = []
    try:
        while len(offsets) < RECORDS and (not offsets or offsets[-1] < RECORDS - 1):
            messages = consumer.consume(1000, timeout=2)
            if not messages:
                break
            for message in messages:
                assert message.error() is None, message.error()
                seen[message.key()] = message.value()
                offsets.append(message.offset())
    finally:
        consumer.close()
    assert seen == latest
    assert offsets == sorted(set(offsets)) and offsets[-1] == RECORDS - 1
    assert len(offsets) < RECORDS  # the gaps where superseded records were
    assert compare_compacted(dirs, RECORDS) == []


@pytest.mark.parametrize(("codec", "number"), [("snappy", 2), ("lz4", 3), ("zstd", 4)])
def test_snappy_lz4_and_zstd_batches_are_compacted(
    cluster: Cluster, codec: str, number: int
) -> None:
    """librdkafka producing in each of Kafka's other codecs: every replica's cleaner
    reads those batches and writes them back in the same codec (snappy in xerial's
    framing), librdkafka reads the rewritten ones, and a keyless record inside such a
    batch is refused as Kafka refuses it. Before, these batches were kept whole: a
    compacted topic written by such a producer never shrank."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    keys, records = 100, 20_000
    topic = f"changelog-{codec}"
    create_compacted(cluster, topic)
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                         "linger.ms": 5, "compression.type": codec})  # fmt: skip
    errors: list[str] = []
    latest: dict[bytes, bytes] = {}
    for i in range(records):
        key, value = b"key-%d" % (i % keys), b"value-%d-" % i + b"x" * 40
        latest[key] = value
        producer.produce(topic, value, key, on_delivery=lambda e, m: e and errors.append(str(e)))
    assert producer.flush(60) == 0 and not errors, errors[:3]
    assert_keyless_refused(producer, topic)

    dirs = [replica_dir(cluster, b, topic) for b in BROKERS]
    cluster.wait_until(
        lambda: all(below_active_segment(d) <= 3 * keys for d in dirs), 120,
        f"every replica compacted its {codec} batches",
    )  # fmt: skip
    for directory in dirs:
        codecs = {parse_header(data).attributes & 0x07 for _, _, data in stored_batches(directory)}
        assert codecs == {number}

    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "unused",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: dict[bytes, bytes] = {}
    last = -1
    try:
        while last < records - 1:
            messages = consumer.consume(1000, timeout=5)
            assert messages, f"nothing after offset {last}"
            for message in messages:
                assert message.error() is None, message.error()
                seen[message.key()] = message.value()
                last = message.offset()
    finally:
        consumer.close()
    assert seen == latest
    assert compare_compacted(dirs, records) == []


def test_a_compression_bomb_is_stored_kept_whole_and_cleaning_goes_on(cluster: Cluster) -> None:
    """Hostile input over the wire: librdkafka sends one zstd batch of a few KiB whose
    record decompresses to 80 MiB (past the brokers' 64 MiB bound). It is accepted
    (it has a key), never held decompressed: each replica's cleaner keeps it whole
    and goes on compacting the records around it, and every broker stays up."""
    from confluent_kafka import Producer

    topic, keys = "bombs", 50
    create_compacted(cluster, topic)
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                         "compression.type": "zstd", "message.max.bytes": 100_000_000,
                         "linger.ms": 5})  # fmt: skip
    errors: list[str] = []
    note = lambda e, m: e and errors.append(str(e))  # noqa: E731
    producer.produce(topic, bytes(80 << 20), b"bomb", on_delivery=note)
    assert producer.flush(60) == 0 and not errors, errors
    for i in range(10_000):
        producer.produce(topic, b"value-%d-" % i + b"x" * 40, b"key-%d" % (i % keys),
                         on_delivery=note)  # fmt: skip
    assert producer.flush(60) == 0 and not errors, errors[:3]

    dirs = [replica_dir(cluster, b, topic) for b in BROKERS]
    cluster.wait_until(
        lambda: all(below_active_segment(d) <= 3 * keys for d in dirs), 120,
        "every replica compacted around the bomb",
    )  # fmt: skip
    for directory in dirs:
        (bomb,) = [data for base, _, data in stored_batches(directory) if base == 0]
        assert len(bomb) < 1 << 20 and parse_header(bomb).attributes & 0x07 == 4
    assert all(cluster.brokers[b].alive() for b in BROKERS)
