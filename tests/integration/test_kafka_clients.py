"""Real Kafka clients produce to and consume from real brokers: confluent-kafka
(librdkafka), aiokafka, kafka-python and kcat, each with acks=1 and acks=all on
an RF 3 topic (followers replicate over Kafka's Fetch). Every record a client
was told is written is read back, in order, once, with its key and headers."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers, ctl_json
from tests.integration.kafka_wire import leader_of, wait_for_topic_everywhere

pytestmark = pytest.mark.slow
BROKERS = (101, 102, 103)
COUNT = 300
Record = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_online_brokers(tmp_path_factory.mktemp("clients"), *BROKERS) as c:
        yield c


def bootstrap(cluster: Cluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.brokers[b].port}" for b in BROKERS)


def new_topic(cluster: Cluster, name: str, partitions: int = 3) -> str:
    ctl_json(cluster, "topics", "create", name, "--partitions", str(partitions),
             "--replication-factor", "3")  # fmt: skip
    wait_for_topic_everywhere(cluster, name)
    return name


def records(tag: str) -> list[Record]:
    return [
        (f"key-{i % 7}".encode(), f"{tag}-{i:05d}".encode(), [("n", str(i).encode())])
        for i in range(COUNT)
    ]


def check(sent: list[Record], got: list[Record]) -> None:
    """Everything sent came back once; per key (one partition each) in order."""
    assert sorted(v for _, v, _ in got) == sorted(v for _, v, _ in sent)
    for key in {k for k, _, _ in sent}:
        assert [v for k, v, _ in got if k == key] == [v for k, v, _ in sent if k == key]
    headers = {v: h for _, v, h in got}
    assert all(headers[v] == h for _, v, h in sent)


# ------------------------------------------------------------- confluent-kafka


@pytest.mark.parametrize(
    ("acks", "idempotence", "compression"),
    [("1", False, "none"), ("all", False, "gzip"), ("all", True, "lz4"), ("all", True, "zstd")],
)
def test_confluent_kafka_produces_and_consumes(
    cluster: Cluster, acks: str, idempotence: bool, compression: str
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = new_topic(cluster, f"librdkafka-{acks}-{int(idempotence)}-{compression}")
    sent = records(topic)
    delivered: list[str] = []
    errors: list[str] = []

    def report(err: object, msg: object) -> None:
        (errors if err else delivered).append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": acks,
                         "enable.idempotence": idempotence, "linger.ms": 5,
                         "compression.type": compression})  # fmt: skip
    for key, value, headers in sent:
        producer.produce(topic, value, key, headers=headers, on_delivery=report)
    assert producer.flush(30) == 0
    assert not errors and len(delivered) == COUNT

    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got: list[Record] = []
    try:
        for _ in range(200):
            if len(got) >= COUNT:
                break
            for msg in consumer.consume(500, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.key(), msg.value(), list(msg.headers() or [])))
    finally:
        consumer.close()
    check(sent, got)


# --------------------------------------------------------------------- aiokafka


@pytest.mark.parametrize(("acks", "compression"), [(1, None), ("all", "gzip")])
def test_aiokafka_produces_and_consumes(
    cluster: Cluster, acks: int | str, compression: str | None
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    topic = new_topic(cluster, f"aiokafka-{acks}")
    sent = records(topic)

    async def go() -> list[Record]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap(cluster), acks=acks, compression_type=compression
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, value, key=key, headers=headers)
                for key, value, headers in sent
            ]
            for done in await asyncio.gather(*futures):
                assert done.offset >= 0
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap(cluster), group_id=None,
                                    enable_auto_commit=False)  # fmt: skip
        await consumer.start()
        got: list[Record] = []
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(3)])
            await consumer.seek_to_beginning()
            for _ in range(100):
                if len(got) >= COUNT:
                    break
                batches = await consumer.getmany(timeout_ms=500)
                for msgs in batches.values():
                    got.extend((m.key, m.value, list(m.headers)) for m in msgs)
        finally:
            await consumer.stop()
        return got

    check(sent, asyncio.run(go()))


# ----------------------------------------------------------------- kafka-python


@pytest.mark.parametrize(("acks", "compression"), [(1, None), ("all", "gzip")])
def test_kafka_python_produces_and_consumes(
    cluster: Cluster, acks: int | str, compression: str | None
) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = new_topic(cluster, f"kafka-python-{acks}")
    sent = records(topic)
    # kafka-python 3's defaults, so its idempotent producer with acks=all.
    producer = KafkaProducer(
        bootstrap_servers=bootstrap(cluster), acks=acks, compression_type=compression
    )
    try:
        futures = [producer.send(topic, value, key=key, headers=h) for key, value, h in sent]
        producer.flush(30)
        assert all(f.get(timeout=30).offset >= 0 for f in futures)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(cluster), group_id=None,
                             enable_auto_commit=False)  # fmt: skip
    got: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        consumer.seek_to_beginning()
        for _ in range(100):
            if len(got) >= COUNT:
                break
            for msgs in consumer.poll(timeout_ms=500).values():
                got.extend((m.key, m.value, list(m.headers)) for m in msgs)
    finally:
        consumer.close()
    check(sent, got)


# -------------------------------------------------------------------------- kcat


@pytest.mark.parametrize("acks", ["1", "all"])
def test_kcat_produces_and_consumes(cluster: Cluster, acks: str) -> None:
    topic = new_topic(cluster, f"kcat-{acks}", partitions=1)
    lines = [f"line-{i}" for i in range(COUNT)]
    produced = subprocess.run(
        ["kcat", "-b", bootstrap(cluster), "-P", "-t", topic, "-X", f"acks={acks}"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", bootstrap(cluster), "-C", "-t", "kcat-" + acks, "-o", "beginning", "-e",
         "-f", "%o %s\n"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]


# ------------------------------------------------------ a leader killed mid-run


def test_librdkafka_idempotent_acks_all_across_a_leader_kill(tmp_path: Path) -> None:
    """10,000 records from an idempotent acks=all producer; the leader of partition 0
    is killed (SIGKILL) halfway and restarted: every acknowledged record is read
    back exactly once."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    with cluster_with_online_brokers(tmp_path, *BROKERS) as cluster:
        topic = new_topic(cluster, "kill-the-leader")
        leader, _ = leader_of(cluster, topic, 0)
        total = 10_000
        acked: list[bytes] = []
        failed: list[str] = []

        def report(err: object, msg: object) -> None:
            if err is None:
                acked.append(msg.value())  # type: ignore[attr-defined]
            else:
                failed.append(str(err))

        producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 60000})  # fmt: skip
        for i in range(total):
            producer.produce(topic, b"v-%05d" % i, b"k-%d" % (i % 12), on_delivery=report)
            if i == total // 2:
                producer.flush(30)
                proc = cluster.brokers[leader]
                assert proc.popen is not None
                proc.popen.send_signal(signal.SIGKILL)
                proc.popen.wait(10)
            producer.poll(0)
        assert producer.flush(90) == 0
        survivor = next(b for b in BROKERS if b != leader)
        new_leader, new_epoch = leader_of(cluster, topic, 0, via=survivor)
        assert new_leader not in (leader, -1) and new_epoch > 0
        cluster.start_brokers(leader)
        assert not failed, failed[:5]
        assert len(acked) == total
        consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "unused",
                             "enable.auto.commit": False})  # fmt: skip
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        seen: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while len(seen) < total and time.monotonic() < deadline:
                for msg in consumer.consume(1000, timeout=0.5):
                    assert msg.error() is None, msg.error()
                    seen.append(msg.value())
        finally:
            consumer.close()
        assert sorted(seen) == sorted(acked)  # each acknowledged record exactly once


