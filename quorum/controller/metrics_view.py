"""What the metrics read of a controller: a few numbers, never the image itself.

The Prometheus collector (`quorum.server.controller_metrics`) is on the server
side of the seam; it asks this view, so the walk over every partition (offline,
imbalanced, under min ISR) stays beside the image it walks. The walk yields to
the loop every `WALK_CHUNK_TOPICS` topics: with a million partitions one walk
takes seconds, longer than a follower waits for its leader.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quorum.controller.leader_election import NO_LEADER
from quorum.controller.topic_ops import min_isr

if TYPE_CHECKING:
    from quorum.controller.controller import QuorumController

WALK_CHUNK_TOPICS = 100


@dataclass
class ImageCounts:
    at_offset: int = -1
    topics: int = 0
    partitions: int = 0
    offline: int = 0
    imbalance: int = 0
    under_min_isr: int = 0
    fenced: int = 0
    active: int = 0


class ControllerView:
    def __init__(self, controller: QuorumController) -> None:
        self._c = controller

    @property
    def active(self) -> bool:
        """This node is the active controller (it leads and its epoch committed)."""
        return self._c.queue.active

    @property
    def applied_offset(self) -> int:
        return self._c.image.applied_offset

    @property
    def high_watermark(self) -> int:
        return self._c.raft.high_watermark

    @property
    def last_applied_append_time_ms(self) -> int:
        """The leader's append time of the last batch applied, -1 if none."""
        return self._c.last_applied_append_time_ms

    @property
    def timed_out_heartbeats(self) -> int:
        return self._c.timed_out_heartbeats

    @property
    def request_errors(self) -> int:
        return self._c.errors

    def on_write_timing(self, observe: Callable[[float, float], None]) -> None:
        """`observe(queued_s, processing_s)` after every write the queue handled."""
        self._c.queue.on_timing.append(observe)

    async def count(self) -> ImageCounts:
        image = self._c.image
        counts = ImageCounts(image.applied_offset, image.topic_count, image.partition_count)
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
