"""The group coordinator of one broker: the driver of the pure `GroupMachine`.

It owns the groups of the `__consumer_offsets` partitions this broker leads.
Every 20 ms it compares the replica manager's roles with what it owns: a
partition it now leads is *loaded* (its log replayed into groups; requests for
its groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile), one it no longer leads
is *unloaded* (parked requests answered NOT_COORDINATOR). Every 100 ms it ticks
the machine (sessions, join deadlines) and executes the effects: parked JoinGroup
and SyncGroup futures are resolved, records are appended with acks=all through
the replica manager, in the order the machine produced them (each partition's
writes are queued in that order and coalesced into batches).

The offsets topic is created through the controller on first need (a
FindCoordinator that finds no `__consumer_offsets`), through the `TopicCreator`
seam the broker implements over its admin client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import google_crc32c
from kio.records.readers import read_batch
from kio.schema.errors import ErrorCode

from broker_agent.groups.effects import PARKED, Completed, Effect, JoinAnswer, SyncAnswer, Write
from broker_agent.groups.group import Group, GroupConfig, OffsetEntry
from broker_agent.groups.machine import GroupMachine
from broker_agent.groups.placement import OFFSETS_TOPIC, partition_for
from broker_agent.partitions.partition import Role
from broker_agent.partitions.record_batch import split_batches
from broker_agent.partitions.record_codec import write_varint
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.controller.metadata_image import MetadataImage

log = logging.getLogger("broker_agent.groups")

TopicCreator = Callable[[str, int, int, dict[str, str]], Awaitable[None]]
Records = tuple[tuple[bytes, bytes | None], ...]
# Leadership is looked at often (a dict lookup per offsets partition): after a
# failover the new coordinator starts loading within 20 ms of the metadata naming it.
LEADERSHIP_POLL_S = 0.02
TICK_S = 0.1  # sessions, join and sync deadlines, offsets retention
LOAD_CHUNK_BYTES = 1 << 20
MAX_COALESCED_BYTES = 512 * 1024  # one batch of coalesced writes, at most (about)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class OffsetsTopicConfig:
    """Kafka's `offsets.*` broker settings."""

    num_partitions: int = 50  # offsets.topic.num.partitions
    replication_factor: int = 3  # offsets.topic.replication.factor
    segment_bytes: int = 100 * 1024 * 1024  # offsets.topic.segment.bytes
    commit_timeout_ms: int = 5_000  # offsets.commit.timeout.ms


class Phase(Enum):
    LOADING = "loading"
    ACTIVE = "active"


# What an append error means to a group client (Kafka's GroupMetadataManager mapping).
_APPEND_ERRORS = {
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.fenced_leader_epoch: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}


def group_error(append_error: ErrorCode) -> ErrorCode:
    if append_error is ErrorCode.none:
        return ErrorCode.none
    return _APPEND_ERRORS.get(append_error, ErrorCode.coordinator_not_available)


