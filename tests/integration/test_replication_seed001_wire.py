"""Seed 001's HW walk-through over the wire: three broker processes, one RF 3
partition (leader 10, follower 1 on broker 11, follower 2 on broker 12), the
real followers fetching from the real leader with Kafka's Fetch.

The seed's steps, and each replica's (LEO, HW) after them:

    start                                  (0, 0)  (0, 0)  (0, 0)
    the producer sends A and B             (2, 0)
    follower 1 fetches two, follower 2 one (2, 0)  (2, 0)  (1, 0)
    the producer sends C                   (3, 0)
    the next fetches (LEO 2 and 1)         (3, 1)  (3, 1)  (2, 1)

and the followers fetching on until every replica holds (3, 3).

When each follower's fetch reaches the leader is the test's choice: the leader
advertises a `FetchGate` that holds the followers' fetches until released (see
fetch_gate.py). Follower 2 fetches one record because broker 12 runs with
`replica.fetch.max.bytes=1` (one batch per fetch) and each record is its own
batch. The seed's leader learns follower 1's LEO 2 from its next fetch; here,
as a real follower does, follower 1 sends that fetch as soon as it has stored A
and B, so the leader knows it before C arrives, answers it empty after
`replica.fetch.wait.max.ms`, and follower 1's following fetch (still at 2) is
the one that brings C back with HW 1. Follower 2's fetch at 1 is let through
first, so the leader knows both LEOs (2 and 1) before either answer carrying C
or B leaves: HW = max[0, min(3, 2, 1)] = 1, as the seed's followers take it.

Each replica's LEO is what it answers to ListOffsets from Kafka's debugging
replica id (-2, its own log's end); its HW is its broker's
`quorum_broker_partition_high_watermark` gauge; the LEOs the leader knows of its
followers come from its `quorum_broker_partition_replica_lag_records`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.kafka.versions import ApiKey
from tests.broker_agent.partitions.partitions_cluster import make_batch
from tests.integration import replica_ops as ops
from tests.integration.controller_cluster import Cluster, running_cluster
from tests.integration.fetch_gate import FetchGate
from tests.integration.kafka_wire import KafkaSocket

pytestmark = pytest.mark.slow
LEADER, F1, F2 = 10, 11, 12
REPLICAS = (LEADER, F1, F2)
TOPIC = "seed001"
LABELS = f'partition="0",topic="{TOPIC}"'
COMMON = {
    "broker__heartbeat__interval__ms": "500",
    # No ISR change while the gate holds a follower: the seed's ISR is all three.
    "replica__lag__time__max__ms": "300000",
    # An empty fetch is answered after this long (the default 500 would only be slower).
    "replica__fetch__wait__max__ms": "200",
}


@pytest.fixture(scope="module")
def gate() -> Iterator[FetchGate]:
    g = FetchGate()
    yield g
    g.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, gate: FetchGate) -> Iterator[Cluster]:
    # One controller: the metadata quorum is not what this test is about.
    with running_cluster(Path(tmp_path_factory.mktemp("seed001-wire")), voters=1) as c:
        c.add_brokers(LEADER, advertised__listeners=f"PLAINTEXT://127.0.0.1:{gate.port}", **COMMON)
        gate.upstream_port = c.brokers[LEADER].port
        c.add_brokers(F1, **COMMON)
        c.add_brokers(F2, replica__fetch__max__bytes="1", **COMMON)
        c.start_brokers()
        ops.wait(lambda: all(ops.online(c, b) for b in REPLICAS), "the brokers ONLINE")
        yield c


# ------------------------------------------------------------------ reading


def own_leo(cluster: Cluster, broker: int) -> int:
    """ListOffsets (latest) from DEBUGGING_REPLICA_ID: the end of this replica's log."""
    values: dict[str, Any] = {
        "replica_id": -2, "isolation_level": 0,
        "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}],
    }  # fmt: skip
    with KafkaSocket("127.0.0.1", cluster.brokers[broker].port) as s:
        (answer,) = s.request(ApiKey.LIST_OFFSETS, 7, values).topics[0].partitions
    assert answer.error_code == ErrorCode.none, (broker, answer)
    return int(answer.offset)


def own_hw(metrics: dict[str, float]) -> int:
    return int(metrics[f"quorum_broker_partition_high_watermark{{{LABELS}}}"])


def figures(cluster: Cluster) -> list[tuple[int, int]]:
    """(LEO, HW) of the leader, follower 1 and follower 2, each asked of its broker."""
    return [(own_leo(cluster, b), own_hw(cluster.brokers[b].metrics())) for b in REPLICAS]


