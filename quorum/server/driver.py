"""Runs the sans-I/O core on one asyncio event loop and carries out its effects.

Order matters and is the core's: the quorum state and truncations are made
durable before the next effect runs (so no vote or new-epoch message leaves
before its epoch is on disk); appends are written at once; flushes run one at
a time, each covering everything appended before it started (group commit),
after the round's messages have left, in a worker thread (a single voter's and
a follower's small ones on the loop thread: `flush_scheduler`); proposals made
in one loop iteration share a batch. Committed batches are delivered to the registered
listeners (the controller, which applies them to its image) as the high
watermark moves; snapshots are written (when a listener asks) and fetched off
the loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from quorum.common.clocks import monotonic_ms
from quorum.log.api import LogStore, QuorumStateStore
from quorum.raft.client_api import (
    LeaderAndEpoch,
    NotLeaderError,
    ProposalFailed,
    ProposalOutcomeUnknown,
    RaftListener,
)
from quorum.raft.config import ProposeResult, QuorumStateData, RaftConfig
from quorum.raft.effects import (
    AdvanceLogStart,
    AppendBatches,
    Effect,
    FetchSnapshot,
    FlushLog,
    HighWatermarkChanged,
    PersistQuorumState,
    RequestRefused,
    ResetLog,
    Role,
    RoleChanged,
    SendMessage,
    TruncateLog,
)
from quorum.raft.log import RaftLog
from quorum.raft.messages import (
    RESPONSE_TYPES,
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
from quorum.raft.node import RaftNode
from quorum.raft.progress import ReplicaProgress
from quorum.raft.records import Batch, SnapshotId
from quorum.server.commit_delivery import ListenerContext, deliver_committed
from quorum.server.commit_waiters import CommitWaiters
from quorum.server.driver_snapshots import DriverSnapshots
from quorum.server.driver_stats import DriverStats, LatencyObserver, NoLatencies
from quorum.server.effect_order import commit_last, superseded_state_writes
from quorum.server.flush_scheduler import FlushScheduler
from quorum.server.held_fetches import HeldFetches, released_fetch_answer
from quorum.server.local_snapshots import LocalSnapshots
from quorum.server.poll_idle import PollIdleRatio
from quorum.server.refusals import EPOCH_JUMP, RefusedRequests
from snapshots.api import SnapshotChunk, SnapshotStore

log = logging.getLogger(__name__)


class Transport(Protocol):
    """Sends the core's requests to peers; answers come back via `RaftDriver.receive`
    of the driver that `bind` names (the driver binds itself when it is built)."""

    def bind(self, driver: RaftDriver) -> None: ...

    def send_request(self, destination: int, message: Message) -> None: ...

    async def fetch_snapshot_chunk(
        self, leader: int, epoch: int, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> SnapshotChunk: ...


class AppliedState(Protocol):
    """What DescribeQuorum shows of the state the listener applies to."""

    @property
    def applied_offset(self) -> int: ...

    def digest(self) -> str: ...


class RaftDriver(DriverSnapshots):
    def __init__(
        self,
        config: RaftConfig,
        log_store: LogStore,
        state_store: QuorumStateStore,
        transport: Transport,
        snapshot_store: SnapshotStore | None = None,
        clock: Callable[[], int] = monotonic_ms,
        rng: random.Random | None = None,
        snapshot_retain_count: int = 2,
        applied_state: AppliedState | None = None,
    ) -> None:
        self.config = config
        self.log_store = log_store
        self.state_store = state_store
        self.transport = transport
        self.applied_state = applied_state
        self.clock = clock
        snapshot_id, batches = log_store.recover()
        raft_log = RaftLog(snapshot_id)
        for batch in batches:
            raft_log.append(batch)
        self.snapshots = (
            LocalSnapshots(snapshot_store, snapshot_retain_count, raft_log)
            if snapshot_store is not None
            else None
        )
        snapshot_voters = (
            self.snapshots.voters(snapshot_id)
            if self.snapshots is not None and snapshot_id is not None
            else None
        )
        self.core = RaftNode(
            config,
            rng or random.Random(),
            clock(),
            state_store.read(),
            raft_log,
            snapshot_voters=snapshot_voters,
        )
        if self.snapshots is not None and self.snapshots.load:
            self.core.note_latest_snapshot(self.snapshots.load)  # a follower's, if behind
        self.stats = DriverStats()
        self.refusals = RefusedRequests()
        self.latencies: LatencyObserver = NoLatencies()
        # Kafka's poll-idle-ratio-avg: every callback below that does the
        # driver's work runs inside `with self.poll_idle`.
        self.poll_idle = PollIdleRatio()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline = 0
        self._process_scheduled = False
        self.flushes = FlushScheduler(
            log_store,
            lambda: self.poll_idle,
            lambda: self._closed,
            self._flushed,
            self._sync_off_loop,
            self._flush_at_once,
        )
        self._waiters = CommitWaiters()
        self._replies: dict[tuple[int, type], asyncio.Future[Message]] = {}
        self._background: set[asyncio.Future[None]] = set()
        self._election_started: float | None = None
        self._held_fetches = HeldFetches()
        self._listeners: list[ListenerContext] = []
        self.on_role_change: list[Callable[[RoleChanged], None]] = []
        self.on_fatal: list[Callable[[str], None]] = []
        self.on_apply_failed: list[Callable[[str], None]] = []
        self._closed = False
        transport.bind(self)

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
        self._waiters.fail_all(
            ProposalOutcomeUnknown("the controller stopped; the write may still commit")
        )
        for future in self._replies.values():
            if not future.done():  # the caller is told UNAVAILABLE, not cancelled
                future.set_exception(ConnectionAbortedError("the node is shutting down"))
        for task in list(self._background):
            task.cancel()
        # Let a flush or snapshot write in a worker thread finish before the caller
        # closes the stores under it.
        while self.flushes.running or (self.snapshots and self.snapshots.running):
            await asyncio.sleep(0.01)

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------- the Raft client seam (client_api)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.core.leader_id, self.core.epoch)

    @property
    def high_watermark(self) -> int:
        return self.core.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.core.log.end_offset

    @property
    def log_start_offset(self) -> int:
        return self.core.log.start_offset

    @property
    def leader_committed_epoch(self) -> bool:
        return self.core.leader_committed_epoch

    def read_committed(self, offset: int, max_records: int) -> list[Batch]:
        high_watermark = self.core.high_watermark
        out: list[Batch] = []
        for batch in self.core.log.read(offset, max_records):
            if batch.base_offset >= high_watermark:
                break
            if batch.last_offset >= high_watermark:  # never past the high watermark
                keep = high_watermark - batch.base_offset
                batch = Batch(
                    batch.base_offset,
                    batch.epoch,
                    batch.records[:keep],
                    batch.append_time_ms,
                    batch.control,
                )
            out.append(batch)
        return out

    def known_voters(self) -> frozenset[int]:
        """Who may send requests as a voter: the voter set in force and, while the
        newest voter change is uncommitted, the set before it too (a removed
        voter may still need to lead or vote until the change commits; the core
        judges what its requests are worth)."""
        core = self.core
        voters = core.voters
        if not core.kraft_version or not core.voter_change_pending():
            return voters
        latest = core.latest_voter_change()
        previous = core.voter_set_at(latest[0]) if latest is not None else None
        return voters | (previous.ids if previous is not None else self.config.voters)

    def register(self, listener: RaftListener) -> None:
        """The newest snapshot the log holds is loaded into `listener` now (checksum
        verified: a corrupt one raises); committed batches follow as the HW moves."""
        context = ListenerContext(listener, self.core.log.start_offset)
        if self.snapshots is not None:
            self.snapshots.load_start(context)
        self._listeners.append(context)
        self.on_role_change.append(
            lambda change: listener.handle_leader_change(
                LeaderAndEpoch(change.leader_id, change.epoch)
            )
        )

    # ------------------------------------- this node's view, for servicers and metrics

    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def leader_id(self) -> int | None:
        return self.core.leader_id

    @property
    def role(self) -> Role:
        return self.core.role

    @property
    def log_end_epoch(self) -> int:
        return self.core.log.last_epoch

    @property
    def voted_for(self) -> int | None:
        """The candidate this node voted for in its current epoch (DescribeQuorum)."""
        return self.core.voted_for

    @property
    def flushed_end(self) -> int:
        return self.core.flushed_end

    def replica_progress(self) -> dict[int, ReplicaProgress]:
        return self.core.replica_progress()

    # ------------------------------------------------------------------ events

    def receive(self, source: int, message: Message) -> None:
        """A request or response from a peer, on the loop thread; its round runs
        now, not a loop turn later (a fetch, or its answer, is the commit's path)."""
        if self._closed:
            return
        if isinstance(message, FetchRequest):
            counts = self.stats.fetches_by_replica
            counts[source] = counts.get(source, 0) + 1
        with self.poll_idle:
            self.core.on_message(source, message, self.clock())
            self._process()

    async def handle_request(self, source: int, message: Message, timeout_s: float) -> Message:
        """Feed an incoming request to the core and wait for its answer to `source`
        (TimeoutError if none comes in `timeout_s`). A newer request of the same
        kind from the same source supersedes this one, whose wait is cancelled."""
        loop = asyncio.get_running_loop()
        key = (source, _RESPONSE_FOR[type(message)])
        previous = self._replies.pop(key, None)
        if previous is not None and not previous.done():
            previous.cancel()
        future: asyncio.Future[Message] = loop.create_future()
        self._replies[key] = future
        expiry = loop.call_later(timeout_s, _expire, future)
        self.receive(source, message)
        try:
            return await future
        finally:
            expiry.cancel()
            if self._replies.get(key) is future:
                del self._replies[key]

    def peer_unreachable(self, peer: int) -> None:
        if self._closed:
            return
        if self.core.leader_id == peer:
            with self.poll_idle:
                self.core.on_leader_unreachable(self.clock())
            self._schedule_process()

    async def propose(self, records: list[bytes]) -> ProposeResult:
        """Append records; returns once they are committed. Raises NotLeaderError."""
        if self._loop is None or self._closed:
            raise RuntimeError("driver not running")
        with self.poll_idle:
            result = self.core.propose(records, self.clock())
        future: asyncio.Future[ProposeResult] = self._loop.create_future()
        self._waiters.add(result, future)
        self._schedule_process()
        return await future

    async def propose_each(self, proposals: list[list[bytes]]) -> list[ProposeResult]:
        """Several proposals at once, in order, each its own atomic unit (as if
        proposed one after another in this loop iteration); returns once the last
        is committed, and so all of them. One future for all: a client's coalesced
        writes cost one wake-up here, not one each. Raises NotLeaderError (none
        proposed then)."""
        if self._loop is None or self._closed:
            raise RuntimeError("driver not running")
        with self.poll_idle:
            now = self.clock()
            propose = self.core.propose
            results = [propose(records, now) for records in proposals]
        future: asyncio.Future[ProposeResult] = self._loop.create_future()
        self._waiters.add(results[-1], future)
        self._schedule_process()
        await future
        return results

    async def change_voters(
        self, change: Callable[[int], ProposeResult | None]
    ) -> ProposeResult | None:
        """Run a voter change of the core (`add_voter`, `remove_voter`,
        `update_voter`, given the time); returns once its VotersRecord is
        committed (None at once when there was nothing to change). Raises what
        the core raises (NotLeaderError, VoterChangeRefused), changing nothing then."""
        if self._loop is None or self._closed:
            raise RuntimeError("driver not running")
        with self.poll_idle:
            result = change(self.clock())
        if result is None:
            return None
        future: asyncio.Future[ProposeResult] = self._loop.create_future()
        self._waiters.add(result, future)
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
        with self.poll_idle:
            self._run_effects()

    def _run_effects(self) -> None:
        assert self._loop is not None
        effects = self.core.poll(self.clock())
        superseded = superseded_state_writes(effects)
        deferred, committed = commit_last(effects)
        for index, effect in enumerate(effects):
            if index in superseded or index in deferred:
                continue
            try:
                self._execute(effect)
            except Exception as err:
                # The core believes the effect happened (an append, a vote on disk):
                # going on would let this node acknowledge or vote on what it never
                # stored. No later effect of the round runs, so nothing that depends
                # on the failed write leaves the node.
                self._fatal(f"{type(effect).__name__} failed: {err}")
                return
        if committed is not None:  # after the round's messages (`commit_last`)
            self._on_committed(committed)  # a failed apply closes: nothing more starts
        self.flushes.schedule(self._loop)
        self._arm_timer()

    def _arm_timer(self) -> None:
        """Keep a timer armed for the core's next deadline. Most events leave the
        deadline where it was or later, so an armed timer that fires no later than
        needed is kept (a tick before a deadline does nothing, and the tick re-arms)
        instead of being replaced on every event."""
        assert self._loop is not None
        deadline = self.core.next_deadline()
        if self._timer is not None:
            if self._timer_deadline <= deadline:
                return
            self._timer.cancel()
        self._timer_deadline = deadline
        delay_ms = max(0, deadline - self.clock())
        self._timer = self._loop.call_later(delay_ms / 1000, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed:
            return
        with self.poll_idle:
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
                self.stats.records_appended += sum(len(b.records) for b in effect.batches)
            case TruncateLog():
                self.log_store.truncate(effect.end_offset)
                self._waiters.fail_from(effect.end_offset)
            case AdvanceLogStart():
                self.log_store.advance_start(effect.snapshot_id)
            case ResetLog():
                self.log_store.reset_to_snapshot(effect.snapshot_id)
                self._waiters.fail_from(0)
            case FlushLog():
                self.flushes.request(effect)
            case SendMessage():
                self._send(effect.destination, effect.message)
            case HighWatermarkChanged():
                self._on_committed(effect.high_watermark)
            case RoleChanged():
                self._on_role_changed(effect)
            case FetchSnapshot():
                self._spawn(self._fetch_snapshot(effect.leader_id, effect.snapshot_id))
            case RequestRefused() if effect.kind == EPOCH_JUMP:
                line = f"claimed to come from node {effect.source}: {effect.reason}"
                self.refusals.refuse(effect.request, EPOCH_JUMP, line, effect.source)
            case RequestRefused():  # an answer we received, not a request to answer
                line = f"answer of node {effect.source} not taken: {effect.reason}"
                self.refusals.refuse(f"{effect.request}Response", effect.kind, line)

    def _send(self, destination: int, message: Message) -> None:
        if isinstance(message, RESPONSE_TYPES):
            future = self._replies.pop((destination, type(message)), None)
            if future is not None and not future.done():
                future.set_result(message)
        else:
            self.transport.send_request(destination, message)

    def _on_role_changed(self, effect: RoleChanged) -> None:
        now = time.monotonic()
        if effect.role in (Role.PROSPECTIVE, Role.CANDIDATE):
            if self._election_started is None:
                self._election_started = now
        elif effect.leader_id is not None and self._election_started is not None:
            self.latencies.election(now - self._election_started)
            self._election_started = None
        if effect.role is Role.LEADER:
            self.stats.elections += 1
        log.info(
            "node %d is %s in epoch %d (leader %s)",
            self.config.node_id,
            effect.role.value,
            effect.epoch,
            effect.leader_id,
        )
        led_epoch = self._held_fetches.role_changed(effect)
        if led_epoch is not None:
            self._release_held_fetches(led_epoch, effect)
        for callback in self.on_role_change:
            callback(effect)

    def _release_held_fetches(self, led_epoch: int, change: RoleChanged) -> None:
        """This node stopped leading: every fetch it still holds is answered now
        (see `held_fetches`), so no follower waits out its deadline here."""
        answer = released_fetch_answer(
            led_epoch, change, self.core.high_watermark, self.core.log.start_offset
        )
        held = [source for source, kind in self._replies if kind is FetchResponse]
        for source in held:
            self._send(source, answer)
        if held:
            log.info(
                "answered %d held fetches (from %s) with %s: no longer leading epoch %d",
                len(held),
                ", ".join(map(str, sorted(held))),
                answer.error.name,
                led_epoch,
            )

    def _on_committed(self, high_watermark: int) -> None:
        self._waiters.complete(high_watermark, self.core.log.epoch_at, self.latencies.commit)
        for context in self._listeners:
            try:
                deliver_committed(context, self.core.log, high_watermark)
            except Exception as err:  # a record this build cannot apply: never skip it
                self._fatal(f"cannot apply a committed record: {err}", self.on_apply_failed)
                return

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _fatal(self, reason: str, callbacks: list[Callable[[str], None]] | None = None) -> None:
        """Storage failed under us (the log is in an unknown state), or a committed
        record cannot be applied (this replica would fork from the others): stop."""
        log.critical("stopping: %s", reason)
        self._closed = True
        for callback in self.on_fatal if callbacks is None else callbacks:
            callback(reason)

    # ------------------------------------------------------------------ flushes

    def _sync_off_loop(self) -> bool:
        """Only a leader with other voters has work for its loop while the disk
        syncs (see `flush_scheduler`): answers and writes; a majority may commit
        without its sync. A follower's next fetch waits for its sync."""
        return self.core.role is Role.LEADER and len(self.core.voters) > 1

    def _flush_at_once(self) -> bool:
        """Not leading, no held fetches' answers to let out first."""
        return self.core.role is not Role.LEADER

    def _flushed(
        self, flush: FlushLog, end_offset: int, error: BaseException | None, started: float | None
    ) -> None:
        if self._closed:
            return
        if error is not None:
            self._fatal(f"flush failed: {error}")
            return
        if started is not None:
            self.stats.flushes += 1
            self.latencies.flush(time.monotonic() - started)
        self.core.on_flushed(end_offset, flush.generation, self.clock())
        self._process()


_RESPONSE_FOR: dict[type, type] = {
    VoteRequest: VoteResponse,
    BeginQuorumEpochRequest: BeginQuorumEpochResponse,
    EndQuorumEpochRequest: EndQuorumEpochResponse,
    FetchRequest: FetchResponse,
}


def _expire(future: asyncio.Future[Message]) -> None:
    if not future.done():
        future.set_exception(TimeoutError("no answer in time"))


__all__ = ["NotLeaderError", "ProposalFailed", "RaftDriver", "Transport"]
