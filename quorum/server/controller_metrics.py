"""Prometheus metrics of the metadata controller, after Kafka's `KafkaController`
and `ControllerEventManager` groups (ActiveControllerCount, GlobalTopicCount,
GlobalPartitionCount, OfflinePartitionsCount, PreferredReplicaImbalanceCount,
FencedBrokerCount, ActiveBrokerCount, EventQueueTimeMs, EventQueueProcessingTimeMs,
LastAppliedRecordOffset, LastCommittedRecordOffset, MetadataErrorCount).

Counts that need a walk over every partition are refreshed on the event loop
every few seconds (less often when a walk is long), and only when the image has
moved, so a scrape (on the HTTP thread) never iterates structures the loop is
changing. Everything is read through the controller's `ControllerView`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from quorum.common.metrics_endpoint import LATENCY_BUCKETS
from quorum.controller.metrics_view import ControllerView, ImageCounts

REFRESH_S = 5.0
WALK_DUTY_FACTOR = 20


class ControllerCollector(Collector):
    def __init__(self, view: ControllerView, registry: CollectorRegistry) -> None:
        self.view = view
        self.counts = ImageCounts()
        registry.register(self)
        queue_time = Histogram(
            "quorum_controller_event_queue_time_seconds",
            "Time a write waited in the controller's queue before it was handled.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        processing = Histogram(
            "quorum_controller_event_processing_time_seconds",
            "Time to validate a write, propose its records and see them committed.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        view.on_write_timing(
            lambda queued, took: (queue_time.observe(queued), processing.observe(took))
        )

    async def refresh_forever(self) -> None:
        """Every `REFRESH_S`, or rarer when a walk is long: the walks take at most
        1/`WALK_DUTY_FACTOR` of the loop (a million partitions take most of a
        second to walk, which the controller's writes and applies need more)."""
        loop = asyncio.get_running_loop()
        while True:
            took = 0.0
            if self.view.applied_offset != self.counts.at_offset:
                started = loop.time()
                self.counts = await self.view.count()
                took = loop.time() - started
            await asyncio.sleep(max(REFRESH_S, WALK_DUTY_FACTOR * took))

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        c, counts = self.view, self.counts

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"quorum_controller_{name}", doc, value=value)

        yield gauge("active_controllers", "1 on the active controller, else 0.",
                    1.0 if c.active else 0.0)  # fmt: skip
        yield gauge("global_topics", "Topics in the committed image.", counts.topics)
        yield gauge("global_partitions", "Partitions in the image.", counts.partitions)
        yield gauge("offline_partitions", "Partitions with no leader.", counts.offline)
        yield gauge("preferred_replica_imbalances",
                    "Partitions not led by their first replica.", counts.imbalance)  # fmt: skip
        yield gauge("under_min_isr_partitions",
                    "Partitions whose ISR is smaller than min.insync.replicas.",
                    counts.under_min_isr)  # fmt: skip
        yield gauge("fenced_brokers", "Registered brokers that are fenced.", counts.fenced)
        yield gauge("active_brokers", "Registered brokers that are unfenced.", counts.active)
        yield gauge("last_applied_record_offset", "Offset of the last record applied.",
                    c.applied_offset - 1)  # fmt: skip
        yield gauge("last_committed_record_offset", "The high watermark minus one.",
                    c.high_watermark - 1)  # fmt: skip
        stamp = c.last_applied_append_time_ms
        yield gauge("last_applied_record_timestamp_seconds",
                    "Leader's append time of the last applied record, -1 if none.",
                    stamp / 1000 if stamp >= 0 else -1)  # fmt: skip
        yield gauge("last_applied_record_lag_seconds",
                    "Now minus the last applied record's append time, -1 if none.",
                    max(0.0, time.time() - stamp / 1000) if stamp >= 0 else -1)  # fmt: skip
        yield CounterMetricFamily(
            "quorum_controller_timed_out_broker_heartbeats",
            "Broker sessions that ran out (no MetadataFetch for broker.session.timeout.ms).",
            value=c.timed_out_heartbeats,
        )
        yield CounterMetricFamily(
            "quorum_controller_request_errors",
            "Requests refused at call level (a ControllerError).",
            value=c.request_errors,
        )


async def cancel(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
