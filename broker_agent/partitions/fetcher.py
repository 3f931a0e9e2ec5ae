"""Follower fetchers (Kafka's ReplicaFetcherThread): one task per leader broker,
fetching every partition this broker follows from it.

Each round first truncates the partitions that just became followers (ask the
leader where their latest epoch ends, OffsetsForLeaderEpoch, then cut there;
or, in the test-only HW mode, cut to the own HW without asking), then sends
one long-polled Fetch for all of them with each one's LEO and last fetched
epoch. An answer carries records (appended as they came), the leader's HW (the
follower takes min(leader HW, own LEO)) and log start, or a diverging epoch
(cut to it and fetch again).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker_agent.partitions.api import (
    EpochQuery,
    FetchPartition,
    FetchPartitionResult,
    LeaderFetchClient,
)
from broker_agent.partitions.partition import Partition, Role
from broker_agent.partitions.record_batch import InvalidRecordBatch
from broker_agent.replication.epochs import EpochEndOffset
from broker_agent.replication.follower import (
    TruncationMode,
    follower_high_watermark,
    truncation_offset,
    truncation_offset_by_epoch,
)

if TYPE_CHECKING:
    from broker_agent.partitions.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class FollowerFetcher:
    def __init__(self, manager: ReplicaManager, client: LeaderFetchClient) -> None:
        self.manager = manager
        self.client = client
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._stopped = False

    def wake(self) -> None:
        """Metadata changed: start a fetcher for every leader followed and not fetched yet."""
        if self._stopped:
            return
        for leader_id in {p.assignment.leader for p in self._followed()}:
            task = self._tasks.get(leader_id)
            if task is None or task.done():
                self._tasks[leader_id] = asyncio.get_running_loop().create_task(
                    self._run(leader_id)
                )

    async def stop(self) -> None:
        self._stopped = True
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    def _followed(self, leader_id: int | None = None) -> list[Partition]:
        return [
            p
            for p in self.manager.partitions.values()
            if p.role is Role.FOLLOWER and (leader_id is None or p.assignment.leader == leader_id)
        ]

    async def _run(self, leader_id: int) -> None:
        backoff = self.manager.config.replica_fetch_backoff_ms / 1000
        while not self._stopped:
            parts = self._followed(leader_id)
            if not parts:
                return
            try:
                await self._truncate([p for p in parts if p.needs_truncation], leader_id)
                ready = [p for p in self._followed(leader_id) if not p.needs_truncation]
                if not ready:
                    await asyncio.sleep(backoff)
                    continue
                if not await self._fetch(ready, leader_id):
                    await asyncio.sleep(backoff)
            except (TimeoutError, ConnectionError, OSError) as exc:
                log.debug(
                    "broker %d: fetch from %d failed: %s", self.manager.broker_id, leader_id, exc
                )
                await asyncio.sleep(backoff)

    async def _truncate(self, parts: list[Partition], leader_id: int) -> None:
        if not parts:
            return
        manager = self.manager
        if manager.truncation_mode is TruncationMode.HIGH_WATERMARK:
            for p in parts:
                self._cut(p, truncation_offset(
                    TruncationMode.HIGH_WATERMARK, p.log.epoch_entries,
                    p.log.log_end_offset, p.high_watermark, None,
                ))  # fmt: skip
                p.needs_truncation = False
            return
        with_epochs = [p for p in parts if p.log.latest_epoch >= 0]
        for p in parts:
            if p.log.latest_epoch < 0:
                p.needs_truncation = False  # nothing stored, nothing to cut
        if not with_epochs:
            return
        queries = [
            EpochQuery(p.topic, p.partition, p.leader_epoch, p.log.latest_epoch)
            for p in with_epochs
        ]
        answers = await self.client.offsets_for_leader_epoch(leader_id, manager.broker_id, queries)
        for p, query, answer in zip(with_epochs, queries, answers, strict=True):
            if p.role is not Role.FOLLOWER or p.leader_epoch != query.current_leader_epoch:
                continue  # metadata moved on while asking
            if answer.error is not ErrorCode.none:
                continue  # retried next round (the leader may not know its epoch yet)
            offset = truncation_offset(
                TruncationMode.LEADER_EPOCH, p.log.epoch_entries, p.log.log_end_offset,
                p.high_watermark, EpochEndOffset(answer.leader_epoch, answer.end_offset),
            )  # fmt: skip
            self._cut(p, offset)
            p.needs_truncation = False

    def _cut(self, part: Partition, offset: int) -> None:
        if offset < part.log.log_end_offset:
            log.info(
                "broker %d: truncating %s-%d from %d to %d",
                self.manager.broker_id, part.topic, part.partition, part.log.log_end_offset, offset,
            )  # fmt: skip
            part.log.truncate_to(offset)
            part.producers.rebuild(part.log.batch_headers())
        part.high_watermark = min(part.high_watermark, part.log.log_end_offset)

    async def _fetch(self, parts: list[Partition], leader_id: int) -> bool:
        """One Fetch round; False when nothing useful came back (back off)."""
        manager = self.manager
        config = manager.config
        # The pre-KIP-320 protocol (HW mode, tests only) sent no last fetched epoch.
        old_rule = manager.truncation_mode is TruncationMode.HIGH_WATERMARK
        requests = [
            FetchPartition(
                p.topic,
                p.partition,
                p.log.log_end_offset,
                p.leader_epoch,
                -1 if old_rule else p.log.latest_epoch,
                p.log.log_start_offset,
                config.replica_fetch_max_bytes,
            )
            for p in parts
        ]
        epochs = {(p.topic, p.partition): p.leader_epoch for p in parts}
        results = await self.client.fetch(
            leader_id,
            manager.broker_id,
            config.replica_fetch_wait_max_ms,
            1,
            config.replica_fetch_response_max_bytes,
            requests,
        )
        progress = False
        for request, result in zip(requests, results, strict=True):
            part = manager.partitions.get((result.topic, result.partition))
            if (
                part is None
                or part.role is not Role.FOLLOWER
                or part.assignment.leader != leader_id
                or part.leader_epoch != epochs[(result.topic, result.partition)]
                or part.log.log_end_offset != request.fetch_offset
            ):
                continue
            progress |= self._handle(part, result)
        return progress

    def _handle(self, part: Partition, result: FetchPartitionResult) -> bool:
        plog = part.log
        part.fetch_answers += 1
        if result.error is ErrorCode.offset_out_of_range:
            if result.log_start_offset > plog.log_end_offset:
                plog.reset_to(result.log_start_offset)  # behind the leader's retention
                part.producers.rebuild(())
                part.high_watermark = plog.log_start_offset
            else:
                part.needs_truncation = True
            return True
        if result.error is not ErrorCode.none:
            return False  # not leader, epoch mismatch: wait for metadata
        if result.diverging_epoch is not None:
            answer = EpochEndOffset(*result.diverging_epoch)
            before = plog.log_end_offset
            self._cut(part, truncation_offset_by_epoch(
                plog.epoch_entries, plog.log_end_offset, part.high_watermark, answer
            ))  # fmt: skip
            return plog.log_end_offset < before  # a cut that moves nothing backs off
        if result.records:
            now = self.manager.clock()
            start = plog.log_end_offset
            try:
                plog.append_as_follower(result.records, now)
            except (InvalidRecordBatch, ValueError) as exc:
                log.warning(
                    "broker %d: bad fetch answer for %s-%d: %s",
                    self.manager.broker_id, part.topic, part.partition, exc,
                )  # fmt: skip
                return False
            for header in plog.batch_headers(start):
                part.producers.update(header, header.base_offset)
        if result.log_start_offset > plog.log_start_offset:
            plog.advance_log_start(min(result.log_start_offset, result.high_watermark))
        part.fetched_leader_high_watermark = (part.leader_epoch, result.high_watermark)
        part.high_watermark = max(
            min(part.high_watermark, plog.log_end_offset),
            follower_high_watermark(result.high_watermark, plog.log_end_offset),
        )
        part.notify()
        return True
