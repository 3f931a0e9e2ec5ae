"""The replica metrics' meanings (Kafka's ReplicaManager and FetcherLagMetrics), on
snapshots alone; and once on real ReplicaManagers with real logs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from partitions_cluster import Cluster, eventually, make_batch, run
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from broker_agent.partitions.partition import Role
from broker_agent.replica_metrics import (
    ReplicaSnapshot,
    at_min_isr,
    families,
    follower_fetch_lag,
    replica_lags,
    replica_metrics,
    under_min_isr,
    under_replicated,
)

LEADER = ReplicaSnapshot(
    topic="orders", partition=0, role=Role.LEADER, replicas=(1, 2, 3), isr=(1, 2, 3),
    min_insync_replicas=2, high_watermark=10, log_end_offset=12, log_start_offset=0,
    size_bytes=1000, segments=1, follower_log_end_offsets=((2, 12), (3, 10)),
)  # fmt: skip
FOLLOWER = replace(
    LEADER, role=Role.FOLLOWER, follower_log_end_offsets=(), leader_high_watermark=10
)


def test_under_replicated_is_a_led_partition_with_an_isr_smaller_than_its_replicas() -> None:
    assert not under_replicated(LEADER)
    assert under_replicated(replace(LEADER, isr=(1, 2)))
    # Followers never count it: the cluster-wide sum counts each partition once.
    assert not under_replicated(replace(FOLLOWER, isr=(1,)))


def test_min_isr_counts_compare_the_isr_with_min_insync_replicas() -> None:
    assert not under_min_isr(LEADER) and not at_min_isr(LEADER)
    two = replace(LEADER, isr=(1, 2))
    assert at_min_isr(two) and not under_min_isr(two)
    one = replace(LEADER, isr=(1,))
    assert under_min_isr(one) and not at_min_isr(one)
    assert not under_min_isr(replace(FOLLOWER, isr=(1,)))


def test_follower_fetch_lag_is_the_leaders_hw_minus_the_followers_leo() -> None:
    assert follower_fetch_lag(replace(FOLLOWER, log_end_offset=10)) == 0
    assert follower_fetch_lag(replace(FOLLOWER, log_end_offset=4)) == 6
    # Ahead of the HW it last heard of (it appended past it): no negative lag.
    assert follower_fetch_lag(replace(FOLLOWER, log_end_offset=12)) == 0
    # No answer in this leader epoch yet, or not a follower: no value at all.
    assert follower_fetch_lag(replace(FOLLOWER, leader_high_watermark=None)) is None
    assert follower_fetch_lag(LEADER) is None


def test_replica_lag_on_the_leader_is_its_leo_minus_each_followers() -> None:
    assert replica_lags(LEADER) == [(2, 0), (3, 2)]
    # A follower not heard from in this leader epoch has no value.
    assert replica_lags(replace(LEADER, follower_log_end_offsets=((2, -1), (3, 12)))) == [(3, 0)]
    assert replica_lags(FOLLOWER) == []


def exposition(*snaps: ReplicaSnapshot, shrinks: int = 0, expands: int = 0) -> str:
    class Fixed(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            return families(snaps, shrinks, expands)

    registry = CollectorRegistry()
    registry.register(Fixed())
    return generate_latest(registry).decode()


def test_the_families_carry_counts_and_hosted_partitions_only() -> None:
    other = replace(FOLLOWER, topic="audit", partition=3, log_end_offset=7)
    text = exposition(replace(LEADER, isr=(1,)), other, shrinks=4, expands=1)
    assert "quorum_broker_under_replicated_partitions 1.0" in text
    assert "quorum_broker_under_min_isr_partitions 1.0" in text
    assert "quorum_broker_leader_partitions 1.0" in text and "quorum_broker_partitions 2.0" in text
    assert "quorum_broker_isr_shrinks_total 4.0" in text
    assert "quorum_broker_isr_expands_total 1.0" in text
    assert 'quorum_broker_log_end_offset{partition="0",topic="orders"} 12.0' in text
    assert 'quorum_broker_partition_high_watermark{partition="3",topic="audit"} 10.0' in text
    assert 'quorum_broker_replica_fetcher_lag_records{partition="3",topic="audit"} 3.0' in text
    assert "quorum_broker_replica_fetcher_max_lag_records 3.0" in text
    assert (
        'quorum_broker_partition_replica_lag_records{partition="0",replica="3",topic="orders"} 2.0'
        in text
    )
    # A broker hosting nothing serves the families, and no per-partition series.
    empty = exposition()
    assert "# TYPE quorum_broker_log_end_offset gauge" in empty
    assert "quorum_broker_log_end_offset{" not in empty
    assert "quorum_broker_replica_fetcher_max_lag_records 0.0" in empty


def test_real_replicas_report_hw_equal_leo_and_no_lag_once_caught_up(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.create_topic("orders", min_insync_replicas="2")
        leader = cluster.leader("orders")
        for i in range(3):
            await leader.append("orders", 0, make_batch(b"v%d" % i), -1, 10_000)

        def caught_up() -> bool:
            return all(
                m.log_end_offset("orders", 0) == 3 and m.high_watermark("orders", 0) == 3
                for m in cluster.brokers.values()
            )

        await eventually(caught_up, "HW 3 everywhere")
        # A follower's lag is measured on a fetch answer: wait for one carrying HW 3.
        await eventually(
            lambda: all(
                m.partitions[("orders", 0)].fetched_leader_high_watermark == (0, 3)
                for b, m in cluster.brokers.items()
                if b != 0
            ),
            "followers to hear HW 3",
        )
        for broker_id, manager in cluster.brokers.items():
            text = exposition_of(manager)
            labels = '{partition="0",topic="orders"}'
            assert f"quorum_broker_log_end_offset{labels} 3.0" in text
            assert f"quorum_broker_partition_high_watermark{labels} 3.0" in text
            assert "quorum_broker_under_replicated_partitions 0.0" in text
            if broker_id == 0:
                assert f"quorum_broker_replica_fetcher_lag_records{labels}" not in text
                assert 'replica="1",topic="orders"} 0.0' in text
            else:
                assert f"quorum_broker_replica_fetcher_lag_records{labels} 0.0" in text

    run(scenario, tmp_path)


def exposition_of(manager: object) -> str:
    class Live(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            return replica_metrics(manager)  # type: ignore[arg-type]

    registry = CollectorRegistry()
    registry.register(Live())
    return generate_latest(registry).decode()
