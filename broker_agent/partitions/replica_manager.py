"""The replica manager: this broker's partition replicas, as committed metadata says.

Interface (called by the Kafka protocol handlers in `broker_agent.kafka`, and by
the broker agent when it applies metadata):

    ReplicaManager(broker_id, log_dir, config, *, isr_changer=None,
                   fetch_client=None, clock=wall_clock_ms,
                   truncation_mode=TruncationMode.LEADER_EPOCH)
    await start() / await close()
    on_metadata(image: MetadataImage, *, open_in_background=False) -> None
    apply_metadata(view: MetadataView, *, open_in_background=False) -> None
                                                        # the same, from plain values
    await append(topic, partition, records: bytes, acks: int, timeout_ms: int)
        -> AppendResult(error, base_offset, log_append_time_ms, log_start_offset,
                        error_message)
    await fetch(replica_id, max_wait_ms, min_bytes, max_bytes,
                partitions: Sequence[FetchPartition], isolation_level)
        -> list[FetchPartitionResult]
    list_offsets(topic, partition, timestamp, current_leader_epoch)
        -> ListOffsetsResult(error, offset, timestamp, leader_epoch)
    replica_offsets(...)        # the same from this replica's own log (DEBUGGING_REPLICA_ID)
    offsets_for_leader_epoch(topic, partition, current_leader_epoch, leader_epoch)
        -> EpochEndOffsetResult(error, leader_epoch, end_offset)
    tick() -> None              # ISR shrink by lag, retention, timed flush (also a task)
    cleaner: CleanerTask        # compaction (log_cleaner.py), a task of its own
    high_watermark(topic, partition) / log_end_offset(...) / partition_state(...)

Roles follow the metadata: the replica named leader becomes leader at that
leader epoch, the others follow it, a partition that leaves this broker is
deleted with its files. Requests carrying an older leader epoch than the
replica's get FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH; a replica
that does not lead answers NOT_LEADER_OR_FOLLOWER. HW, ISR and truncation
decisions are `broker_agent.replication`'s; this class does the I/O and waits.
Followers fetch through the `LeaderFetchClient` seam (none: they do not fetch).

New replicas' logs are opened in worker threads (`log_opener.py`) when the
agent asks (`open_in_background`), so the event loop keeps answering; meanwhile
a Produce or Fetch for such a replica waits for the open (within its own
timeout) and the other requests get NOT_LEADER_OR_FOLLOWER (retriable).

Split by job: the settings in `replica_config.py`, what a Produce is refused
and when it is answered in `produce_path.py`, a Fetch's answer and long poll
in `fetch_path.py`, the offset lookups in `offset_lookups.py`; this class keeps
the replicas and their roles, the appends, the HW and the ISR changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from kio.schema.errors import ErrorCode

from broker_agent.partitions import topic_identity
from broker_agent.partitions.api import (
    CONSUMER_REPLICA_ID,
    NO_LEADER_EPOCH,
    AppendResult,
    EpochEndOffsetResult,
    FetchPartition,
    FetchPartitionResult,
    IsrChanger,
    IsrChangeRequest,
    IsrChangeResult,
    LeaderFetchClient,
    ListOffsetsResult,
)
from broker_agent.partitions.assignments import BrokerView, Key, MetadataView, PartitionAssignment
from broker_agent.partitions.cleaner_task import CleanerTask
from broker_agent.partitions.fetch_path import long_poll, read_partition
from broker_agent.partitions.fetcher import FollowerFetcher
from broker_agent.partitions.isr_sender import IsrChangeSender
from broker_agent.partitions.log_deleter import LogDeleter
from broker_agent.partitions.log_opener import BackgroundOpener, OpenedLog
from broker_agent.partitions.offset_lookups import epoch_end_offset, offset_at
from broker_agent.partitions.partition import Partition, Role
from broker_agent.partitions.partition_log import LogConfig, PartitionLog, directory_name
from broker_agent.partitions.produce_path import await_acks, refuse_before_append
from broker_agent.partitions.producer_state import ProducerStateTable, SequenceCheck
from broker_agent.partitions.record_batch import InvalidRecordBatch, split_batches
from broker_agent.partitions.replica_config import LogConfigs, ReplicaConfig
from broker_agent.replication import leader as rules
from broker_agent.replication.follower import TruncationMode
from quorum.controller.metadata_image import MetadataImage

log = logging.getLogger(__name__)

SEQUENCE_ERRORS = {
    SequenceCheck.OUT_OF_ORDER: ErrorCode.out_of_order_sequence_number,
    SequenceCheck.INVALID_EPOCH: ErrorCode.invalid_producer_epoch,
}


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_dir: str | Path,
        config: ReplicaConfig | None = None,
        *,
        isr_changer: IsrChanger | None = None,
        fetch_client: LeaderFetchClient | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        truncation_mode: TruncationMode = TruncationMode.LEADER_EPOCH,
    ) -> None:
        self.broker_id = broker_id
        self.log_dir = Path(log_dir)
        self.config = config or ReplicaConfig()
        self.clock = clock
        self.truncation_mode = truncation_mode
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetcher = FollowerFetcher(self, fetch_client) if fetch_client is not None else None
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._closed = False
        # Replicas whose logs a worker thread is opening.
        self._opener = BackgroundOpener(
            broker_id,
            lambda assignment, config, now: self._open_log(assignment, config, now),
            self._join_opened,
            lambda: self._closed,
            self.config.num_recovery_threads_per_data_dir,
        )
        # What the metadata wants here: replica -> assignment, and hosted topics'
        # configs; kept current from the image's changes by `_metadata` (images).
        self._wanted: Mapping[Key, PartitionAssignment] = {}
        self._topic_configs: Mapping[str, Mapping[str, str]] = {}
        self._metadata: BrokerView | None = None
        self._failed_opens: set[Key] = set()  # tried again at the next metadata
        self._strays_removed = False
        self._isr_sender = (
            IsrChangeSender(
                broker_id, isr_changer, self._settle_isr_change, self._tasks, lambda: self._closed
            )
            if isr_changer is not None
            else None
        )
        self.cleaner = CleanerTask(self, self.config.cleaner)
        self._log_configs = LogConfigs(self.config.log, self.config.message_max_bytes)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._deleter = LogDeleter(broker_id)
        self._deleter.sweep(self.log_dir)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self.config.tick_interval_ms is not None and self._ticker is None:
            self._ticker = asyncio.create_task(self._tick_loop())
            self.cleaner.start()

    async def close(self) -> None:
        self._closed = True
        if self.fetcher is not None:
            await self.fetcher.stop()
        await self.cleaner.stop()
        tasks = [*self._tasks, *([self._ticker] if self._ticker else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._opener.close()  # logs a worker thread still opens
        for p in self.partitions.values():
            p.notify()
            p.log.checkpoint_high_watermark(p.high_watermark, sync=True)
            p.log.close()
        self.partitions.clear()
        self._deleter.close()

    async def _tick_loop(self) -> None:
        assert self.config.tick_interval_ms is not None
        while not self._closed:
            await asyncio.sleep(self.config.tick_interval_ms / 1000)
            try:
                self.tick()
            except Exception:  # a bad partition must not stop the others' ISR checks
                log.exception("broker %d: replica manager tick failed", self.broker_id)

    # ------------------------------------------------------------- metadata

    def on_metadata(self, image: MetadataImage, *, open_in_background: bool = False) -> None:
        """Committed metadata was applied: become leader, follower, create or delete.
        Only the replicas the new records touched are looked at (`BrokerView`)."""
        if self._metadata is None:
            self._metadata = BrokerView(self.broker_id)
        changed = self._metadata.update(image)
        self._wanted, self._topic_configs = self._metadata.partitions, self._metadata.topic_configs
        if not self._strays_removed:  # the first image: the broker has caught up
            self._strays_removed = True
            hosted = self.partitions.keys() | self._opener.opening.keys()
            topic_identity.remove_strays(self.log_dir, self._wanted, hosted, self._deleter)
        self._apply_wanted(changed, open_in_background, open_new=True)

    def apply_metadata(self, view: MetadataView, *, open_in_background: bool = False) -> None:
        """`open_in_background`: new replicas' logs are opened in a worker thread
        and join at the latest view then (the agent); else here, before returning."""
        self._metadata = None  # the next image is looked at whole
        self._wanted = {(a.topic, a.partition): a for a in view.partitions}
        self._topic_configs = view.topic_configs
        self._apply_wanted(None, open_in_background, open_new=True)

    def _apply_wanted(
        self, keys: set[Key] | None, open_in_background: bool, *, open_new: bool
    ) -> None:
        """Bring the replicas in `keys` (None: all of them) to what `_wanted` says."""
        wanted = self._wanted
        now = self.clock()
        if keys is None:
            gone = [k for k in self.partitions if k not in wanted]
            looked_at: Iterable[Key] = list(wanted)
            self._failed_opens.clear()
        else:
            keys |= self._failed_opens
            self._failed_opens.clear()
            gone = [k for k in keys if k in self.partitions and k not in wanted]
            looked_at = [k for k in keys if k in wanted]
        for key in gone:
            self._delete(key)
        to_open: list[tuple[PartitionAssignment, LogConfig]] = []
        for key in looked_at:
            assignment = wanted[key]
            config = self._log_configs.for_topic(
                assignment.topic, self._topic_configs.get(assignment.topic, {})
            )
            part = self.partitions.get(key)
            renamed = part is not None and part.assignment.topic_id != assignment.topic_id
            if renamed:  # its topic was deleted and created again under its name
                self._delete(key)
                part = None
            if part is None:
                if open_in_background:
                    if (open_new or renamed) and key not in self._opener.opening:
                        to_open.append((assignment, config))
                    elif not open_new:
                        self._failed_opens.add(key)  # not opening now: at the next metadata
                    continue
                part = self._join(assignment, self._open_log(assignment, config, now))
            elif assignment.leader_epoch < part.leader_epoch or (
                assignment.leader_epoch == part.leader_epoch
                and assignment.partition_epoch < part.assignment.partition_epoch
            ):
                continue  # older than what this replica already follows
            part.log.config = config
            if assignment == part.assignment and part.role is self._role_for(assignment):
                # Nothing committed about it (another partition's record): an ISR
                # change in flight stays in flight, rather than being asked again
                # (and refused as stale) at the next follower fetch.
                continue
            self._apply_assignment(part, assignment, now)
        if keys is None:
            self._log_configs.keep_only(self._topic_configs)
        else:
            self._log_configs.forget({t for t, _ in gone} - self._topic_configs.keys())
        if to_open:
            self._opener.open(to_open, now)
        if self.fetcher is not None:
            self.fetcher.wake()

    def _open_log(self, assignment: PartitionAssignment, config: LogConfig, now: int) -> OpenedLog:
        """Blocking (fsyncs, a scan of an existing log): a replica's log and state."""
        directory = self.log_dir / directory_name(assignment.topic, assignment.partition)
        topic_identity.claim(directory, assignment.topic_id, self._deleter)
        plog = PartitionLog(directory, config, now)
        try:
            producers = ProducerStateTable()
            producers.rebuild(plog.batch_headers())
            # Checkpointed on ticks and on close (Kafka: every 5 s), so it may be behind.
            return OpenedLog(assignment, plog, producers, plog.load_high_watermark())
        except BaseException:
            plog.close()
            raise

    def _join(self, assignment: PartitionAssignment, opened: OpenedLog) -> Partition:
        part = Partition(assignment=assignment, log=opened.log, producers=opened.producers)
        part.high_watermark = opened.high_watermark
        part.needs_truncation = True
        self.partitions[(assignment.topic, assignment.partition)] = part
        return part

    def _join_opened(
        self, keys: list[tuple[str, int]], results: list[OpenedLog | BaseException]
    ) -> None:
        """On the loop: the opened replicas join, at the latest metadata."""
        for key, opened in zip(keys, results, strict=True):
            if isinstance(opened, BaseException):
                log.error(
                    "broker %d: cannot open the log of %s-%d: %s",
                    self.broker_id, *key, opened,
                )  # fmt: skip
                continue
            self._join(opened.assignment, opened)
        log.info(
            "broker %d: opened %d replicas' logs; %d still opening",
            self.broker_id, len(keys), len(self._opener.opening),
        )  # fmt: skip
        # Roles at the newest metadata; deletes a replica that left meanwhile.
        # A log that failed to open is tried again at the next metadata.
        self._apply_wanted(set(keys), True, open_new=False)

    def _delete(self, key: tuple[str, int]) -> None:
        part = self.partitions.pop(key)
        part.role = Role.OFFLINE
        part.notify()
        part.log.delete(self._deleter)
        log.info("broker %d: deleted replica %s-%d", self.broker_id, *key)

    def _role_for(self, assignment: PartitionAssignment) -> Role:
        if assignment.leader == self.broker_id:
            return Role.LEADER
        return Role.FOLLOWER if assignment.leader >= 0 else Role.OFFLINE

    def _apply_assignment(self, part: Partition, assignment: PartitionAssignment, now: int) -> None:
        previous = part.assignment
        part.assignment = assignment
        if assignment.leader == self.broker_id:
            state = part.leader_state
            if (
                part.role is Role.LEADER
                and state is not None
                and state.leader_epoch == assignment.leader_epoch
            ):
                part.leader_state = rules.update_metadata(
                    state, assignment.partition_epoch, assignment.replicas, assignment.isr, now
                )
                part.isr_change_in_flight = None
                self._maybe_increment_hw(part)
            else:
                part.role = Role.LEADER
                part.needs_truncation = False
                part.leader_state = rules.become_leader(
                    self.broker_id, assignment.leader_epoch, assignment.partition_epoch,
                    assignment.replicas, assignment.isr,
                    part.log.log_end_offset, part.high_watermark, now,
                )  # fmt: skip
                self._maybe_increment_hw(part)
                log.info(
                    "broker %d: leader of %s-%d in epoch %d",
                    self.broker_id, part.topic, part.partition, assignment.leader_epoch,
                )  # fmt: skip
            part.notify()
            return
        became_follower = (
            part.role is not Role.FOLLOWER
            or previous.leader != assignment.leader
            or previous.leader_epoch != assignment.leader_epoch
        )
        part.leader_state = None
        part.role = Role.FOLLOWER if assignment.leader >= 0 else Role.OFFLINE
        if became_follower:
            part.needs_truncation = True
            part.notify()  # acks=all waiters learn they lost the lead

    # --------------------------------------------------------------- lookups

    def _lookup(
        self, topic: str, partition: int, current_leader_epoch: int, *, leader_only: bool = True
    ) -> tuple[Partition | None, ErrorCode]:
        part = self.partitions.get((topic, partition))
        if part is None:
            if (topic, partition) in self._opener.opening:
                return None, ErrorCode.not_leader_or_follower  # metadata has it, not yet here
            return None, ErrorCode.unknown_topic_or_partition
        if current_leader_epoch != NO_LEADER_EPOCH:
            if current_leader_epoch < part.leader_epoch:
                return None, ErrorCode.fenced_leader_epoch
            if current_leader_epoch > part.leader_epoch:
                return None, ErrorCode.unknown_leader_epoch
        if leader_only and part.role is not Role.LEADER:
            return None, ErrorCode.not_leader_or_follower
        return part, ErrorCode.none

    def partition_state(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def high_watermark(self, topic: str, partition: int) -> int:
        return self.partitions[(topic, partition)].high_watermark

    def log_end_offset(self, topic: str, partition: int) -> int:
        return self.partitions[(topic, partition)].log.log_end_offset

    # ---------------------------------------------------------------- append

    async def append(
        self, topic: str, partition: int, records: bytes, acks: int, timeout_ms: int
    ) -> AppendResult:
        """Produce to one partition (Kafka's `appendRecords` for one partition)."""
        if acks not in (-1, 0, 1):
            return AppendResult(ErrorCode.invalid_required_acks)
        await self._opener.until_open([(topic, partition)], timeout_ms / 1000)
        part, error = self._lookup(topic, partition, NO_LEADER_EPOCH)
        if part is None:
            return AppendResult(error)
        config = part.log.config
        try:
            batches = split_batches(records)
        except InvalidRecordBatch as exc:
            code = ErrorCode.corrupt_message if exc.corrupt else ErrorCode.invalid_record
            return AppendResult(code, error_message=str(exc))
        refused = refuse_before_append(topic, partition, batches, acks, part.isr, config)
        if refused is not None:
            return refused
        # Idempotent producers: one batch per request in practice (as Kafka requires).
        for header, _ in batches:
            verdict, stored = part.producers.check(header)
            if verdict is SequenceCheck.DUPLICATE and stored is not None:
                return await await_acks(
                    part, stored.first_offset, stored.last_offset + 1, acks, timeout_ms
                )
            if verdict in SEQUENCE_ERRORS:
                return AppendResult(SEQUENCE_ERRORS[verdict], error_message=verdict.value)
        now = self.clock()
        try:
            base = part.log.append_as_leader(batches, part.leader_epoch, now)
        except OSError as exc:
            log.error(
                "broker %d: append to %s-%d failed: %s", self.broker_id, topic, partition, exc
            )
            return AppendResult(ErrorCode.kafka_storage_error, error_message=str(exc))
        offset = base
        for header, _ in batches:
            part.producers.update(header, offset)
            offset += header.offset_count
        assert part.leader_state is not None
        part.leader_state = rules.on_local_append(part.leader_state, part.log.log_end_offset)
        self._maybe_increment_hw(part)
        part.notify()
        return await await_acks(part, base, offset, acks, timeout_ms)

    # ----------------------------------------------------------------- fetch

    async def fetch(
        self,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        partitions: Sequence[FetchPartition],
        isolation_level: int = 0,
    ) -> list[FetchPartitionResult]:
        """Consumers (replica_id -1) read below the HW; followers read to the LEO
        and move the HW and ISR. Long-polls until `min_bytes` or `max_wait_ms`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000  # a real wait, whatever the clock
        await self._opener.until_open(
            [(p.topic, p.partition) for p in partitions], max_wait_ms / 1000
        )
        # Only the requested partitions can change this answer: waiting on every
        # hosted one cost a task per partition per parked fetch at each wake-up
        # (100 consumers on a 100-partition topic: seconds of a broker's CPU).
        return await long_poll(
            lambda: [
                part.changed
                for request in partitions
                if (part := self.partitions.get((request.topic, request.partition))) is not None
            ],
            lambda: [self._fetch_one(replica_id, request) for request in partitions],
            replica_id != CONSUMER_REPLICA_ID,
            deadline,
            min_bytes,
            max_bytes,
            lambda: self._closed,
        )

    def _fetch_one(self, replica_id: int, request: FetchPartition) -> FetchPartitionResult:
        part, error = self._lookup(request.topic, request.partition, request.current_leader_epoch)
        if part is None:
            return FetchPartitionResult(request.topic, request.partition, error)
        return read_partition(part, replica_id, request, self._on_follower_fetch)

    def _on_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int) -> None:
        state = part.leader_state
        assert state is not None
        before = state.follower_leo(replica_id)
        state = rules.update_follower_fetch_state(state, replica_id, fetch_offset, self.clock())
        part.leader_state = state
        if fetch_offset != before:
            self._maybe_increment_hw(part)
        state, change = rules.maybe_expand_isr(part.leader_state, replica_id)
        part.leader_state = state
        if change is not None:
            self.isr_expands += 1
            self._request_isr_change(part, change)

    def _maybe_increment_hw(self, part: Partition) -> None:
        assert part.leader_state is not None
        state, new_hw = rules.maybe_increment_leader_hw(part.leader_state)
        part.leader_state = state
        if new_hw is not None:
            part.high_watermark = new_hw
            part.notify()

    # ------------------------------------------------------------------- ISR

    def _request_isr_change(self, part: Partition, change: rules.IsrChange) -> None:
        if self._isr_sender is None or part.isr_change_in_flight is not None:
            assert part.leader_state is not None
            if self._isr_sender is None:
                part.leader_state = rules.isr_change_failed(part.leader_state)
            return
        self._isr_sender.send(part, IsrChangeRequest(
            part.topic, part.assignment.topic_id, part.partition,
            change.leader_epoch, change.partition_epoch, change.new_isr,
        ))  # fmt: skip

    def _settle_isr_change(self, part: Partition, result: IsrChangeResult) -> None:
        """Kafka's leader takes the ISR and partition epoch from the answer (as
        its AlterPartitionManager does): an accepted change that changed nothing
        commits no record, and would otherwise stay pending for ever. Refused
        (stale partition epoch) or unreachable: forget it; the next tick or
        fetch asks again with the partition epoch then current."""
        state = part.leader_state
        if state is None or part.role is not Role.LEADER:
            return
        if (
            not result.accepted
            or result.leader_epoch != state.leader_epoch
            or result.partition_epoch < state.partition_epoch
        ):
            part.leader_state = rules.isr_change_failed(state)
            return
        part.leader_state = rules.update_metadata(
            state, result.partition_epoch, state.replicas, result.isr, self.clock()
        )
        part.assignment = replace(
            part.assignment, isr=result.isr, partition_epoch=result.partition_epoch
        )
        self._maybe_increment_hw(part)
        part.notify()

    def tick(self) -> None:
        """ISR shrink by `replica.lag.time.max.ms`, retention, timed flushes."""
        now = self.clock()
        # Without a fetch client no follower fetches, so lag means nothing: the
        # ISR is left to the agent's liveness rule rather than emptied.
        shrink = self.fetcher is not None
        for part in list(self.partitions.values()):
            if shrink and part.role is Role.LEADER and part.leader_state is not None:
                state, change = rules.maybe_shrink_isr(
                    part.leader_state, now, self.config.replica_lag_time_max_ms
                )
                part.leader_state = state
                if change is not None:
                    self.isr_shrinks += 1
                    log.info(
                        "broker %d: shrinking ISR of %s-%d from %s to %s",
                        self.broker_id, part.topic, part.partition,
                        list(part.isr), list(change.new_isr),
                    )  # fmt: skip
                    self._request_isr_change(part, change)
            if part.role is Role.LEADER:
                part.log.apply_retention(now, part.high_watermark)  # policy delete only
            part.log.maybe_flush(now)
            part.log.checkpoint_high_watermark(part.high_watermark)

    # ------------------------------------------------------ offsets lookups

    def list_offsets(
        self, topic: str, partition: int, timestamp: int, current_leader_epoch: int
    ) -> ListOffsetsResult:
        """-2 earliest, -1 latest (the HW: what consumers can read), -3 the record
        with the largest timestamp, else the first record at or after `timestamp`;
        only offsets below the HW are told (`offset_lookups.py`)."""
        part, error = self._lookup(topic, partition, current_leader_epoch)
        if part is None:
            return ListOffsetsResult(error, -1, -1, -1)
        return offset_at(part, timestamp, part.high_watermark)

    def replica_offsets(
        self, topic: str, partition: int, timestamp: int, current_leader_epoch: int
    ) -> ListOffsetsResult:
        """ListOffsets from Kafka's DEBUGGING_REPLICA_ID (-2), for tools: this broker's
        own replica answers, leader or follower, from its log: -2 its log start, -1 its
        LEO (not the HW), else as `list_offsets` below the LEO."""
        part, error = self._lookup(topic, partition, current_leader_epoch, leader_only=False)
        if part is None:
            return ListOffsetsResult(error, -1, -1, -1)
        return offset_at(part, timestamp, part.log.log_end_offset)

    def offsets_for_leader_epoch(
        self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEndOffsetResult:
        """Where `leader_epoch` (or the largest epoch below it) ends on this leader's log."""
        part, error = self._lookup(topic, partition, current_leader_epoch)
        if part is None:
            return EpochEndOffsetResult(error, -1, -1)
        return epoch_end_offset(part, leader_epoch)
