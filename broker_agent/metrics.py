"""Prometheus metrics of one broker agent (`metrics.listener`).

Gauges are read from the agent at scrape time; latencies are histograms
observed as they happen. Kafka's broker metrics it mirrors: `BrokerState`
(quorum_broker_state), `last-applied-record-offset`
(quorum_broker_metadata_last_applied_record_offset) and `last-applied-record-lag-ms`
(quorum_broker_metadata_apply_lag_seconds, a histogram here).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import accumulate

from prometheus_client import Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from broker_agent.agent import ONLINE, STATE_NAMES, BrokerAgent
from broker_agent.partitions.log_cleaner import CleanerStats
from broker_agent.replica_metrics import replica_metrics
from quorum.common.metrics_endpoint import LATENCY_BUCKETS, MetricsEndpoint


class AgentCollector(Collector):
    def __init__(self, agent: BrokerAgent) -> None:
        self._agent = agent

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        agent = self._agent
        state = GaugeMetricFamily(
            "quorum_broker_state", "1 for the broker agent's current state.", labels=["state"]
        )
        for value, name in STATE_NAMES.items():
            state.add_metric([name], 1.0 if agent.state == value else 0.0)
        yield state
        applied = agent.cache.next_offset
        yield GaugeMetricFamily(
            "quorum_broker_metadata_last_applied_record_offset",
            "Offset of the last metadata record applied, -1 if none (Kafka's meaning).",
            value=applied - 1,
        )
        yield GaugeMetricFamily(
            "quorum_broker_metadata_lag_records",
            "Committed records not yet applied (high watermark of the last fetch minus applied).",
            value=max(0, agent.stats.high_watermark - applied),
        )
        yield GaugeMetricFamily(
            "quorum_broker_epoch", "Broker epoch of the current registration.",
            value=agent.stats.broker_epoch,
        )  # fmt: skip
        yield CounterMetricFamily(
            "quorum_broker_metadata_fetches", "Successful MetadataFetch calls.",
            value=agent.stats.fetches,
        )  # fmt: skip
        yield CounterMetricFamily(
            "quorum_broker_metadata_fetch_errors", "Failed MetadataFetch calls.",
            value=agent.stats.fetch_errors,
        )  # fmt: skip
        yield CounterMetricFamily(
            "quorum_broker_metadata_load_errors", "Metadata snapshots that failed to load.",
            value=agent.stats.load_errors,
        )  # fmt: skip
        yield CounterMetricFamily(
            "quorum_broker_metadata_apply_errors", "Metadata batches that failed to apply.",
            value=agent.stats.apply_errors,
        )  # fmt: skip
        yield CounterMetricFamily(
            "quorum_broker_metadata_records_applied", "Metadata records applied.",
            value=agent.stats.records_applied,
        )  # fmt: skip
        yield CounterMetricFamily(
            "quorum_broker_metadata_snapshots_loaded", "Snapshots loaded from the controller.",
            value=agent.stats.snapshots_loaded,
        )  # fmt: skip
        if agent.replicas is not None:
            yield from replica_metrics(agent.replicas)
            yield from cleaner_metrics(agent.replicas.cleaner.stats, agent.replicas.clock())


def cleaner_metrics(
    stats: CleanerStats, now_ms: int
) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The log cleaner's (Kafka's `kafka.log:type=LogCleaner` and `LogCleanerManager`)."""
    prefix = "quorum_broker_log_cleaner_"
    counters = [
        ("runs", "Cleaning rounds completed.", stats.runs),
        ("aborted_rounds", "Rounds dropped because the log changed under them.",
         stats.aborted_rounds),
        ("read_bytes", "Bytes of batches the cleaner read while rewriting.", stats.bytes_read),
        ("io_bytes", "Bytes the cleaner read and wrote (mapping and rewriting), step by step.",
         stats.io_bytes),
        ("written_bytes", "Bytes of batches the cleaner wrote.", stats.bytes_written),
        ("removed_records", "Records removed (superseded, expired tombstones, keyless).",
         stats.records_removed),
        ("reclaimed_bytes", "Bytes removed from logs by cleaning.", stats.bytes_removed),
    ]  # fmt: skip
    for name, text, value in counters:
        yield CounterMetricFamily(prefix + name, text, value=value)
    since = stats.last_check_ms if stats.last_check_ms >= 0 else now_ms
    gauges = [
        ("max_dirty_percent", "Largest dirty ratio of a compacted log, in percent.",
         100 * stats.max_dirty_ratio),
        ("recopy_percent", "Bytes written / bytes read by the last round, in percent.",
         100 * stats.last_recopy_ratio),
        ("max_clean_time_seconds", "Longest of each cleaner thread's last round.",
         stats.max_last_run_seconds),
        ("max_buffer_utilization_percent", "How full the last round's offset map got.",
         100 * stats.last_buffer_utilization),
        ("time_since_last_run_seconds", "Since the cleaner last looked for work.",
         max(0, now_ms - since) / 1000),
        ("uncleanable_partitions", "Partitions a failed round marked uncleanable.",
         len(stats.uncleanable)),
    ]  # fmt: skip
    for name, text, value in gauges:
        yield GaugeMetricFamily(prefix + name, text, value=value)
    labels = ["topic", "partition"]
    dirty = GaugeMetricFamily(prefix + "partition_dirty_ratio",
                              "A compacted partition's dirty ratio when last checked.",
                              labels=labels)  # fmt: skip
    last = GaugeMetricFamily(prefix + "partition_last_run_timestamp_seconds",
                             "When a round on the partition last completed (0: never).",
                             labels=labels)  # fmt: skip
    reclaimed = CounterMetricFamily(prefix + "partition_reclaimed_bytes",
                                    "Bytes cleaning removed from the partition's log.",
                                    labels=labels)  # fmt: skip
    for (topic, partition), state in sorted(stats.partitions.items()):
        values = [topic, str(partition)]
        dirty.add_metric(values, state.dirty_ratio)
        last.add_metric(values, max(0, state.last_run_end_ms) / 1000)
        reclaimed.add_metric(values, state.reclaimed_bytes)
    yield from (dirty, last, reclaimed)