def leader_knows(cluster: Cluster) -> list[int]:
    """The followers' LEOs as the leader has them from their last fetches."""
    metrics = cluster.brokers[LEADER].metrics()
    leo = int(metrics[f"quorum_broker_log_end_offset{{{LABELS}}}"])
    return [
        leo - int(metrics[f'quorum_broker_partition_replica_lag_records{{partition="0",'
                          f'replica="{f}",topic="{TOPIC}"}}'])
        for f in (F1, F2)
    ]  # fmt: skip


def consumer_reads(cluster: Cluster) -> list[bytes | None]:
    """What a consumer gets from the leader: only records below the HW."""
    error, _, records = ops.fetch(cluster, LEADER, TOPIC, 0)
    assert error == ErrorCode.none, error
    return [value for _, value in records]


def produce(cluster: Cluster, value: bytes) -> int:
    """One record in its own batch, acks=1 (answered once the leader appended)."""
    error, offset = ops.produce(cluster, LEADER, TOPIC, 0, make_batch(value), acks=1)
    assert error == ErrorCode.none, error
    return offset


def test_seed_001_walk_through_of_leo_and_hw_over_the_wire(
    cluster: Cluster, gate: FetchGate
) -> None:
    ops.create_topic(cluster, TOPIC, [REPLICAS])
    # Both followers' first fetches (at LEO 0) wait at the gate.
    assert gate.held(F1).fetch_offsets == {(TOPIC, 0): 0}
    assert gate.held(F2).fetch_offsets == {(TOPIC, 0): 0}

    # Initial state: nothing anywhere; once each follower's fetch at 0 reached
    # the leader (nothing to send: answered empty), it knows both at LEO 0.
    for follower in (F1, F2):
        assert gate.release(follower).fetch_offsets == {(TOPIC, 0): 0}
    assert figures(cluster) == [(0, 0), (0, 0), (0, 0)]
    assert leader_knows(cluster) == [0, 0]

    # The producer sends two records: leader LEO = 0 + 2 = 2, HW stays 0
    # (HW = max[0, min(2, 0, 0)] = 0).
    assert [produce(cluster, b"A"), produce(cluster, b"B")] == [0, 1]
    assert figures(cluster)[0] == (2, 0)
    assert consumer_reads(cluster) == []

    # Follower 1 fetches at its LEO 0 and gets both records: LEO 2, HW =
    # min[leader HW 0, 2] = 0. Its next fetch, at 2, tells the leader its LEO 2
    # (HW = max[0, min(2, 2, 0)] = 0), and is answered empty: nothing new.
    assert gate.release(F1).fetch_offsets == {(TOPIC, 0): 2}
    assert gate.release(F1).fetch_offsets == {(TOPIC, 0): 2}
    # Follower 2 fetches at 0 and gets one record: LEO 1, HW = min[0, 1] = 0.
    assert gate.release(F2).fetch_offsets == {(TOPIC, 0): 1}
    assert figures(cluster) == [(2, 0), (2, 0), (1, 0)]
    assert leader_knows(cluster) == [2, 0]

    # Record C: leader LEO = 3.
    assert produce(cluster, b"C") == 2
    assert figures(cluster) == [(3, 0), (2, 0), (1, 0)]

    # The next fetches carry LEO 1 (follower 2) and 2 (follower 1): HW =
    # max[0, min(3, 2, 1)] = 1, and each answer brings one record and HW 1.
    # Follower 2: LEO 2, HW min[1, 2] = 1; follower 1: LEO 3, HW min[1, 3] = 1.
    assert gate.release(F2).fetch_offsets == {(TOPIC, 0): 2}
    assert gate.release(F1).fetch_offsets == {(TOPIC, 0): 3}
    assert figures(cluster) == [(3, 1), (3, 1), (2, 1)]
    assert leader_knows(cluster) == [2, 1]
    assert consumer_reads(cluster) == [b"A"]  # only below the HW

    # "The followers keep fetching, until all replicas agree."
    gate.open()
    ops.wait(lambda: figures(cluster) == [(3, 3)] * 3, "every replica at LEO 3, HW 3")
    assert consumer_reads(cluster) == [b"A", b"B", b"C"]
    dirs = [str(cluster.brokers[b].data_dir / f"{TOPIC}-0") for b in REPLICAS]
    done = subprocess.run(
        [sys.executable, "-m", "broker_agent.partitions.compare", *dirs, "--below", "3"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
