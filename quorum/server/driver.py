"""Runs the sans-I/O core on one asyncio event loop and carries out its effects.

Order matters and is the core's: the quorum state and truncations are made
durable before the next effect runs (so no vote or new-epoch message leaves
before its epoch is on disk); appends are written at once; flushes run in a
worker thread, one at a time, each covering everything appended before it
started (group commit); proposals made in one loop iteration share a batch.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from quorum.log.api import LogStore, QuorumStateStore
from quorum.raft.config import ProposeResult, QuorumStateData, RaftConfig
from quorum.raft.effects import (
    AdvanceLogStart,
    AppendBatches,
    Effect,
    FetchSnapshot,
    FlushLog,
    HighWatermarkChanged,
    PersistQuorumState,
    ResetLog,
    Role,
    RoleChanged,
    SendMessage,
    TruncateLog,
)
from quorum.raft.log import RaftLog
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.node import NotLeaderError, RaftNode

log = logging.getLogger(__name__)

RESPONSE_TYPES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse)


class Transport(Protocol):
    """Sends the core's requests to peers; answers come back via `RaftDriver.receive`."""

    def send_request(self, destination: int, message: Message) -> None: ...


class ProposalFailed(Exception):
    """The records were not committed: leadership moved and the log was rewritten."""


@dataclass
class _Waiter:
    epoch: int
    last_offset: int
    future: asyncio.Future[ProposeResult]
    result: ProposeResult