class CountedHistogram(Collector):
    """A histogram that takes a value with how many observations had it: a fetched
    batch's records share one commit-to-apply lag, and one `Histogram.observe`
    per record cost a broker's loop 170 µs for a commit of 100 new topics (issue 36).
    Observed on the event loop only; a scrape copies the counts."""

    def __init__(self, name: str, documentation: str, buckets: Sequence[float]) -> None:
        self._name = name
        self._documentation = documentation
        self._bounds = [*sorted(buckets), math.inf]
        self._counts = [0] * len(self._bounds)
        self._sum = 0.0

    def observe(self, value: float, count: int = 1) -> None:
        self._counts[bisect_left(self._bounds, value)] += count
        self._sum += value * count

    def collect(self) -> Iterator[HistogramMetricFamily]:
        counts, total = list(self._counts), self._sum
        yield HistogramMetricFamily(
            self._name,
            self._documentation,
            buckets=[
                (floatToGoString(bound), cumulative)
                for bound, cumulative in zip(self._bounds, accumulate(counts), strict=True)
            ],
            sum_value=total,
        )


class AgentMetrics(MetricsEndpoint):
    def __init__(self, agent: BrokerAgent) -> None:
        super().__init__()
        self.registry.register(AgentCollector(agent))
        # `/readyz`: a broker is ready once ONLINE (registered, caught up, unfenced).
        self.readiness = lambda: (
            agent.state == ONLINE,
            STATE_NAMES.get(agent.state, str(agent.state)),
        )
        lag = CountedHistogram(
            "quorum_broker_metadata_apply_lag_seconds",
            "Commit (controller clock) to apply (broker clock, offset-corrected) per record.",
            LATENCY_BUCKETS,
        )
        self.registry.register(lag)
        fetch = Histogram(
            "quorum_broker_metadata_fetch_seconds",
            "MetadataFetch round trips, long-poll wait included.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        agent.stats.on_apply_lag.append(lambda ms, n: lag.observe(max(0.0, ms) / 1000, n))
        agent.stats.on_fetch.append(fetch.observe)
        load = Histogram(
            "quorum_broker_metadata_snapshot_load_seconds",
            "Fetching, validating and installing a metadata snapshot from the controller.",
            buckets=(*LATENCY_BUCKETS, 10.0, 30.0, 60.0),
            registry=self.registry,
        )
        agent.stats.on_snapshot_load.append(load.observe)
