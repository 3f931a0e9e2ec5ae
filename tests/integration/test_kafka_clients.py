"""Real Kafka clients produce to and consume from real brokers: confluent-kafka
(librdkafka), aiokafka, kafka-python and kcat, each with acks=1 and acks=all on
an RF 3 topic (followers replicate over Kafka's Fetch). Every record a client
was told is written is read back, in order, once, with its key and headers; also
10,000 records per client across a killed partition leader (one shared cluster:
the kill tests restart what they killed and leave every ISR whole)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.integration import replica_ops as ops
from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers, ctl_json
from tests.integration.kafka_wire import leader_of, wait_for_topic_everywhere

pytestmark = pytest.mark.slow
BROKERS = (101, 102, 103)
COUNT = 300
Record = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # Fenced 3 s after its last heartbeat: what the leader-kill tests wait for.
    with cluster_with_online_brokers(
        tmp_path_factory.mktemp("clients"), *BROKERS, extra={"broker.session.timeout.ms": "3000"}
    ) as c:
        yield c


@pytest.fixture(autouse=True)
def every_broker_up(cluster: Cluster) -> None:
    """Every broker running and ONLINE (whatever a failed kill test left)."""
    for b in BROKERS:
        if not cluster.brokers[b].alive():
            ops.restart(cluster, b)
    ops.wait(lambda: all(ops.online(cluster, b) for b in BROKERS), "every broker ONLINE")


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
    # -c COUNT, not -e: with acks=1 the HW (what consumers may read) can still
    # trail the acknowledged appends, so the partition's end can come first.
    consumed = subprocess.run(
        ["kcat", "-b", bootstrap(cluster), "-C", "-t", "kcat-" + acks, "-o", "beginning",
         "-c", str(COUNT), "-f", "%o %s\n"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]


# ------------------------------------------------------ a leader killed mid-run
#
# Each client writes 10,000 records (12 keys, two headers each, compressed as
# that client can) with its idempotent producer and acks=all to three partitions;
# halfway, the leader of partition 0 is killed (SIGKILL) and restarted at once
# (it registers again once the controllers fenced its old session). Every record
# is acknowledged, and read back exactly once, at the offset it was acknowledged
# with. The test returns once the crashed broker is back in every ISR.

TOTAL = 10_000
Placed = dict[bytes, tuple[int, int]]  # value -> (partition, offset)


def many(tag: str) -> list[Record]:
    return [
        (b"k-%d" % (i % 12), b"%s-%05d" % (tag.encode(), i),
         [("n", b"%d" % i), ("client", tag.encode())])
        for i in range(TOTAL)
    ]  # fmt: skip


def kill_leader(cluster: Cluster, topic: str) -> int:
    leader, _ = leader_of(cluster, topic, 0)
    ops.kill(cluster, leader)
    ops.restart(cluster, leader)
    return leader


def settle(cluster: Cluster, topic: str, crashed: int) -> None:
    """Another broker led partition 0 after the crash; the crashed one is back
    in every ISR (so the next test starts from a whole cluster)."""
    survivor = next(b for b in BROKERS if b != crashed)
    ops.wait(lambda: leader_of(cluster, topic, 0, via=survivor)[1] > 0, "a new leader epoch")

    def whole() -> bool:
        return all(
            p.leader >= 0 and sorted(p.isr) == list(BROKERS)
            for p in ops.describe(cluster, topic).values()
        )

    ops.wait(whole, f"broker {crashed} back in every ISR of {topic}")


def check_placed(sent: list[Record], got: list[Record], acked: Placed, read: Placed) -> None:
    """Every record acknowledged, read once, where its acknowledgement placed it."""
    assert len(acked) == len(sent)
    check(sent, got)
    assert len(got) == len(read) == len(set(read.values()))
    assert read == acked


def test_librdkafka_idempotent_acks_all_across_a_leader_kill(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = new_topic(cluster, "kill-under-librdkafka")
    sent = many("librdkafka")
    acked: Placed = {}
    failed: list[str] = []

    def report(err: object, msg: object) -> None:
        if err is None:
            acked[msg.value()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
        else:
            failed.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "compression.type": "snappy", "message.timeout.ms": 120000})  # fmt: skip
    crashed = -1
    for i, (key, value, headers) in enumerate(sent):
        producer.produce(topic, value, key, headers=headers, on_delivery=report)
        if i == TOTAL // 2:
            producer.flush(30)
            crashed = kill_leader(cluster, topic)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert not failed, failed[:5]
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "unused",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got: list[Record] = []
    read: Placed = {}
    errors: list[object] = []
    try:

        def all_read() -> bool:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    errors.append(msg.error())
                    continue
                got.append((msg.key(), msg.value(), list(msg.headers() or [])))
                read[msg.value()] = (msg.partition(), msg.offset())
            return len(got) >= TOTAL

        ops.wait(all_read, "every record consumed")
    finally:
        consumer.close()
    assert not errors, errors[:5]
    check_placed(sent, got, acked, read)
    settle(cluster, topic, crashed)


def test_kafka_python_idempotent_default_across_a_leader_kill(cluster: Cluster) -> None:
    """kafka-python 3's default producer (idempotent, acks=all), lz4."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = new_topic(cluster, "kill-under-kafka-python")
    sent = many("kafka-python")
    producer = KafkaProducer(bootstrap_servers=bootstrap(cluster), linger_ms=5,
                             compression_type="lz4", request_timeout_ms=15000,
                             delivery_timeout_ms=120000)  # fmt: skip
    futures = []
    crashed = -1
    try:
        for i, (key, value, headers) in enumerate(sent):
            futures.append(producer.send(topic, value, key=key, headers=headers))
            if i == TOTAL // 2:
                producer.flush(30)
                crashed = kill_leader(cluster, topic)
        producer.flush(120)
        placed = [f.get(timeout=1) for f in futures]
    finally:
        producer.close()
    acked = {v: (m.partition, m.offset) for (_, v, _), m in zip(sent, placed, strict=True)}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(cluster), group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=5000)  # fmt: skip
    got: list[Record] = []
    read: Placed = {}
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        consumer.seek_to_beginning()

        def all_read() -> bool:
            for msgs in consumer.poll(timeout_ms=500).values():
                for m in msgs:
                    got.append((m.key, m.value, list(m.headers)))
                    read[m.value] = (m.partition, m.offset)
            return len(got) >= TOTAL

        ops.wait(all_read, "every record consumed")
    finally:
        consumer.close()
    check_placed(sent, got, acked, read)
    settle(cluster, topic, crashed)


