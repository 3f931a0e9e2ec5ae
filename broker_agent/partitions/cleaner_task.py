"""The broker's log cleaner: `log.cleaner.threads` asyncio tasks (1 by default)
on the broker's event loop, each cleaning one log at a time.

Every `log.cleaner.backoff.ms` a task picks the filthiest compacted partition
this broker holds that no other task is cleaning, leader or follower alike
(each replica cleans its own log, as in Kafka), and runs one round of its own
`LogCleaner` in bounded steps, yielding to the event loop between them and
sleeping as `log.cleaner.io.max.bytes.per.second` requires. As in Kafka, the
tasks share that throttle and split `log.cleaner.dedupe.buffer.size` between
their key maps; on one event loop they add no CPU, only let a long round on one
partition run beside rounds on others. A round whose partition was deleted,
truncated or reset meanwhile is dropped (its `.cleaned` file removed); a round
that fails marks the partition uncleanable (logged, counted) and the broker
keeps serving it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from broker_agent.partitions.log_cleaner import (
    CleanerConfig,
    CleanerStats,
    LogCleaner,
    PartitionCleaning,
    RoundResult,
    cleanable_range,
    should_clean,
)
from broker_agent.partitions.partition import Partition
from broker_agent.partitions.partition_log import PartitionLog

if TYPE_CHECKING:
    from broker_agent.partitions.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class Throttle:
    """`log.cleaner.io.max.bytes.per.second` over one round: after each step the
    round sleeps until the bytes it has read so far would have taken that long
    at the limit, so a round never runs ahead of the rate (a slow step earns no
    burst beyond what its time already paid for)."""

    def __init__(self, bytes_per_second: float, clock: Callable[[], float]) -> None:
        self.bytes_per_second = bytes_per_second
        self.clock = clock
        self.started = clock()
        self.bytes = 0

    def delay_after(self, step_bytes: int) -> float:
        """Seconds to wait after a step that read `step_bytes`."""
        self.bytes += step_bytes
        if self.bytes_per_second == float("inf"):
            return 0.0
        return max(0.0, self.bytes / self.bytes_per_second - (self.clock() - self.started))


class CleanerTask:
    def __init__(self, manager: ReplicaManager, config: CleanerConfig) -> None:
        self.manager = manager
        self.config = config
        threads = max(1, config.threads)
        share = replace(config, dedupe_buffer_size=config.dedupe_buffer_size // threads)
        self.cleaners = [LogCleaner(share) for _ in range(threads)]
        self.cleaner = self.cleaners[0]
        for other in self.cleaners[1:]:  # one set of figures and horizons for the broker
            other.stats = self.cleaner.stats
            other.horizons = self.cleaner.horizons
        self.started_ms = manager.clock()
        self._tasks: list[asyncio.Task[None]] = []
        self._cleaning: set[tuple[str, int]] = set()  # partitions a round is running on
        self._throttle: Throttle | None = None  # shared by the rounds running at once
        # Partitions a failed round marked, with the log it failed on: a deleted
        # (or recreated) partition is forgotten, as Kafka's cleaner manager does.
        self._uncleanable: dict[tuple[str, int], PartitionLog] = {}
        # The throttle's clock and sleep (the tests pace a round on a fake clock).
        self.clock_s: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @property
    def stats(self) -> CleanerStats:
        return self.cleaner.stats

    def start(self) -> None:
        if self.config.enable and not self._tasks:
            self._tasks = [asyncio.create_task(self._run(c)) for c in self.cleaners]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    async def _run(self, cleaner: LogCleaner) -> None:
        while True:
            try:
                cleaned = await self.clean_once(cleaner)
            except Exception:  # never let one bad round stop compaction for good
                log.exception("broker %d: log cleaner pass failed", self.manager.broker_id)
                cleaned = False
            if not cleaned:
                await asyncio.sleep(self.config.backoff_ms / 1000)

    def filthiest(self, now_ms: int) -> Partition | None:
        """The compacted partition most in need of cleaning, if any needs it;
        also updates the max dirty ratio the metrics show."""
        best: tuple[float, Partition] | None = None
        max_ratio = 0.0
        live = {part.log.directory for part in self.manager.partitions.values()}
        for directory in [d for d in self.cleaner.horizons if d not in live]:
            del self.cleaner.horizons[directory]  # a deleted partition's
        per_partition = self.stats.partitions
        for key in [k for k in per_partition if k not in self.manager.partitions]:
            del per_partition[key]
        for key, marked in list(self._uncleanable.items()):
            hosted = self.manager.partitions.get(key)
            if hosted is None or hosted.log is not marked:  # deleted, moved away, recreated
                del self._uncleanable[key]
                self.stats.uncleanable.discard(f"{key[0]}-{key[1]}")
        for key, part in list(self.manager.partitions.items()):
            if not part.log.config.compact:
                per_partition.pop(key, None)
                continue
            if key in self._uncleanable:
                continue
            cleanable = cleanable_range(part.log, part.high_watermark, now_ms)
            max_ratio = max(max_ratio, cleanable.dirty_ratio)
            per_partition.setdefault(key, PartitionCleaning()).dirty_ratio = cleanable.dirty_ratio
            horizon = self.cleaner.horizons.get(part.log.directory)
            if (
                key not in self._cleaning
                and should_clean(part.log, cleanable, now_ms, horizon)
                and (best is None or cleanable.dirty_ratio > best[0])
            ):
                best = (cleanable.dirty_ratio, part)
        self.stats.max_dirty_ratio = max_ratio
        self.stats.last_check_ms = now_ms
        return best[1] if best else None

    async def clean_once(self, cleaner: LogCleaner | None = None) -> bool:
        """One round on the filthiest partition no other round is cleaning, with
        `cleaner` (the first task's by default); whether one ran to its end."""
        now = self.manager.clock()
        part = self.filthiest(now)
        if part is None:
            return False
        key = (part.topic, part.partition)
        if not self._cleaning or self._throttle is None:  # a new window for a new burst
            self._throttle = Throttle(self.config.io_max_bytes_per_second, self.clock_s)
        self._cleaning.add(key)
        try:
            return await self._round(cleaner or self.cleaner, part, now, self._throttle)
        finally:
            self._cleaning.discard(key)

    async def _round(
        self, cleaner: LogCleaner, part: Partition, now: int, throttle: Throttle
    ) -> bool:
        plog = part.log
        name = f"{part.topic}-{part.partition}"
        result = RoundResult()
        steps = cleaner.clean_steps(plog, part.high_watermark, now, part.producers, result)
        try:
            for step_bytes in steps:
                await asyncio.sleep(0)
                self.stats.io_bytes += step_bytes
                ahead = throttle.delay_after(step_bytes)
                if ahead > 0:
                    await self.sleep(ahead)
                if self.manager.partitions.get((part.topic, part.partition)) is not part:
                    steps.close()  # deleted meanwhile: drop the round
                    return False
        except Exception:
            log.exception("broker %d: cleaning %s failed; marked uncleanable",
                          self.manager.broker_id, name)  # fmt: skip
            self._uncleanable[(part.topic, part.partition)] = plog
            self.stats.uncleanable.add(name)
            return False
        if not result.aborted:
            self.stats.max_last_run_seconds = max(c.last_run_seconds for c in self.cleaners)
            self.stats.last_run_end_ms = self.manager.clock()
            state = self.stats.partitions.setdefault((part.topic, part.partition),
                                                     PartitionCleaning())  # fmt: skip
            state.last_run_end_ms = self.stats.last_run_end_ms
            state.reclaimed_bytes += max(0, result.bytes_read - result.bytes_written)
            state.dirty_ratio = 0.0
        if result.cleaned:
            log.info(
                "broker %d: cleaned %s up to offset %d: %d records removed, %d of %d bytes kept",
                self.manager.broker_id, name, result.map_end, result.records_removed,
                result.bytes_written, result.bytes_read,
            )  # fmt: skip
        return not result.aborted
