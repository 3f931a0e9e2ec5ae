"""Prometheus metrics of one controller, named after Kafka's `raft-metrics` group.

Gauges are read from the driver when Prometheus scrapes (a custom collector), so
they can never go stale; latencies are histograms observed as they happen.
Kafka's JMX names map as: current-leader -> quorum_raft_current_leader,
current-epoch -> quorum_raft_current_epoch, current-state -> quorum_raft_current_state,
high-watermark -> quorum_raft_high_watermark, log-end-offset ->
quorum_raft_log_end_offset, commit-latency -> quorum_raft_commit_latency_seconds,
election-latency -> quorum_raft_election_latency_seconds, fetch-records-rate ->
rate(quorum_raft_fetch_requests_total) per replica, poll-idle-ratio-avg ->
quorum_raft_poll_idle_ratio (docs/metrics.md has the full table).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from quorum.common.metrics_endpoint import LATENCY_BUCKETS, MetricsEndpoint
from quorum.raft.effects import Role
from quorum.server.driver import RaftDriver


class Histograms:
    """The driver's `LatencyObserver`, backed by Prometheus histograms."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._commit = Histogram(
            "quorum_raft_commit_latency_seconds",
            "Time from a proposal's append on the leader to its commit (high watermark passed it).",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._election = Histogram(
            "quorum_raft_election_latency_seconds",
            "Time from the start of a (pre-)election to a known leader.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._flush = Histogram(
            "quorum_raft_log_flush_seconds",
            "Duration of one log fsync (one per batch of appends).",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )

    def commit(self, seconds: float) -> None:
        self._commit.observe(seconds)

    def election(self, seconds: float) -> None:
        self._election.observe(seconds)

    def flush(self, seconds: float) -> None:
        self._flush.observe(seconds)


class RaftCollector(Collector):
    """Reads the node's state at scrape time (plain int reads; safe off the loop)."""

    def __init__(self, driver: RaftDriver) -> None:
        self._driver = driver

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        driver = self._driver

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, value=value)

        yield gauge(
            "quorum_raft_current_leader",
            "Id of the current leader, -1 when unknown.",
            -1 if driver.leader_id is None else driver.leader_id,
        )
        yield gauge("quorum_raft_current_epoch", "Current leader epoch.", driver.epoch)
        state = GaugeMetricFamily(
            "quorum_raft_current_state",
            "1 for this node's current Raft state.",
            labels=["state"],
        )
        for role in Role:
            state.add_metric([role.value], 1.0 if driver.role is role else 0.0)
        yield state
        yield gauge(
            "quorum_raft_high_watermark", "High watermark (committed end).", driver.high_watermark
        )
        yield gauge("quorum_raft_log_end_offset", "Log end offset.", driver.log_end_offset)
        yield gauge("quorum_raft_log_start_offset", "Log start offset.", driver.log_start_offset)
        yield gauge("quorum_raft_log_flushed_offset", "Durable log end offset.", driver.flushed_end)
        yield gauge(
            "quorum_raft_current_vote",
            "The candidate this node voted for in its epoch, -1 if none.",
            -1 if driver.voted_for is None else driver.voted_for,
        )
        yield gauge(
            "quorum_raft_log_end_epoch", "Epoch of the last batch in the log.", driver.log_end_epoch
        )
        voters = driver.core.voters
        yield gauge("quorum_raft_voters", "Voters in the quorum's configuration.", len(voters))
        yield gauge(
            "quorum_raft_observers",
            "Observers fetching from this node (on the leader only).",
            len([r for r in driver.replica_progress() if r not in voters])
            if driver.role is Role.LEADER
            else 0,
        )
        unreachable = getattr(driver.transport, "unreachable_peers", None)
        yield gauge(
            "quorum_raft_unknown_voter_connections",
            "Voters this node's last call to failed, with no answer since.",
            len(unreachable()) if unreachable is not None else 0,
        )
        yield gauge(
            "quorum_raft_poll_idle_ratio",
            "Fraction of the sampled window (metrics.sample.window.ms times "
            "metrics.num.samples) the Raft driver spent waiting for work, not processing.",
            driver.poll_idle.ratio(),
        )
        yield CounterMetricFamily(
            "quorum_raft_elections",
            "Elections this node has won.",
            value=driver.stats.elections,
        )
        yield CounterMetricFamily(
            "quorum_raft_log_flushes", "Log fsyncs.", value=driver.stats.flushes
        )
        yield CounterMetricFamily(
            "quorum_raft_append_records",
            "Records appended to this node's log.",
            value=driver.stats.records_appended,
        )
        fetches = CounterMetricFamily(
            "quorum_raft_fetch_requests",
            "Fetch requests received per replica (rate() gives the fetch rate).",
            labels=["replica"],
        )
        for replica, count in sorted(driver.stats.fetches_by_replica.items()):
            fetches.add_metric([str(replica)], count)
        yield fetches
        yield from self._lag(driver)
        if driver.snapshots is not None:
            stats = driver.snapshots.stats
            yield CounterMetricFamily(
                "quorum_raft_snapshots",
                "Snapshots this node has written.",
                value=stats.taken,
            )
            yield CounterMetricFamily(
                "quorum_raft_snapshots_installed",
                "Snapshots fetched from the leader and installed.",
                value=stats.installed,
            )
            yield gauge(
                "quorum_raft_latest_snapshot_offset",
                "End offset of the newest snapshot, -1 when none.",
                stats.latest_offset,
            )

    def _lag(self, driver: RaftDriver) -> Iterator[GaugeMetricFamily]:
        records = GaugeMetricFamily(
            "quorum_raft_follower_lag_records",
            "Leader's log end minus the replica's acknowledged end (on the leader only).",
            labels=["replica"],
        )
        lag_s = GaugeMetricFamily(
            "quorum_raft_follower_lag_seconds",
            "Time since the replica was last caught up to the leader, -1 if never "
            "(on the leader only).",
            labels=["replica"],
        )
        if driver.role is Role.LEADER:
            now = driver.clock()
            end = driver.log_end_offset
            for replica, progress in sorted(driver.replica_progress().items()):
                records.add_metric([str(replica)], max(0, end - progress.end_offset))
                caught = progress.last_caught_up_ms
                lag_s.add_metric([str(replica)], -1 if caught is None else (now - caught) / 1000)
        yield records
        yield lag_s


class MetricsServer(MetricsEndpoint):
    """A controller's endpoint: the Raft gauges and latency histograms."""

    def __init__(self, driver: RaftDriver) -> None:
        super().__init__()
        self.registry.register(RaftCollector(driver))
        self.readiness = lambda: controller_readiness(driver)
        driver.latencies = Histograms(self.registry)
        self.started_at = time.time()


def controller_readiness(driver: RaftDriver) -> tuple[bool, str]:
    """`/readyz`: ready only while this node leads, or follows a leader it can
    reach; a node that still names a leader it lost is not (it serves stale reads)."""
    leader, role = driver.leader_id, driver.role
    if driver.closed:
        return False, "shutting down"
    if leader is None:
        return False, f"no leader known ({role.value} in epoch {driver.epoch})"
    if role is Role.LEADER:
        return True, f"leader in epoch {driver.epoch}"
    unreachable = getattr(driver.transport, "unreachable_peers", None)
    if role is not Role.FOLLOWER or (unreachable is not None and leader in unreachable()):
        return False, f"leader {leader} not reachable ({role.value} in epoch {driver.epoch})"
    return True, f"following leader {leader} in epoch {driver.epoch}"
