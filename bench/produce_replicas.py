"""Broker memory and restart with many partition replicas (part of `bench/produce.py`).

A topic of `count` partitions with RF 3 on three brokers puts `count` replicas
on each broker (a third of them led). One record goes to each partition; then
every broker's VmRSS is read from /proc. Then one broker is SIGKILLed, the
controller fences it and its replicas leave every ISR, and it is started again;
the times from its spawn are read from its own Kafka listener (see
`bench/produce.py` for what each means).
"""

from __future__ import annotations

import shutil
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from broker_agent.kafka.versions import ApiKey
from broker_agent.partitions.partition_log import LogConfig, PartitionLog
from broker_agent.partitions.producer_state import ProducerStateTable
from broker_agent.partitions.record_batch import split_batches
from tests.broker_agent.partitions.partitions_cluster import make_batch
from tests.integration.controller_cluster import Cluster, ctl_json
from tests.integration.kafka_wire import KafkaSocket, metadata_v12

TOPIC = "bench-replicas"
Emit = Callable[..., None]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def metadata(port: int) -> Any:
    with KafkaSocket("127.0.0.1", port, timeout_s=30) as s:
        return s.request(ApiKey.METADATA, 12, metadata_v12([TOPIC]))


def isr_holding(answer: Any, broker: int) -> tuple[int, int]:
    """(partitions whose ISR holds `broker`, partitions) in a Metadata answer."""
    topic = answer.topics[0]
    if topic.error_code != ErrorCode.none:
        return 0, 0
    parts = topic.partitions
    return sum(1 for p in parts if broker in p.isr_nodes), len(parts)


def replica_dirs(cluster: Cluster, broker: int) -> int:
    return sum(1 for _ in cluster.brokers[broker].data_dir.glob(f"{TOPIC}-*"))


def wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (OSError, ConnectionError):
            pass
        time.sleep(0.2)
    raise TimeoutError(what)


def produce_one_each(cluster: Cluster, count: int) -> tuple[int, int]:
    """One 1 KiB record to each partition (acks=1, so leadership moves and ISR
    changes under way do not hold it up); (delivered, failed) within 120 s."""
    from confluent_kafka import Producer

    bootstrap = ",".join(f"127.0.0.1:{p.port}" for p in cluster.brokers.values())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "message.timeout.ms": 120_000})  # fmt: skip
    outcome = {"delivered": 0, "failed": 0}

    def delivered(err: object, _msg: object) -> None:
        outcome["failed" if err is not None else "delivered"] += 1

    for partition in range(count):
        producer.produce(TOPIC, b"x" * 1024, partition=partition, on_delivery=delivered)
        producer.poll(0)
    producer.flush(130)
    return outcome["delivered"], outcome["failed"]


def open_logs_floor(directory: Path, count: int, emit: Emit) -> None:
    """What `count` replicas cost a broker's event loop before anything else, in
    this process: creating their logs (as a new topic's assignment does), and
    opening them again with one batch each and rebuilding their producer state
    (as a restarted broker does before it can serve or heartbeat)."""
    batch = split_batches(make_batch(b"x" * 1024))
    started = time.perf_counter()
    logs = [PartitionLog(directory / f"floor-{i}", LogConfig(), 0) for i in range(count)]
    emit("replica_logs_create_floor_s", round(time.perf_counter() - started, 2), replicas=count)
    for plog in logs:
        plog.append_as_leader(batch, 0, 0)
        plog.close()
    started = time.perf_counter()
    for i in range(count):
        plog = PartitionLog(directory / f"floor-{i}", LogConfig(), 0)
        ProducerStateTable().rebuild(plog.batch_headers())
        plog.close()
    emit("replica_logs_open_floor_s", round(time.perf_counter() - started, 2), replicas=count)
    shutil.rmtree(directory, ignore_errors=True)


def replica_memory_and_restart(cluster: Cluster, count: int, emit: Emit) -> None:
    open_logs_floor(cluster.root / "floor", count, emit)
    started = time.monotonic()
    ctl_json(cluster, "topics", "create", TOPIC, "--partitions", str(count),
             "--replication-factor", "3")  # fmt: skip
    for broker, proc in cluster.brokers.items():
        wait(lambda b=broker: replica_dirs(cluster, b) == count, 600,
             f"{count} replicas on broker {broker}")  # fmt: skip
        wait(lambda p=proc, b=broker: isr_holding(metadata(p.port), b) == (count, count), 600,
             f"broker {broker} in every ISR")  # fmt: skip
    emit("replicas_created_s", round(time.monotonic() - started, 1), replicas_per_broker=count)
    started = time.monotonic()
    delivered, failed = produce_one_each(cluster, count)
    emit("one_record_each_delivered", delivered, failed=failed, replicas_per_broker=count,
         seconds=round(time.monotonic() - started, 1))  # fmt: skip
    time.sleep(2)  # the followers fetched the records; the tick ran
    sizes = {b: rss_mb(p.popen.pid) for b, p in cluster.brokers.items() if p.popen is not None}
    for broker, size in sizes.items():
        emit("broker_rss_mb", round(size, 1), broker=broker, replicas=count)
    emit("goal_broker_rss_mb", round(max(sizes.values()), 1), replicas=count, goal=300)
    restart(cluster, count, emit)


def restart(cluster: Cluster, count: int, emit: Emit) -> None:
    victim = max(cluster.brokers)
    other = cluster.brokers[min(cluster.brokers)]
    proc = cluster.brokers[victim]
    assert proc.popen is not None
    proc.popen.send_signal(signal.SIGKILL)
    proc.popen.wait(10)
    killed = time.monotonic()
    # Fenced after broker.session.timeout.ms; fencing takes it out of every ISR.
    wait(lambda: isr_holding(metadata(other.port), victim)[0] == 0, 120,
         f"broker {victim} out of every ISR")  # fmt: skip
    emit("fenced_out_of_isr_s", round(time.monotonic() - killed, 2), broker=victim,
         replicas=count)  # fmt: skip
    spawned = time.monotonic()
    cluster.start_brokers(victim)
    # Unfenced and in the ISRs as a surviving broker's (current) metadata says: the
    # restarted broker's own answer may come from its metadata cache of before the
    # kill, where it was in every ISR.
    marks: dict[str, float] = {}
    deadline = spawned + 600
    while "restart_serving_s" not in marks and time.monotonic() < deadline:
        try:
            if "restart_listening_s" not in marks:
                socket.create_connection(("127.0.0.1", proc.port), timeout=1).close()
                marks["restart_listening_s"] = time.monotonic() - spawned
            current = metadata(other.port)
            if "restart_unfenced_s" not in marks and victim in {b.node_id for b in current.brokers}:
                marks["restart_unfenced_s"] = time.monotonic() - spawned
            if "restart_unfenced_s" in marks and isr_holding(current, victim) == (count, count):
                metadata(proc.port)  # and it answers itself
                marks["restart_serving_s"] = time.monotonic() - spawned
        except (OSError, ConnectionError):
            pass
        time.sleep(0.02)
    for name, seconds in marks.items():
        emit(name, round(seconds, 2), broker=victim, replicas=count, goal_s=10)
    if "restart_serving_s" not in marks:
        emit("restart_serving_s", None, broker=victim, replicas=count, goal_s=10,
             note="not back in every ISR within 600 s")  # fmt: skip