def test_aiokafka_idempotent_across_a_leader_kill(cluster: Cluster) -> None:
    """aiokafka with enable_idempotence (so acks=all), zstd."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    topic = new_topic(cluster, "kill-under-aiokafka")
    sent = many("aiokafka")
    crashed = -1

    async def produce() -> Placed:
        nonlocal crashed
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap(cluster),
                                    enable_idempotence=True, linger_ms=5,
                                    compression_type="zstd", request_timeout_ms=15000)  # fmt: skip
        await producer.start()
        try:
            futures = []
            for i, (key, value, headers) in enumerate(sent):
                futures.append(await producer.send(topic, value, key=key, headers=headers))
                if i == TOTAL // 2:
                    await producer.flush()
                    crashed = kill_leader(cluster, topic)
            placed = await asyncio.gather(*futures)
        finally:
            await producer.stop()
        return {v: (m.partition, m.offset) for (_, v, _), m in zip(sent, placed, strict=True)}

    async def consume() -> tuple[list[Record], Placed]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap(cluster), group_id=None,
                                    enable_auto_commit=False)  # fmt: skip
        await consumer.start()
        got: list[Record] = []
        read: Placed = {}
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(3)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + ops.WAIT_S
            while len(got) < TOTAL and time.monotonic() < deadline:
                for msgs in (await consumer.getmany(timeout_ms=500)).values():
                    for m in msgs:
                        got.append((m.key, m.value, list(m.headers)))
                        read[m.value] = (m.partition, m.offset)
        finally:
            await consumer.stop()
        return got, read

    acked = asyncio.run(produce())
    got, read = asyncio.run(consume())
    check_placed(sent, got, acked, read)
    settle(cluster, topic, crashed)
