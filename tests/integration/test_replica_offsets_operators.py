"""What an operator sees of replication, on real processes: three controllers,
three brokers and an RF 3 topic. `quorumctl topics describe` asks the brokers
for each replica's LEO (ListOffsets from DEBUGGING_REPLICA_ID) and the leader for
the HW and log start; the brokers' /metrics say the same (and pass promtool). With a follower
stopped (SIGSTOP), the leader sees it fall behind, shrinks the ISR after
`replica.lag.time.max.ms`, and `describe` shows the stopped broker as unknown
without failing; once it runs again it catches up and rejoins."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.kafka.versions import ApiKey
from tests.broker_agent.partitions.partitions_cluster import make_batch
from tests.integration.controller_cluster import Cluster, ctl, ctl_json, running_cluster
from tests.integration.kafka_wire import (
    KafkaSocket,
    leader_of,
    produce_values,
    wait_for_topic_everywhere,
)

BROKERS = (71, 72, 73)
TOPIC = "ledger"
LAG_MS = 2000  # replica.lag.time.max.ms: short, so the stopped follower leaves soon
LABELS = f'{{partition="0",topic="{TOPIC}"}}'
OLD_COLUMNS = ["Topic", "TopicId", "Partition", "Leader", "LeaderEpoch", "Replicas", "Isr",
               "OfflineReplicas", "MinIsr", "Status"]  # fmt: skip
NEW_COLUMNS = ["HighWatermark", "LogStartOffset", "LogEndOffsets", "Lags"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(Path(tmp_path_factory.mktemp("replica-offsets"))) as c:
        c.add_brokers(
            *BROKERS,
            broker__heartbeat__interval__ms="500",
            replica__lag__time__max__ms=str(LAG_MS),
        )
        c.start_brokers()
        c.wait_until(
            lambda: (
                sorted(r["Id"] for r in ctl_json(c, "brokers", "list") if r["State"] == "ONLINE")
                == sorted(BROKERS)
            ),
            30,
            "the brokers ONLINE",
        )
        done = ctl(c, "topics", "create", TOPIC, "--partitions", "1",
                   "--replication-factor", "3", "--config", "min.insync.replicas=2")  # fmt: skip
        assert done.returncode == 0, done.stderr
        wait_for_topic_everywhere(c, TOPIC)
        yield c


def produce(cluster: Cluster, leader: int, acks: int, *values: bytes) -> None:
    request = produce_values(TOPIC, 0, acks=acks)
    request["topic_data"] = [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": make_batch(*values)}]}
    ]
    with KafkaSocket("127.0.0.1", cluster.brokers[leader].port) as s:
        answer = s.request(ApiKey.PRODUCE, 9, request)
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none


def describe(cluster: Cluster) -> dict[str, Any]:
    [row] = ctl_json(cluster, "topics", "describe", "--topic", TOPIC)
    return dict(row)


def settled(cluster: Cluster, offset: int) -> bool:
    """HW = LEO = `offset` on every replica, lag 0, the ISR full."""
    row = describe(cluster)
    return (
        row["HighWatermark"] == offset
        and row["LogEndOffsets"] == [offset] * 3
        and row["Lags"] == [0, 0, 0]
        and sorted(row["Isr"]) == sorted(BROKERS)
    )


def promtool_check(metrics_port: int) -> subprocess.CompletedProcess[str]:
    """`promtool check metrics` on one /metrics page (`make test` installs promtool)."""
    found = shutil.which("promtool")
    assert found, "promtool is missing: `make test` installs Debian's prometheus package"
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as page:
        text = page.read().decode()
    return subprocess.run(
        [found, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


def metric(cluster: Cluster, broker: int, name: str) -> float | None:
    return cluster.brokers[broker].metrics().get(name)


def test_after_producing_every_replica_has_hw_equal_to_leo_and_no_lag(cluster: Cluster) -> None:
    leader, _ = leader_of(cluster, TOPIC, 0)
    base = describe(cluster)["HighWatermark"] or 0
    for i in range(4):
        produce(cluster, leader, -1, b"all-%d" % i, b"more-%d" % i)
    end = base + 8
    cluster.wait_until(lambda: settled(cluster, end), 30, f"HW = LEO = {end} everywhere")
    row = describe(cluster)
    assert row["LogStartOffset"] == 0 and row["Status"] == "ok"
    for broker in BROKERS:
        # Followers hear the HW on their next fetch answer: wait for that one.
        cluster.wait_until(
            lambda b=broker: (
                metric(cluster, b, f"quorum_broker_partition_high_watermark{LABELS}") == end
            ),
            20,
            f"broker {broker}'s HW metric",
        )
        values = cluster.brokers[broker].metrics()
        assert values[f"quorum_broker_log_end_offset{LABELS}"] == end
        assert values[f"quorum_broker_log_start_offset{LABELS}"] == 0
        assert values[f"quorum_broker_log_size_bytes{LABELS}"] > 0
        assert values["quorum_broker_under_replicated_partitions"] == 0
        if broker == leader:
            assert values["quorum_broker_leader_partitions"] == 1
            for follower in set(BROKERS) - {leader}:
                key = f'quorum_broker_partition_replica_lag_records{{partition="0",replica="{follower}",topic="{TOPIC}"}}'  # noqa: E501
                assert values[key] == 0
        else:
            assert values[f"quorum_broker_replica_fetcher_lag_records{LABELS}"] == 0
            assert values["quorum_broker_replica_fetcher_max_lag_records"] == 0
    for broker in BROKERS:  # filled per-partition families pass Prometheus's linter
        lint = promtool_check(cluster.brokers[broker].metrics_port)
        assert lint.returncode == 0 and not lint.stdout.strip(), (broker, lint.stdout, lint.stderr)
    table = ctl(cluster, "topics", "describe", "--topic", TOPIC)
    assert table.returncode == 0, table.stderr
    header, line = table.stdout.splitlines()
    assert header.split() == OLD_COLUMNS + NEW_COLUMNS
    assert f"[{end},{end},{end}]" in line and "[0,0,0]" in line
    # --no-offsets asks no broker: the same columns, unknown.
    [quiet] = ctl_json(cluster, "topics", "describe", "--topic", TOPIC, "--no-offsets")
    assert quiet["HighWatermark"] is None and quiet["LogEndOffsets"] == [None] * 3
    assert quiet["Isr"] == row["Isr"]


def test_a_stopped_follower_falls_behind_leaves_the_isr_and_comes_back(cluster: Cluster) -> None:
    leader, _ = leader_of(cluster, TOPIC, 0)
    start = describe(cluster)["HighWatermark"]
    assert start is not None
    cluster.wait_until(lambda: settled(cluster, start), 30, "a settled partition to start from")
    row = describe(cluster)
    replicas = row["Replicas"]
    follower = next(r for r in replicas if r != leader)
    slot = replicas.index(follower)
    lag_key = f'quorum_broker_partition_replica_lag_records{{partition="0",replica="{follower}",topic="{TOPIC}"}}'  # noqa: E501
    shrinks = metric(cluster, leader, "quorum_broker_isr_shrinks_total") or 0
    expands = metric(cluster, leader, "quorum_broker_isr_expands_total") or 0
    proc = cluster.brokers[follower].popen
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        for i in range(3):
            produce(cluster, leader, 1, b"one-%d" % i)
        end = start + 3
        # The leader's view: the stopped follower's last fetch was at `start`.
        cluster.wait_until(
            lambda: metric(cluster, leader, lag_key) == 3, 20, "the follower's lag on its leader"
        )
        cluster.wait_until(
            lambda: (
                (metric(cluster, leader, "quorum_broker_isr_shrinks_total") or 0) > shrinks
                and metric(cluster, leader, "quorum_broker_under_replicated_partitions") == 1
            ),
            30,
            "the leader to shrink the ISR",
        )
        cluster.wait_until(
            lambda: follower not in describe(cluster)["Isr"], 20, "the shrunk ISR committed"
        )
        stopped = describe(cluster)  # the stopped broker does not answer: unknown, no failure
        assert stopped["LogEndOffsets"][slot] is None and stopped["Lags"][slot] is None
        others = [v for i, v in enumerate(stopped["LogEndOffsets"]) if i != slot]
        assert others == [end, end]
        assert stopped["HighWatermark"] == end  # the ISR without the stopped one has it all
        assert "UnderReplicated" in stopped["Status"]
        table = ctl(cluster, "topics", "describe", "--topic", TOPIC)
        assert table.returncode == 0 and "unknown" in table.stdout, table.stderr
        under = ctl_json(cluster, "topics", "describe", "--under-replicated-partitions")
        assert [r["Topic"] for r in under] == [TOPIC]
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    cluster.wait_until(lambda: settled(cluster, end), 40, "the follower caught up and back")
    cluster.wait_until(
        lambda: (
            (metric(cluster, leader, "quorum_broker_isr_expands_total") or 0) > expands
            and metric(cluster, leader, "quorum_broker_under_replicated_partitions") == 0
            and metric(cluster, leader, lag_key) == 0
        ),
        20,
        "the leader to count the expand",
    )
    cluster.wait_until(
        lambda: (
            metric(cluster, follower, f"quorum_broker_log_end_offset{LABELS}") == end
            and metric(cluster, follower, f"quorum_broker_replica_fetcher_lag_records{LABELS}") == 0
        ),
        20,
        "the follower's own metrics",
    )


def list_offsets(cluster: Cluster, broker: int, replica_id: int, version: int = 7) -> Any:
    partition = {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
    if version < 4:
        del partition["current_leader_epoch"]
    values: dict[str, Any] = {
        "replica_id": replica_id,
        "topics": [{"name": TOPIC, "partitions": [partition]}],
    }
    if version >= 2:
        values["isolation_level"] = 0
    with KafkaSocket("127.0.0.1", cluster.brokers[broker].port) as s:
        [answer] = s.request(ApiKey.LIST_OFFSETS, version, values).topics[0].partitions
    return answer


@pytest.mark.parametrize("version", [1, 7])
def test_followers_answer_tools_and_refuse_consumers_over_the_wire(
    cluster: Cluster, version: int
) -> None:
    leader, _ = leader_of(cluster, TOPIC, 0)
    end = describe(cluster)["HighWatermark"]
    cluster.wait_until(lambda: settled(cluster, end), 30, "a settled partition")
    for broker in BROKERS:
        tool = list_offsets(cluster, broker, -2, version)
        assert (tool.error_code, tool.offset) == (ErrorCode.none, end), broker
        consumer = list_offsets(cluster, broker, -1, version)
        if broker == leader:
            assert (consumer.error_code, consumer.offset) == (ErrorCode.none, end)
        else:
            assert consumer.error_code == ErrorCode.not_leader_or_follower
