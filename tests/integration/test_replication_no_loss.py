"""No acknowledged record is lost, and none is stored twice, across crashes of
partition leaders on real broker processes.

* Two idempotent librdkafka producers (`acks=all`) write to three partitions
  (RF 3, `min.insync.replicas=2`) while the leader of one partition after
  another is killed with SIGKILL, 20 times, each broker restarted on its files
  at once. A consumer then reads every record each producer was told is written,
  at the offset it was told, exactly once; and every replica's log is
  byte-identical below the high watermark (the operators' compare tool).
* A batch whose answer was lost (the connection closed before the answer) and
  that is sent again with the same producer id, epoch and sequence is stored
  once and answered with its original offset; also by the next leader after
  the first one crashed (the producer state travels with the replicas).

The controllers fence a silent broker after 2 s, so each crash costs about that.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.kafka.versions import ApiKey
from tests.broker_agent.partitions.partitions_cluster import make_batch
from tests.integration import replica_ops as ops
from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers
from tests.integration.kafka_wire import produce_values

pytestmark = pytest.mark.slow
BROKERS = (31, 32, 33)
KILLS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_online_brokers(
        tmp_path_factory.mktemp("no-loss"), *BROKERS,
        extra={"broker.session.timeout.ms": "2000"},
    ) as c:  # fmt: skip
        yield c


@pytest.fixture(autouse=True)
def all_brokers_up(cluster: Cluster) -> None:
    for b in BROKERS:
        if not cluster.brokers[b].alive():
            ops.restart(cluster, b)
    ops.wait(lambda: all(ops.online(cluster, b) for b in BROKERS), "every broker ONLINE")


def bootstrap(cluster: Cluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.brokers[b].port}" for b in BROKERS)


def full_isr(cluster: Cluster, topic: str) -> bool:
    return all(
        p.leader >= 0 and sorted(p.isr) == sorted(BROKERS)
        for p in ops.describe(cluster, topic).values()
    )


def crash_leader(cluster: Cluster, topic: str, index: int) -> int:
    """SIGKILL the leader of `topic`-`index`, restart it at once; return once
    another replica leads and the crashed one is back in every ISR."""
    leader = ops.partition(cluster, topic, index).leader
    assert leader in BROKERS, leader
    ops.kill(cluster, leader)
    ops.restart(cluster, leader)
    ops.wait(
        lambda: ops.partition(cluster, topic, index).leader not in (leader, -1),
        f"a new leader of {topic}-{index} after {leader}'s crash",
    )
    ops.wait(lambda: full_isr(cluster, topic), f"{leader} back in every ISR of {topic}")
    return leader


def compare(cluster: Cluster, topic: str, index: int, below: int) -> None:
    dirs = [str(cluster.brokers[b].data_dir / f"{topic}-{index}") for b in BROKERS]
    done = subprocess.run(
        [sys.executable, "-m", "broker_agent.partitions.compare", *dirs, "--below", str(below)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "byte-identical" in done.stdout


# ------------------------------------------------------- 20 crashed leaders


@dataclass
class Producing:
    """One idempotent producer writing until told to stop, in its own thread."""

    name: str
    servers: str
    topic: str
    acked: dict[bytes, tuple[int, int]] = field(default_factory=dict)  # value -> (p, offset)
    failed: list[str] = field(default_factory=list)
    sent: int = 0
    unflushed: int = -1
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({
            "bootstrap.servers": self.servers, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 180_000, "retry.backoff.ms": 50,
            "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip

        def report(err: object, msg: object) -> None:
            if err is None:
                self.acked[msg.value()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
            else:
                self.failed.append(str(err))

        while not self.stop.is_set():
            for _ in range(10):
                value = b"%s-%07d" % (self.name.encode(), self.sent)
                producer.produce(self.topic, value, b"k-%d" % (self.sent % 7), on_delivery=report)
                self.sent += 1
            producer.poll(0.1)  # about 100 records a second each: load, not a flood
        self.unflushed = producer.flush(180)


def test_no_acknowledged_record_is_lost_across_20_leader_crashes(cluster: Cluster) -> None:
    topic = "no-loss"
    a, b, c = BROKERS
    ops.create_topic(cluster, topic, [(a, b, c), (b, c, a), (c, a, b)], min__insync__replicas="2")
    ops.wait(lambda: full_isr(cluster, topic), "the full ISRs")
    producers = [Producing(name, bootstrap(cluster), topic) for name in ("p1", "p2")]
    threads = [threading.Thread(target=p.run, daemon=True) for p in producers]
    for t in threads:
        t.start()
    try:
        for kill in range(KILLS):
            acked_before = sum(len(p.acked) for p in producers)
            ops.wait(lambda n=acked_before: sum(len(p.acked) for p in producers) > n + 50,
                     "records acknowledged since the last crash")  # fmt: skip
            crash_leader(cluster, topic, kill % 3)
    finally:
        for p in producers:
            p.stop.set()
        for t in threads:
            t.join(200)
    for p in producers:
        assert p.unflushed == 0 and not p.failed, (p.name, p.unflushed, p.failed[:5])
        assert len(p.acked) == p.sent  # idempotent and patient: every record written

    # Every acknowledged record, exactly once, where its producer was told it is.
    acked = {v: at for p in producers for v, at in p.acked.items()}
    consumed = consume_all(cluster, topic, len(acked))
    values = list(consumed.values())
    assert len(values) == len(set(values)) == len(acked)  # each at exactly one offset
    # librdkafka acknowledges some records implicitly (a later batch of the same
    # producer was acknowledged while an earlier one's answer was lost to a crash):
    # their reports carry the partition and no offset (seen in a clean-clone run).
    where = {v: at for at, v in consumed.items()}
    assert set(where) == set(acked)
    implicit = {v for v, (_, offset) in acked.items() if offset is None}
    assert {v: where[v] for v in acked if v not in implicit} == {
        v: at for v, at in acked.items() if v not in implicit
    }
    assert {v: where[v][0] for v in implicit} == {v: acked[v][0] for v in implicit}

    ops.wait(lambda: full_isr(cluster, topic), "the full ISRs")
    for index in range(3):
        leader = ops.partition(cluster, topic, index).leader
        hw = ops.fetch(cluster, leader, topic, index)[1]
        assert hw == sum(1 for p, _ in acked.values() if p == index)
        compare(cluster, topic, index, hw)


def consume_all(cluster: Cluster, topic: str, count: int) -> dict[tuple[int, int], bytes]:
    """{(partition, offset): value} of the first `count` records, from offset 0."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "unused",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    out: dict[tuple[int, int], bytes] = {}
    duplicates: list[tuple[int, int]] = []
    errors: list[object] = []
    try:

        def read() -> bool:
            for msg in consumer.consume(5000, timeout=0.5):
                if msg.error() is not None:
                    errors.append(msg.error())
                    continue
                at = (msg.partition(), msg.offset())
                if at in out:
                    duplicates.append(at)
                out[at] = msg.value()
            return len(out) >= count

        ops.wait(read, f"{count} records consumed")
    finally:
        consumer.close()
    assert not errors and not duplicates, (errors[:5], duplicates[:5])
    return out