def test_kafka_python_idempotent_default_across_a_leader_kill(tmp_path: Path) -> None:
    """kafka-python 3's default producer (idempotent, acks=all) through a leader's
    SIGKILL: every acknowledged record is read back exactly once."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with cluster_with_online_brokers(tmp_path, *BROKERS) as cluster:
        topic = new_topic(cluster, "kill-under-kafka-python", partitions=1)
        leader, _ = leader_of(cluster, topic, 0)
        producer = KafkaProducer(bootstrap_servers=bootstrap(cluster), linger_ms=5,
                                 request_timeout_ms=15000, delivery_timeout_ms=90000)  # fmt: skip
        futures = []
        for i in range(4000):
            futures.append(producer.send(topic, b"v-%05d" % i))
            if i == 2000:
                producer.flush(30)
                proc = cluster.brokers[leader]
                assert proc.popen is not None
                proc.popen.send_signal(signal.SIGKILL)
                proc.popen.wait(10)
        producer.flush(120)
        acked = [f.get(timeout=1).offset for f in futures]
        producer.close()
        assert len(set(acked)) == len(acked) == 4000
        survivor = next(b for b in BROKERS if b != leader)
        assert leader_of(cluster, topic, 0, via=survivor)[0] not in (leader, -1)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap(cluster), group_id=None,
                                 consumer_timeout_ms=5000)  # fmt: skip
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        seen = [(m.offset, m.value) for m in consumer]
        consumer.close()
        assert sorted(v for _, v in seen) == [b"v-%05d" % i for i in range(4000)]


def test_aiokafka_idempotent_across_a_leader_kill(tmp_path: Path) -> None:
    """aiokafka with enable_idempotence (acks=all) through a leader's SIGKILL."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    with cluster_with_online_brokers(tmp_path, *BROKERS) as cluster:
        topic = new_topic(cluster, "kill-under-aiokafka", partitions=1)
        leader, _ = leader_of(cluster, topic, 0)

        async def produce() -> list[int]:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap(cluster),
                                        enable_idempotence=True, linger_ms=5,
                                        request_timeout_ms=15000)  # fmt: skip
            await producer.start()
            try:
                futures = []
                for i in range(4000):
                    futures.append(await producer.send(topic, b"v-%05d" % i))
                    if i == 2000:
                        await producer.flush()
                        proc = cluster.brokers[leader]
                        assert proc.popen is not None
                        proc.popen.send_signal(signal.SIGKILL)
                        proc.popen.wait(10)
                return [m.offset for m in await asyncio.gather(*futures)]
            finally:
                await producer.stop()

        async def consume() -> list[bytes]:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap(cluster), group_id=None)
            await consumer.start()
            seen: list[bytes] = []
            try:
                consumer.assign([TopicPartition(topic, 0)])
                await consumer.seek_to_beginning()
                for _ in range(120):
                    if len(seen) >= 4000:
                        break
                    for msgs in (await consumer.getmany(timeout_ms=500)).values():
                        seen.extend(m.value for m in msgs)
            finally:
                await consumer.stop()
            return seen

        acked = asyncio.run(produce())
        assert len(set(acked)) == len(acked) == 4000
        assert sorted(asyncio.run(consume())) == [b"v-%05d" % i for i in range(4000)]