@dataclass
class DriverStats:
    """What the metrics endpoint reads."""

    elections: int = 0
    flushes: int = 0
    commit_latencies_ms: list[float] = field(default_factory=list)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class RaftDriver:
    def __init__(
        self,
        config: RaftConfig,
        log_store: LogStore,
        state_store: QuorumStateStore,
        transport: Transport,
        clock: Callable[[], int] = monotonic_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.log_store = log_store
        self.state_store = state_store
        self.transport = transport
        self.clock = clock
        snapshot_id, batches = log_store.recover()
        raft_log = RaftLog(snapshot_id)
        for batch in batches:
            raft_log.append(batch)
        self.core = RaftNode(config, rng or random.Random(), clock(), state_store.read(), raft_log)
        self.stats = DriverStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._process_scheduled = False
        self._flush_running = False
        self._flush_wanted: FlushLog | None = None
        self._waiters: list[_Waiter] = []
        self._replies: dict[tuple[int, type], asyncio.Future[Message]] = {}
        self.on_commit: list[Callable[[int], None]] = []
        self.on_role_change: list[Callable[[RoleChanged], None]] = []
        self._closed = False

    # ----------------------------------------------------------------- control

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._process()

    async def stop(self, resign: bool = True) -> None:
        """Graceful stop: a leader hands over with EndQuorumEpoch first."""
        if resign and self.core.role is Role.LEADER:
            self.core.resign(self.clock())
            self._process()
            await asyncio.sleep(0.05)  # let EndQuorumEpoch leave
        self._closed = True
        if self._timer:
            self._timer.cancel()
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(ProposalFailed("controller stopping"))
        for future in self._replies.values():
            future.cancel()

    # ------------------------------------------------------------------ events

    def receive(self, source: int, message: Message) -> None:
        """A request or response from a peer, on the loop thread."""
        if self._closed:
            return
        self.core.on_message(source, message, self.clock())
        self._schedule_process()

    async def handle_request(self, source: int, message: Message, timeout_s: float) -> Message:
        """Feed an incoming request to the core and wait for its answer to `source`."""
        loop = asyncio.get_running_loop()
        key = (source, _response_type_for(message))
        previous = self._replies.pop(key, None)
        if previous is not None and not previous.done():
            previous.cancel()
        future: asyncio.Future[Message] = loop.create_future()
        self._replies[key] = future
        self.receive(source, message)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_s)
        finally:
            if self._replies.get(key) is future:
                del self._replies[key]

    def peer_unreachable(self, peer: int) -> None:
        if self._closed:
            return
        if self.core.leader_id == peer:
            self.core.on_leader_unreachable(self.clock())
            self._schedule_process()

    async def propose(self, records: list[bytes]) -> ProposeResult:
        """Append records; returns once they are committed. Raises NotLeaderError."""
        if self._loop is None:
            raise RuntimeError("driver not started")
        result = self.core.propose(records, self.clock())
        future: asyncio.Future[ProposeResult] = self._loop.create_future()
        self._waiters.append(_Waiter(result.epoch, result.last_offset, future, result))
        self._schedule_process()
        return await future

    # -------------------------------------------------------------- processing

    def _schedule_process(self) -> None:
        if not self._process_scheduled and self._loop is not None:
            self._process_scheduled = True
            self._loop.call_soon(self._process)

    def _process(self) -> None:
        self._process_scheduled = False
        if self._closed or self._loop is None:
            return
        for effect in self.core.poll(self.clock()):
            self._execute(effect)
        self._arm_timer()

    def _arm_timer(self) -> None:
        assert self._loop is not None
        if self._timer:
            self._timer.cancel()
        delay_ms = max(0, self.core.next_deadline() - self.clock())
        self._timer = self._loop.call_later(delay_ms / 1000, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed:
            return
        self.core.on_tick(self.clock())
        self._process()

    def _execute(self, effect: Effect) -> None:
        match effect:
            case PersistQuorumState():
                self.state_store.write(
                    QuorumStateData(effect.epoch, effect.voted_for, effect.leader_id)
                )
            case AppendBatches():
                self.log_store.append(effect.batches)
            case TruncateLog():
                self.log_store.truncate(effect.end_offset)
                self._fail_waiters_from(effect.end_offset)
            case AdvanceLogStart():
                self.log_store.advance_start(effect.snapshot_id)
            case ResetLog():
                self.log_store.reset_to_snapshot(effect.snapshot_id)
                self._fail_waiters_from(0)
            case FlushLog():
                self._request_flush(effect)
            case SendMessage():
                self._send(effect.destination, effect.message)
            case HighWatermarkChanged():
                self._complete_waiters(effect.high_watermark)
                for callback in self.on_commit:
                    callback(effect.high_watermark)
            case RoleChanged():
                if effect.role is Role.LEADER:
                    self.stats.elections += 1
                log.info(
                    "node %d is %s in epoch %d",
                    self.config.node_id,
                    effect.role.value,
                    effect.epoch,
                )
                for role_callback in self.on_role_change:
                    role_callback(effect)
            case FetchSnapshot():
                # Snapshot transfer arrives with the snapshot store; until then,
                # report failure so the follower retries its fetch.
                self.core.on_snapshot_failed(self.clock())
                self._schedule_process()

    def _send(self, destination: int, message: Message) -> None:
        if isinstance(message, RESPONSE_TYPES):
            future = self._replies.pop((destination, type(message)), None)
            if future is not None and not future.done():
                future.set_result(message)
        else:
            self.transport.send_request(destination, message)

    # ------------------------------------------------------------------ flushes

    def _request_flush(self, flush: FlushLog) -> None:
        self._flush_wanted = flush
        if not self._flush_running:
            self._start_flush()

    def _start_flush(self) -> None:
        assert self._loop is not None
        flush, self._flush_wanted = self._flush_wanted, None
        if flush is None:
            return
        self._flush_running = True
        task = self._loop.run_in_executor(None, self.log_store.flush, flush.end_offset)
        task.add_done_callback(lambda done: self._flush_done(flush, done))

    def _flush_done(self, flush: FlushLog, done: asyncio.Future[None]) -> None:
        self._flush_running = False
        if self._closed:
            return
        error = done.exception()
        if error is not None:
            # A failed fsync leaves the log in an unknown state: stop serving.
            log.critical("flush failed, stopping: %s", error)
            self._closed = True
            return
        self.stats.flushes += 1
        self.core.on_flushed(flush.end_offset, flush.generation, self.clock())
        self._process()
        if self._flush_wanted is not None:
            self._start_flush()

    # ------------------------------------------------------------------ waiters

    def _complete_waiters(self, high_watermark: int) -> None:
        still: list[_Waiter] = []
        for waiter in self._waiters:
            if waiter.last_offset >= high_watermark:
                still.append(waiter)
            elif waiter.future.done():
                continue
            elif self.core.log.epoch_at(waiter.last_offset) == waiter.epoch:
                waiter.future.set_result(waiter.result)
            else:
                waiter.future.set_exception(ProposalFailed("replaced by another leader's entries"))
        self._waiters = still

    def _fail_waiters_from(self, offset: int) -> None:
        still = []
        for waiter in self._waiters:
            if waiter.result.first_offset >= offset or waiter.last_offset >= offset:
                if not waiter.future.done():
                    waiter.future.set_exception(ProposalFailed("truncated"))
            else:
                still.append(waiter)
        self._waiters = still


_RESPONSE_FOR: dict[type, type] = {
    VoteRequest: VoteResponse,
    BeginQuorumEpochRequest: BeginQuorumEpochResponse,
    EndQuorumEpochRequest: EndQuorumEpochResponse,
    FetchRequest: FetchResponse,
}


def _response_type_for(message: Message) -> type:
    return _RESPONSE_FOR[type(message)]


__all__ = ["NotLeaderError", "ProposalFailed", "RaftDriver", "Transport"]