class GroupCoordinator:
    def __init__(
        self,
        node_id: int,
        replicas: ReplicaManager,
        image: Callable[[], MetadataImage],
        create_topic: TopicCreator | None,
        topic_config: OffsetsTopicConfig | None = None,
        group_config: GroupConfig | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.image = image
        self.create_topic = create_topic
        self.topic_config = topic_config or OffsetsTopicConfig()
        self.machine = GroupMachine(group_config)
        self.clock = clock
        self.owned: dict[int, tuple[Phase, int]] = {}  # partition -> (phase, leader epoch)
        self._waiters: dict[tuple[str, str, str], list[asyncio.Future[object]]] = {}
        self._tasks: set[asyncio.Task[object]] = set()
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._queued: dict[int, list[tuple[Records, asyncio.Future[ErrorCode]]]] = {}
        self._writers: dict[int, asyncio.Task[None]] = {}
        self._creating: asyncio.Task[None] | None = None
        self._loop_task: asyncio.Task[None] | None = None
        # For metrics and tests.
        self.offset_commits = 0
        self.load_times_ms: dict[int, int] = {}
        self.on_load: Callable[[int], None] | None = None  # a load's duration, ms

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        tasks: list[asyncio.Task[Any]] = [
            t for t in (self._loop_task, self._creating) if t is not None
        ]
        tasks += [*self._loads.values(), *self._tasks, *self._writers.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for futures in self._waiters.values():
            for fut in futures:
                if not fut.done():
                    fut.cancel()
        self._waiters.clear()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_tick = 0.0
        while True:
            try:
                self.poll_leadership()
                if loop.time() >= next_tick:
                    next_tick = loop.time() + TICK_S
                    self._execute(self.machine.tick(self.clock()))
            except Exception:  # one bad step must not stop the coordinator
                log.exception("broker %d: group coordinator step failed", self.node_id)
            await asyncio.sleep(LEADERSHIP_POLL_S)

    # ----------------------------------------------------------- ownership

    def num_partitions(self) -> int | None:
        topic = self.image().topic(OFFSETS_TOPIC)
        return len(topic.partitions) if topic is not None and topic.partitions else None

    def partition_of(self, group_id: str) -> int | None:
        count = self.num_partitions()
        return partition_for(group_id, count) if count else None

    def poll_leadership(self) -> None:
        """Load the offsets partitions this broker now leads, unload the others."""
        count = self.num_partitions() or 0
        leading: dict[int, int] = {}
        for p in range(count):
            part = self.replicas.partition_state(OFFSETS_TOPIC, p)
            if part is not None and part.role is Role.LEADER:
                leading[p] = part.leader_epoch
        for p, (_, epoch) in list(self.owned.items()):
            if leading.get(p) != epoch:
                self._unload(p)
        for p, epoch in leading.items():
            if p not in self.owned:
                self.owned[p] = (Phase.LOADING, epoch)
                self._loads[p] = asyncio.create_task(self._load(p, epoch))

    def _groups_in(self, partition: int) -> list[str]:
        count = self.num_partitions() or 0
        return [g for g in self.machine.groups if count and partition_for(g, count) == partition]

    def _unload(self, partition: int) -> None:
        self.owned.pop(partition, None)
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        groups = self._groups_in(partition)
        self._execute(self.machine.unload(groups, self.clock()))
        log.info(
            "broker %d: unloaded %d groups of %s-%d",
            self.node_id,
            len(groups),
            OFFSETS_TOPIC,
            partition,
        )

    async def _load(self, partition: int, epoch: int) -> None:
        started = time.monotonic()
        part = self.replicas.partition_state(OFFSETS_TOPIC, partition)
        if part is None:
            return
        entries: list[tuple[bytes, bytes | None]] = []
        offset = part.log.log_start_offset
        end = part.log.log_end_offset
        while offset < end:
            data = part.log.read(offset, LOAD_CHUNK_BYTES, end)
            if not data:
                break
            offset = _parse_batches(data, entries, offset)
            await asyncio.sleep(0)  # other partitions and requests go on
        if self.owned.get(partition) != (Phase.LOADING, epoch):
            return
        skipped = self.machine.load(entries, self.clock())
        self.owned[partition] = (Phase.ACTIVE, epoch)
        self._loads.pop(partition, None)
        took = int((time.monotonic() - started) * 1000)
        self.load_times_ms[partition] = took
        if self.on_load is not None:
            self.on_load(took)
        log.info(
            "broker %d: loaded %s-%d (%d records, %d skipped, %d groups) in %d ms",
            self.node_id,
            OFFSETS_TOPIC,
            partition,
            len(entries),
            skipped,
            len(self._groups_in(partition)),
            took,
        )

    def check(self, group_id: str) -> ErrorCode:
        """The coordinator-level error for a request about `group_id`, if any."""
        if not group_id:
            return ErrorCode.invalid_group_id
        partition = self.partition_of(group_id)
        if partition is None or partition not in self.owned:
            return ErrorCode.not_coordinator
        if self.owned[partition][0] is Phase.LOADING:
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.none

    # ------------------------------------------------------ FindCoordinator

    def find(self, key: str) -> tuple[ErrorCode, int]:
        """The coordinator of group `key` (any broker answers): the leader of its
        offsets partition, or COORDINATOR_NOT_AVAILABLE while there is none, the
        topic is being created, or this broker is still loading it."""
        if not key:
            return ErrorCode.invalid_request, -1
        image = self.image()
        topic = image.topic(OFFSETS_TOPIC)
        if topic is None or not topic.partitions:
            self._ensure_topic()
            return ErrorCode.coordinator_not_available, -1
        state = topic.partitions.get(partition_for(key, len(topic.partitions)))
        if state is None or state.leader < 0:
            return ErrorCode.coordinator_not_available, -1
        broker = image.brokers.get(state.leader)
        if broker is None or broker.fenced:
            return ErrorCode.coordinator_not_available, -1
        if state.leader == self.node_id and self.check(key) is not ErrorCode.none:
            return ErrorCode.coordinator_not_available, -1
        return ErrorCode.none, state.leader

    def _ensure_topic(self) -> None:
        if self.create_topic is None or (self._creating and not self._creating.done()):
            return
        self._creating = asyncio.create_task(self._create_topic())

    async def _create_topic(self) -> None:
        config = self.topic_config
        live = len(self.image().unfenced_broker_ids())
        rf = config.replication_factor
        if live and rf > live:
            log.warning(
                "creating %s with replication factor %d: offsets.topic.replication.factor "
                "is %d but only %d brokers are live",
                OFFSETS_TOPIC,
                live,
                rf,
                live,
            )
            rf = live
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(config.segment_bytes),
        }
        assert self.create_topic is not None
        try:
            await self.create_topic(OFFSETS_TOPIC, config.num_partitions, rf, configs)
            log.info("created %s (%d partitions, RF %d)", OFFSETS_TOPIC, config.num_partitions, rf)
        except Exception as err:  # the next FindCoordinator tries again
            log.warning("could not create %s: %s", OFFSETS_TOPIC, err)

    # ----------------------------------------------------------- effects

    def _execute(self, effects: list[Effect] | tuple[Effect, ...]) -> None:
        for effect in effects:
            if isinstance(effect, Completed):
                self._resolve(effect)
            else:
                task = asyncio.ensure_future(self._write(effect))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _resolve(self, done: Completed) -> None:
        for fut in self._waiters.pop((done.group_id, done.member_id, done.kind), []):
            if not fut.done():
                fut.set_result(done.answer)

    def _park(self, group_id: str, member_id: str, kind: str) -> asyncio.Future[object]:
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault((group_id, member_id, kind), []).append(fut)
        return fut

    async def _write(self, write: Write) -> None:
        error = await self.append(write.group_id, write.records)
        if error is ErrorCode.invalid_commit_offset_size:
            # A group record over max.message.bytes: Kafka answers UNKNOWN_SERVER_ERROR.
            error = ErrorCode.unknown_server_error
        for done in write.then:
            if error is ErrorCode.none:
                self._resolve(done)
            elif done.kind == "sync":
                self._resolve(
                    Completed(done.group_id, done.member_id, done.kind, SyncAnswer(error))
                )
        if error is not ErrorCode.none and write.generation is not None:
            self._execute(self.machine.store_failed(write.group_id, write.generation, self.clock()))

    async def append(self, group_id: str, records: Records) -> ErrorCode:
        """Append records to the group's offsets partition with acks=all.

        Writes to one partition are queued and coalesced: while one batch waits
        for its acks, the records of every write that arrives meanwhile go out
        together as the next batch (one append and one replication round trip for
        many commits), in the order they were queued."""
        partition = self.partition_of(group_id)
        if partition is None:
            return ErrorCode.not_coordinator
        if not records:
            return ErrorCode.none
        done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._queued.setdefault(partition, []).append((records, done))
        if partition not in self._writers:
            self._writers[partition] = asyncio.create_task(self._drain(partition))
        return await done

    async def _drain(self, partition: int) -> None:
        queue = self._queued[partition]
        try:
            while queue:
                taken, size = 0, 0
                while taken < len(queue) and (not taken or size < MAX_COALESCED_BYTES):
                    size += sum(len(k) + len(v or b"") for k, v in queue[taken][0])
                    taken += 1
                writes, queue[:taken] = queue[:taken], []
                records = tuple(r for recs, _ in writes for r in recs)
                error = await self._append_now(partition, records)
                for _, done in writes:
                    if not done.done():
                        done.set_result(error)
        finally:
            del self._writers[partition]
            for _, done in queue:  # cancelled: the rest fail, the clients retry
                if not done.done():
                    done.set_result(ErrorCode.coordinator_not_available)
            queue.clear()

    async def _append_now(self, partition: int, records: Records) -> ErrorCode:
        result = await self.replicas.append(
            OFFSETS_TOPIC,
            partition,
            encode_batch(records, self.clock()),
            -1,
            self.topic_config.commit_timeout_ms,
        )
        if result.error is not ErrorCode.none:
            log.info(
                "broker %d: %s-%d append failed: %s",
                self.node_id,
                OFFSETS_TOPIC,
                partition,
                result.error.name,
            )
        return group_error(result.error)

    # ------------------------------------------------------------ requests

    async def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> JoinAnswer:
        error = self.check(group_id)
        if error is not ErrorCode.none:
            return JoinAnswer(error, member_id)
        out = self.machine.join(
            group_id,
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            require_known_member_id,
            self.clock(),
        )
        if out.answer is PARKED:
            fut = self._park(group_id, out.parked_member, "join")
            self._execute(out.effects)
            answer = await fut
        else:
            self._execute(out.effects)
            answer = out.answer
        assert isinstance(answer, JoinAnswer)
        return answer

    async def sync(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol: str | None,
        assignments: dict[str, bytes],
    ) -> SyncAnswer:
        error = self.check(group_id)
        if error is not ErrorCode.none:
            return SyncAnswer(error)
        out = self.machine.sync(
            group_id,
            member_id,
            group_instance_id,
            generation,
            protocol_type,
            protocol,
            assignments,
            self.clock(),
        )
        if out.answer is PARKED:
            fut = self._park(group_id, out.parked_member, "sync")
            self._execute(out.effects)
            answer = await fut
        else:
            self._execute(out.effects)
            answer = out.answer
        assert isinstance(answer, SyncAnswer)
        return answer

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation: int
    ) -> ErrorCode:
        error = self.check(group_id)
        if error is not ErrorCode.none:
            return error
        return self.machine.heartbeat(
            group_id, member_id, group_instance_id, generation, self.clock()
        )

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        error = self.check(group_id)
        if error is not ErrorCode.none:
            return error, [error] * len(members)
        top, errors, effects = self.machine.leave(group_id, members, self.clock())
        self._execute(effects)
        return top, errors

    async def commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation: int,
        offsets: list[tuple[str, int, int, int, str | None]],
    ) -> dict[tuple[str, int], ErrorCode]:
        error = self.check(group_id)
        if error is not ErrorCode.none:
            return {(t, p): error for t, p, *_ in offsets}
        plan = self.machine.commit(
            group_id, member_id, group_instance_id, generation, offsets, self.clock()
        )
        errors = dict(plan.partition_errors)
        if plan.records:
            written = await self.append(group_id, plan.records)
            if written is ErrorCode.none:
                self.machine.apply(group_id, plan.accepted)
                self.offset_commits += len(plan.accepted)
            else:
                errors.update({tp: written for tp in plan.accepted})
        return errors

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[ErrorCode, dict[tuple[str, int], OffsetEntry | None]]:
        error = self.check(group_id)
        if error is not ErrorCode.none:
            return error, {}
        return ErrorCode.none, self.machine.fetch_offsets(group_id, partitions)

    def group(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        error = self.check(group_id)
        if error is not ErrorCode.none:
            return error, None
        return ErrorCode.none, self.machine.groups.get(group_id)

    def loading(self) -> bool:
        return any(phase is Phase.LOADING for phase, _ in self.owned.values())

    def delete_group(self, group_id: str) -> ErrorCode:
        error = self.check(group_id)
        if error is not ErrorCode.none:
            return error
        error, effects = self.machine.delete_group(group_id, self.clock())
        self._execute(effects)
        return error

    def delete_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, int]],
        subscribed: Callable[[Group], set[str]],
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        error = self.check(group_id)
        if error is not ErrorCode.none:
            return error, {}
        error, errors, effects = self.machine.delete_offsets(group_id, partitions, subscribed)
        self._execute(effects)
        return error, errors