# ------------------------------------------------ a resend after a lost answer


def init_producer_id(cluster: Cluster) -> tuple[int, int]:
    with ops.socket_to(cluster, BROKERS[0]) as s:
        answer = s.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1,
        })  # fmt: skip
    assert answer.error_code == ErrorCode.none
    return int(answer.producer_id), int(answer.producer_epoch)


def test_a_batch_resent_after_a_lost_answer_is_stored_once_at_its_original_offset(
    cluster: Cluster,
) -> None:
    topic = "resend"
    ops.create_topic(cluster, topic, [BROKERS])
    ops.wait(lambda: full_isr(cluster, topic), "the full ISR")
    leader = ops.partition(cluster, topic).leader
    assert ops.produce(cluster, leader, topic, 0, make_batch(b"plain")) == (ErrorCode.none, 0)
    pid, epoch = init_producer_id(cluster)

    def batch(value: bytes, sequence: int) -> bytes:
        return make_batch(value, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)

    # The answer is lost: the connection is closed right after the request went out.
    send_and_hang_up(cluster, leader, topic, batch(b"once", 0))
    ops.wait(lambda: ops.fetch(cluster, leader, topic, 0)[1] == 2, "the lost batch committed")

    # The producer retries on a new connection: the same answer, nothing appended.
    assert ops.produce(cluster, leader, topic, 0, batch(b"once", 0)) == (ErrorCode.none, 1)
    assert ops.produce(cluster, leader, topic, 0, batch(b"twice", 1)) == (ErrorCode.none, 2)
    assert ops.read_all(cluster, leader, topic, 0) == [(0, b"plain"), (1, b"once"), (2, b"twice")]

    # The leader crashes before the answer to sequence 1 arrived; the retry goes to
    # the new leader, which knows the batch from replication.
    ops.kill(cluster, leader)
    ops.restart(cluster, leader)
    ops.wait(lambda: ops.leads(cluster, topic, 0) and ops.partition(cluster, topic).leader
             != leader, "a new leader")  # fmt: skip
    successor = ops.partition(cluster, topic).leader
    assert ops.produce(cluster, successor, topic, 0, batch(b"twice", 1)) == (ErrorCode.none, 2)
    assert ops.produce(cluster, successor, topic, 0, batch(b"thrice", 2)) == (ErrorCode.none, 3)
    ops.wait(lambda: full_isr(cluster, topic), "the crashed broker back in the ISR")

    # A retry racing its lost original (which may still wait for acks=all): one copy.
    send_and_hang_up(cluster, successor, topic, batch(b"raced", 3))
    assert ops.produce(cluster, successor, topic, 0, batch(b"raced", 3)) == (ErrorCode.none, 4)
    expected = [(0, b"plain"), (1, b"once"), (2, b"twice"), (3, b"thrice"), (4, b"raced")]
    assert ops.read_all(cluster, successor, topic, 0) == expected
    ops.wait(lambda: full_isr(cluster, topic), "the full ISR")
    compare(cluster, topic, 0, 5)


def send_and_hang_up(cluster: Cluster, broker: int, topic: str, batch: bytes) -> None:
    """An acks=all Produce whose answer nobody reads: the connection closes at once."""
    values = produce_values(topic, 0, acks=-1)
    values["topic_data"] = [{"name": topic, "partition_data": [
        {"index": 0, "records": batch}]}]  # fmt: skip
    with ops.socket_to(cluster, broker) as lost:
        lost.send_request(ApiKey.PRODUCE, 9, values)
