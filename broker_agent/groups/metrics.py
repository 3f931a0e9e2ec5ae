"""The group coordinator's metrics, on the broker's `/metrics` (Kafka's
GroupMetadataManager gauges and group-coordinator-metrics):

* `quorum_broker_groups{state}`: groups this broker coordinates, by state
  (Kafka's `NumGroupsStable`, `NumGroupsPreparingRebalance`, ...);
* `quorum_broker_group_rebalances_total`: rebalances started (Kafka's
  `group-rebalance-count`; the rate is Prometheus's);
* `quorum_broker_group_rebalance_seconds`: from a rebalance's start to the
  group being Stable again (or Empty);
* `quorum_broker_group_offset_commits_total`: offsets committed (Kafka's
  `offset-commit-count`), one per partition;
* `quorum_broker_group_offsets_partitions{phase}`: `__consumer_offsets`
  partitions this broker leads, loading or active;
* `quorum_broker_group_load_seconds`: loading one offsets partition
  (Kafka's `partition-load-time-max/avg`, a distribution here).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker_agent.groups.coordinator import GroupCoordinator, Phase
from broker_agent.groups.state import GroupState

DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class GroupMetrics(Collector):
    def __init__(self, registry: CollectorRegistry, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.rebalance_seconds = Histogram(
            "quorum_broker_group_rebalance_seconds",
            "Rebalance start to the group Stable (or Empty) again.",
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.load_seconds = Histogram(
            "quorum_broker_group_load_seconds",
            "Loading one __consumer_offsets partition on becoming its leader.",
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        coordinator.machine.on_rebalance_done = lambda ms: self.rebalance_seconds.observe(ms / 1000)
        coordinator.on_load = lambda ms: self.load_seconds.observe(ms / 1000)
        registry.register(self)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        groups = GaugeMetricFamily(
            "quorum_broker_groups", "Groups this broker coordinates, by state.", labels=["state"]
        )
        counts = dict.fromkeys(GroupState, 0)
        for group in self.coordinator.machine.groups.values():
            counts[group.state] += 1
        for state, count in counts.items():
            if state is not GroupState.DEAD:
                groups.add_metric([state.value], count)
        yield groups
        yield CounterMetricFamily(
            "quorum_broker_group_rebalances",
            "Group rebalances started.",
            value=self.coordinator.machine.rebalances,
        )
        yield CounterMetricFamily(
            "quorum_broker_group_offset_commits",
            "Offsets committed, one per partition.",
            value=self.coordinator.offset_commits,
        )
        partitions = GaugeMetricFamily(
            "quorum_broker_group_offsets_partitions",
            "__consumer_offsets partitions this broker leads, by phase.",
            labels=["phase"],
        )
        phases = [phase for phase, _ in self.coordinator.owned.values()]
        for phase in Phase:
            partitions.add_metric([phase.value], phases.count(phase))
        yield partitions