# ------------------------------------------------------------------ batches


_TAIL = struct.Struct(">hiqqqhii")  # attributes .. records count
_PREFIX = struct.Struct(">qiibI")  # base offset, length, leader epoch (stamped), magic, CRC
_NO_TIMESTAMP_DELTA_ATTRIBUTES = b"\x00\x00"  # record attributes, timestamp delta 0


def encode_batch(records: tuple[tuple[bytes, bytes | None], ...], now_ms: int) -> bytes:
    """One uncompressed magic-2 batch of the coordinator's records (no producer id),
    every record stamped `now_ms`. Written directly rather than through kio's
    record writer: this runs once per coalesced write on the commit path."""
    bodies = []
    for delta, (key, value) in enumerate(records):
        body = b"".join(
            (
                _NO_TIMESTAMP_DELTA_ATTRIBUTES,
                write_varint(delta),
                write_varint(len(key)),
                key,
                write_varint(-1) if value is None else write_varint(len(value)) + value,
                b"\x00",  # no headers
            )
        )
        bodies.append(write_varint(len(body)) + body)
    data = b"".join(bodies)
    tail = _TAIL.pack(0, len(records) - 1, now_ms, now_ms, -1, -1, -1, len(records))
    crc = google_crc32c.extend(google_crc32c.value(tail), data)
    return _PREFIX.pack(0, len(tail) + len(data) + 9, 0, 2, crc) + tail + data


def _parse_batches(data: bytes, into: list[tuple[bytes, bytes | None]], offset: int) -> int:
    """Append the (key, value) of every record in `data`; the next offset to read."""
    for header, batch in split_batches(data):
        offset = header.base_offset + header.offset_count
        if header.is_control:
            continue  # control batches carry no group data
        try:
            parsed, _ = read_batch(batch, 0)
        except Exception as err:  # compressed or damaged: the coordinator never writes those
            log.warning(
                "skipping an unreadable %s batch at %d: %s", OFFSETS_TOPIC, header.base_offset, err
            )
            continue
        into.extend((r.key, r.value) for r in parsed.records if r.key is not None)
    return offset
