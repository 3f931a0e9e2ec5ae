"""Prometheus metrics of the metadata controller, after Kafka's `KafkaController`
and `ControllerEventManager` groups (ActiveControllerCount, GlobalTopicCount,
GlobalPartitionCount, OfflinePartitionsCount, PreferredReplicaImbalanceCount,
FencedBrokerCount, ActiveBrokerCount, EventQueueTimeMs, EventQueueProcessingTimeMs,
LastAppliedRecordOffset, LastCommittedRecordOffset, MetadataErrorCount).

Counts that need a walk over every partition are refreshed on the event loop
every few seconds (less often when a walk is long), and only when the image has
moved, so a scrape (on the HTTP thread) never iterates structures the loop is
changing. The walk yields to the loop every `WALK_CHUNK_TOPICS` topics: with a
million partitions one walk takes seconds, longer than a follower waits for its leader.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from quorum.common.metrics_endpoint import LATENCY_BUCKETS
from quorum.controller.controller import QuorumController
from quorum.controller.leader_election import NO_LEADER
from quorum.controller.topic_ops import min_isr

REFRESH_S = 5.0
WALK_DUTY_FACTOR = 20
WALK_CHUNK_TOPICS = 100


@dataclass
class _Counts:
    at_offset: int = -1
    topics: int = 0
    partitions: int = 0
    offline: int = 0
    imbalance: int = 0
    under_min_isr: int = 0
    fenced: int = 0
    active: int = 0


async def count(controller: QuorumController) -> _Counts:
    image = controller.image
    counts = _Counts(image.applied_offset, image.topic_count, image.partition_count)
    for i, topic in enumerate(list(image.topics_by_id.values())):
        if i % WALK_CHUNK_TOPICS == WALK_CHUNK_TOPICS - 1:
            await asyncio.sleep(0)  # each topic's partitions are walked in one go
        floor = min_isr(image, topic)
        for part in topic.partitions.values():
            counts.offline += part.leader == NO_LEADER
            counts.imbalance += bool(part.replicas) and part.leader != part.replicas[0]
            counts.under_min_isr += len(part.isr) < floor
    counts.fenced = sum(b.fenced for b in image.brokers.values())
    counts.active = len(image.brokers) - counts.fenced
    return counts


class ControllerCollector(Collector):
    def __init__(self, controller: QuorumController, registry: CollectorRegistry) -> None:
        self.controller = controller
        self.counts = _Counts()
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
        controller.queue.on_timing.append(
            lambda queued, took: (queue_time.observe(queued), processing.observe(took))
        )

    async def refresh_forever(self) -> None:
        """Every `REFRESH_S`, or rarer when a walk is long: the walks take at most
        1/`WALK_DUTY_FACTOR` of the loop (a million partitions take most of a
        second to walk, which the controller's writes and applies need more)."""
        loop = asyncio.get_running_loop()
        while True:
            took = 0.0
            if self.controller.image.applied_offset != self.counts.at_offset:
                started = loop.time()
                self.counts = await count(self.controller)
                took = loop.time() - started
            await asyncio.sleep(max(REFRESH_S, WALK_DUTY_FACTOR * took))

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        c, counts = self.controller, self.counts

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"quorum_controller_{name}", doc, value=value)

        yield gauge("active_controllers", "1 on the active controller, else 0.",
                    1.0 if c.queue.active else 0.0)  # fmt: skip
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
                    c.image.applied_offset - 1)  # fmt: skip
        yield gauge("last_committed_record_offset", "The high watermark minus one.",
                    c.raft.high_watermark - 1)  # fmt: skip
        yield CounterMetricFamily(
            "quorum_controller_timed_out_broker_heartbeats",
            "Broker sessions that ran out (no MetadataFetch for broker.session.timeout.ms).",
            value=c.timed_out_heartbeats,
        )
        yield CounterMetricFamily(
            "quorum_controller_request_errors",
            "Requests refused at call level (a ControllerError).",
            value=c.errors,
        )


async def cancel(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
