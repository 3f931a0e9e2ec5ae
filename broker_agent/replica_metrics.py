"""The partition replicas' metrics (Kafka's `ReplicaManager`, `Log`, `FetcherLagMetrics`).

Two steps, so the rules can be tested without a broker: `snapshot` reads one
replica's state from the replica manager at scrape time (nothing is kept between
scrapes), and pure functions over those snapshots say what Kafka's metrics mean:

* under-replicated: a partition this broker leads whose ISR is smaller than its
  replica set (Kafka's `UnderReplicatedPartitions`: counted by the leader only,
  so the cluster-wide sum counts each partition once);
* under / at min ISR: led, ISR below / equal to `min.insync.replicas`
  (`UnderMinIsrPartitionCount`, `AtMinIsrPartitionCount`);
* follower fetch lag: on a follower, the leader's HW in the last fetch answer of
  the current leader epoch minus the follower's LEO, never below 0 (Kafka's
  `FetcherLagMetrics` `ConsumerLag`; `MaxLag` is the largest);
* replica lag on the leader: the leader's LEO minus the LEO each follower's last
  fetch reported (what the ISR rule judges; ours, Kafka has no per-follower
  metric). A stopped follower cannot be scraped, its leader still can.

Cardinality: the per-partition series exist only for the replicas this broker
hosts (the replica lag only for partitions it leads, one series per follower),
and leave with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from broker_agent.partitions.partition import Partition, Role
from broker_agent.partitions.replica_manager import ReplicaManager

LABELS = ["topic", "partition"]


@dataclass(frozen=True, slots=True)
class ReplicaSnapshot:
    """One hosted replica, as a scrape sees it."""

    topic: str
    partition: int
    role: Role
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_insync_replicas: int
    high_watermark: int
    log_end_offset: int
    log_start_offset: int
    size_bytes: int
    segments: int
    # Followers: the leader's HW from the last answer in the current leader epoch.
    leader_high_watermark: int | None = None
    # Leaders: each follower's LEO as its last fetch said (-1: not fetched yet).
    follower_log_end_offsets: tuple[tuple[int, int], ...] = ()

    @property
    def leads(self) -> bool:
        return self.role is Role.LEADER


def snapshot(part: Partition) -> ReplicaSnapshot:
    plog = part.log
    fetched = part.fetched_leader_high_watermark
    leader_hw = fetched[1] if fetched is not None and fetched[0] == part.leader_epoch else None
    state = part.leader_state
    followers: tuple[tuple[int, int], ...] = ()
    if part.role is Role.LEADER and state is not None:
        followers = tuple(
            (r, state.follower_leo(r)) for r in part.assignment.replicas if r != state.leader_id
        )
    return ReplicaSnapshot(
        topic=part.topic,
        partition=part.partition,
        role=part.role,
        replicas=tuple(part.assignment.replicas),
        isr=tuple(part.isr),
        min_insync_replicas=plog.config.min_insync_replicas,
        high_watermark=part.high_watermark,
        log_end_offset=plog.log_end_offset,
        log_start_offset=plog.log_start_offset,
        size_bytes=plog.size_bytes,
        segments=len(plog.store.segments),
        leader_high_watermark=leader_hw if part.role is Role.FOLLOWER else None,
        follower_log_end_offsets=followers,
    )


def under_replicated(s: ReplicaSnapshot) -> bool:
    return s.leads and len(s.isr) < len(s.replicas)


def under_min_isr(s: ReplicaSnapshot) -> bool:
    return s.leads and len(s.isr) < s.min_insync_replicas


def at_min_isr(s: ReplicaSnapshot) -> bool:
    return s.leads and len(s.isr) == s.min_insync_replicas


def follower_fetch_lag(s: ReplicaSnapshot) -> int | None:
    """None where there is no lag to speak of: a leader, or no answer yet this epoch."""
    if s.role is not Role.FOLLOWER or s.leader_high_watermark is None:
        return None
    return max(0, s.leader_high_watermark - s.log_end_offset)


def replica_lags(s: ReplicaSnapshot) -> list[tuple[int, int]]:
    """(follower, records behind the leader's LEO). A follower not heard from in this
    leader epoch has no value (not "the whole log", which every leader change would
    show for a moment); the ISR rule evicts it, and the under-replicated count shows it."""
    return [
        (r, max(0, s.log_end_offset - leo)) for r, leo in s.follower_log_end_offsets if leo >= 0
    ]


def replica_metrics(
    manager: ReplicaManager,
) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    snaps = sorted(
        (snapshot(p) for p in list(manager.partitions.values())),
        key=lambda s: (s.topic, s.partition),
    )
    yield from families(snaps, manager.isr_shrinks, manager.isr_expands)


def families(
    snaps: Iterable[ReplicaSnapshot], isr_shrinks: int, isr_expands: int
) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    snaps = list(snaps)
    counts = [
        ("partitions", "Partition replicas this broker hosts.", len(snaps)),
        ("leader_partitions", "Partitions this broker leads.", sum(s.leads for s in snaps)),
        ("under_replicated_partitions",
         "Partitions this broker leads whose ISR is smaller than their replica set.",
         sum(under_replicated(s) for s in snaps)),
        ("under_min_isr_partitions",
         "Partitions this broker leads whose ISR is below min.insync.replicas.",
         sum(under_min_isr(s) for s in snaps)),
        ("at_min_isr_partitions",
         "Partitions this broker leads whose ISR is exactly min.insync.replicas.",
         sum(at_min_isr(s) for s in snaps)),
    ]  # fmt: skip
    for name, text, value in counts:
        yield GaugeMetricFamily("quorum_broker_" + name, text, value=value)
    yield CounterMetricFamily(
        "quorum_broker_isr_shrinks", "ISR shrinks this broker asked for as leader.",
        value=isr_shrinks,
    )  # fmt: skip
    yield CounterMetricFamily(
        "quorum_broker_isr_expands", "ISR expands this broker asked for as leader.",
        value=isr_expands,
    )  # fmt: skip
    per_partition = [
        ("quorum_broker_partition_high_watermark", "High watermark of a hosted replica.",
         lambda s: s.high_watermark),
        ("quorum_broker_log_end_offset", "Log end offset of a hosted replica.",
         lambda s: s.log_end_offset),
        ("quorum_broker_log_start_offset", "Log start offset of a hosted replica.",
         lambda s: s.log_start_offset),
        ("quorum_broker_log_size_bytes", "Bytes of a hosted replica's log segments.",
         lambda s: s.size_bytes),
        ("quorum_broker_log_segments", "Segments of a hosted replica's log.",
         lambda s: s.segments),
    ]  # fmt: skip
    for name, text, value_of in per_partition:
        family = GaugeMetricFamily(name, text, labels=LABELS)
        for s in snaps:
            family.add_metric([s.topic, str(s.partition)], value_of(s))
        yield family
    lag = GaugeMetricFamily(
        "quorum_broker_replica_fetcher_lag_records",
        "Followed partitions: the leader's HW in the last fetch answer minus this LEO.",
        labels=LABELS,
    )
    lags = [(s, follower_fetch_lag(s)) for s in snaps]
    known = [(s, v) for s, v in lags if v is not None]
    for s, v in known:
        lag.add_metric([s.topic, str(s.partition)], v)
    yield lag
    yield GaugeMetricFamily(
        "quorum_broker_replica_fetcher_max_lag_records",
        "The largest follower fetch lag of this broker's followed partitions (0: none).",
        value=max((v for _, v in known), default=0),
    )
    behind = GaugeMetricFamily(
        "quorum_broker_partition_replica_lag_records",
        "Led partitions: the leader's LEO minus each follower's LEO at its last fetch.",
        labels=[*LABELS, "replica"],
    )
    for s in snaps:
        for replica, records in replica_lags(s):
            behind.add_metric([s.topic, str(s.partition), str(replica)], records)
    yield behind
