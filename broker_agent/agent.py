"""The broker agent: registration, the MetadataFetch loop, and the broker state machine.

    OFFLINE --register--> FENCED --caught up, unfenced--> ONLINE
    ONLINE --no controller for broker.session.timeout.ms--> FENCED
    FENCED/ONLINE --SIGTERM/SIGINT--> STOPPING --controller says done--> OFFLINE

Every MetadataFetch is a heartbeat; they go over one MetadataFetchStream call
(see `AdminClient.metadata_fetch`). The agent follows NOT_CONTROLLER hints and
moves across the configured controllers on failures (the admin client does
that). A fetch answer either carries committed batches, which go to the local
cache (apply, then one fsync) and to the apply trace, or names a snapshot to
load first, which is pulled in chunks and installed only once its checksum holds.

Every committed batch applied also goes to the replica manager (when the
broker hosts partition replicas), which becomes leader or follower of each
partition as the image says, once the image holds this incarnation's
registration (never on what a restarted broker's cache remembers). Without
follower fetching (no `LeaderFetchClient` yet) the agent keeps its old rule and,
as partition leader, asks the controller (AlterPartition) to put back into the
ISR the replicas that are online again; with it, the replica manager moves the
ISR by replication lag instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from itertools import groupby, repeat
from operator import attrgetter

from broker_agent.apply_trace import ApplyTrace, FetchExchange, clock_offset_ms
from broker_agent.config import BrokerConfig
from broker_agent.isr_expansion import isr_expansions
from broker_agent.metadata_cache import MetadataCache
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.admin_client import AdminClient, AdminError, NoControllerError
from quorum.common.clocks import wall_clock_ms
from quorum.common.meta_properties import random_uuid
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from quorum.raft.records import Batch, SnapshotId

log = logging.getLogger("broker_agent")
BATCH_BASE = attrgetter("batch_base")

State = bpb.BrokerState
OFFLINE, FENCED, ONLINE, STOPPING = bpb.OFFLINE, bpb.FENCED, bpb.ONLINE, bpb.STOPPING
STATE_NAMES = {OFFLINE: "OFFLINE", FENCED: "FENCED", ONLINE: "ONLINE", STOPPING: "STOPPING"}
# The lifecycle event each state change is recorded as in the trace's events file.
TRANSITION_EVENTS = {
    (ONLINE, FENCED): "fenced",
    (FENCED, ONLINE): "unfenced",
    (ONLINE, STOPPING): "controlled_shutdown",
    (FENCED, STOPPING): "controlled_shutdown",
}
RETRY_PAUSE_S = 0.1
STOPPING_WAIT_MS = 100
SNAPSHOT_CHUNK_BYTES = 1 << 20
METADATA_VERSION_RANGE = (1, 1)
# A registration refused because the previous incarnation's session is still
# alive is retried until the controller lets that session lapse.
STATS_WINDOW = 100_000
# Refusals that retrying cannot cure: another cluster, a malformed request, a
# cache ahead of the controllers' log.
FATAL_FETCH_ERRORS = {"INCONSISTENT_CLUSTER_ID", "INVALID_REQUEST", "OFFSET_OUT_OF_RANGE"}
REGISTER_RETRY = {"DUPLICATE_BROKER_REGISTRATION", "REQUEST_TIMED_OUT"}
# Record types that change no broker and no partition: applying only these cannot
# give `_expand_isrs` anything new to ask for (any other type, a future one too,
# makes it look again).
NO_ISR_EFFECT = frozenset({
    "config", "access_control_entry", "remove_access_control_entry", "producer_ids",
    "feature_level", "no_op", "leader_change",
})  # fmt: skip


@dataclass
class AgentStats:
    fetches: int = 0
    fetch_errors: int = 0
    records_applied: int = 0
    snapshots_loaded: int = 0
    # Kafka's metadata-load-error-count and metadata-apply-error-count: a snapshot
    # that failed to load, a batch that failed to apply (the agent then stops).
    load_errors: int = 0
    apply_errors: int = 0
    high_watermark: int = 0
    broker_epoch: int = -1
    # Recent figures, for benchmarks and the metrics histograms.
    apply_lag_ms: deque[float] = field(default_factory=lambda: deque(maxlen=STATS_WINDOW))
    fetch_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=STATS_WINDOW))
    # Called with a commit-to-apply lag (ms) and how many records had it.
    on_apply_lag: list[Callable[[float, int], None]] = field(default_factory=list)
    on_fetch: list[Callable[[float], None]] = field(default_factory=list)
    on_snapshot_load: list[Callable[[float], None]] = field(default_factory=list)
    # The image moved (a fetched batch applied, a snapshot loaded): once per move.
    on_applied: list[Callable[[], None]] = field(default_factory=list)


class BrokerAgent:
    def __init__(
        self,
        config: BrokerConfig,
        cluster_id: str,
        cache: MetadataCache,
        trace: ApplyTrace | None,
        client: AdminClient | None = None,
        log_dirs: tuple[str, ...] = (),
        replicas: ReplicaManager | None = None,
    ) -> None:
        self.config = config
        # KIP-858: the directory.id of each log directory (its meta.properties),
        # sent at every registration so the controllers tell its disks apart.
        self.log_dirs = log_dirs
        self.cluster_id = cluster_id
        self.cache = cache
        self.trace = trace
        self.client = client or AdminClient(
            config.bootstrap,
            cluster_id,
            addresses={n: e.address() for n, e in config.controllers.items()},
            tls=config.tls,
        )
        self.incarnation_id = random_uuid()
        self.state: State = OFFLINE
        # Called with each new state (the Kafka listener starts serving at the first ONLINE).
        self.state_listeners: list[Callable[[State], None]] = []
        # Awaited before a fetched batch is applied (the Kafka server's forwarded replies).
        self.replies_first: Callable[[], Awaitable[None]] | None = None
        self.stats = AgentStats()
        self.stop_requested = asyncio.Event()
        # The task running `run`, and whether it waits in a fetch `request_stop`
        # may abandon (by cancelling that task: no task of its own per fetch).
        self._run_task: asyncio.Task[int] | None = None
        self._parked = False
        self._abandoned = False
        self._last_ok = time.monotonic()
        self._pending_snapshot: asyncio.Future[None] | None = None
        self._isr_stale = True  # brokers or partitions changed since the last ISR look
        self.replicas = replicas

    @property
    def caught_up(self) -> bool:
        """The image holds this incarnation's registration (at offset broker_epoch)."""
        return 0 <= self.stats.broker_epoch < self.cache.next_offset

    def _metadata_applied(self) -> None:
        # Only once caught up, as Kafka's brokers publish their image: before that,
        # the cache may still name this broker leader of partitions the controllers
        # moved away while it was down (its registration comes after that move),
        # and leading on it could acknowledge writes that are truncated later.
        if self.replicas is not None and self.caught_up:
            try:
                self.replicas.on_metadata(self.image, open_in_background=True)
            except Exception:
                log.exception("broker %d: replica manager failed to apply metadata",
                              self.config.node_id)  # fmt: skip
        for observe in self.stats.on_applied:
            observe()

    @property
    def image(self) -> MetadataImage:
        return self.cache.image

    def request_stop(self) -> None:
        """STOPPING starts at once: a parked fetch is abandoned (its task is
        cancelled there, and `_fetch_or_stop` takes that cancellation back)."""
        self.stop_requested.set()
        task = self._run_task
        if not self._parked or task is None or task is _current_task():
            return  # not waiting in a fetch: the loop sees the request next
        self._parked = False
        self._abandoned = True
        task.cancel()

    def _set_state(self, state: State) -> None:
        if state != self.state:
            log.info(
                "broker %d: %s -> %s",
                self.config.node_id,
                STATE_NAMES[self.state],
                STATE_NAMES[state],
            )
            kind = TRANSITION_EVENTS.get((self.state, state), "stopped" if state == OFFLINE else "")
            self.state = state
            if kind:
                self._event(kind)
            for listener in self.state_listeners:
                listener(state)

    def _event(self, kind: str, **fields: object) -> None:
        """A lifecycle event for the analytics (see `broker_agent/apply_trace.py`)."""
        if self.trace is not None:
            self.trace.event(
                kind, wall_clock_ms(), state=STATE_NAMES[self.state],
                broker_epoch=self.stats.broker_epoch, offset=self.cache.next_offset, **fields,
            )  # fmt: skip

    # ------------------------------------------------------------ main loop

    async def run(self) -> int:
        """Until stopped; 0 when the controller completed the controlled shutdown."""
        self._run_task = asyncio.current_task()  # type: ignore[assignment]
        self._event("restarted" if self.cache.next_offset > 0 else "started",
                    incarnation_id=self.incarnation_id)  # fmt: skip
        if not await self._register():
            return 0
        self._set_state(FENCED)
        self._metadata_applied()  # a cache holding this incarnation's registration
        shutdown_deadline: float | None = None
        while True:
            if self.stop_requested.is_set() and self.state != STOPPING:
                self._set_state(STOPPING)
                shutdown_deadline = time.monotonic() + self.config.shutdown_timeout_ms / 1000
            if shutdown_deadline is not None and time.monotonic() > shutdown_deadline:
                log.warning(
                    "broker %d: controlled shutdown not finished within %d ms; exiting",
                    self.config.node_id,
                    self.config.shutdown_timeout_ms,
                )
                self._set_state(OFFLINE)
                return 1
            response = await self._fetch_once()
            if response is None:
                continue
            if self.state == STOPPING:
                if response.should_shut_down:
                    self._set_state(OFFLINE)
                    return 0
            else:
                self._set_state(FENCED if response.is_fenced else ONLINE)
                if self.state == ONLINE and (
                    self.replicas is None or self.replicas.fetcher is None
                ):
                    await self._expand_isrs()

    async def _register(self) -> bool:
        request = bpb.RegisterBrokerRequest(
            cluster_id=self.cluster_id,
            broker_id=self.config.node_id,
            incarnation_id=self.incarnation_id,
            # Kafka registers the advertised listeners: what Metadata hands to clients.
            listeners=[
                bpb.Listener(
                    name=name,
                    host=endpoint.host,
                    port=endpoint.port,
                    security_protocol=self.config.listener_protocols.get(name, "PLAINTEXT"),
                )
                for name, endpoint in (
                    self.config.advertised_listeners
                    or ((self.config.listener_name, self.config.listener),)
                )
            ],
            features=[
                bpb.SupportedFeature(
                    name="metadata.version",
                    min_supported_version=METADATA_VERSION_RANGE[0],
                    max_supported_version=METADATA_VERSION_RANGE[1],
                )
            ],
            log_dirs=self.log_dirs,
        )
        if self.config.rack is not None:
            request.rack = self.config.rack
        while not self.stop_requested.is_set():
            try:
                reply = await self.client.broker(
                    "RegisterBroker", request, deadline_s=self._request_deadline_s()
                )
            except NoControllerError as err:
                log.warning("broker %d: %s", self.config.node_id, err)
                continue
            except AdminError as err:
                if err.name not in REGISTER_RETRY:
                    raise
                log.info("broker %d: registration refused (%s); retrying", self.config.node_id, err)
                await self._pause(0.5)
                continue
            self.stats.broker_epoch = reply.broker_epoch
            self._last_ok = time.monotonic()
            self._event("registered", incarnation_id=self.incarnation_id)
            log.info(
                "broker %d registered with epoch %d (incarnation %s)",
                self.config.node_id,
                reply.broker_epoch,
                self.incarnation_id,
            )
            return True
        return False

    def _request_deadline_s(self) -> float:
        return self.config.heartbeat_interval_ms / 1000 + 2.0

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop_requested.wait(), seconds)

    # ---------------------------------------------------------------- fetch

    async def _fetch_once(self) -> bpb.MetadataFetchResponse | None:
        # One turn of the loop first: a commit's answers wake a process's agents
        # together, and each agent's next request then leaves after all of them
        # applied, in one burst that gRPC writes to the process's one connection
        # in fewer system calls (as a task per fetch made it do, one step late).
        await asyncio.sleep(0)
        stopping = self.state == STOPPING
        request = bpb.MetadataFetchRequest(
            cluster_id=self.cluster_id,
            broker_id=self.config.node_id,
            broker_epoch=self.stats.broker_epoch,
            fetch_offset=self.cache.next_offset,
            last_fetched_epoch=self.cache.last_epoch,
            want_shutdown=stopping,
            current_state=self.state,
            max_wait_ms=STOPPING_WAIT_MS if stopping else self.config.heartbeat_interval_ms,
            broker_send_time_ms=wall_clock_ms(),
        )
        started = time.monotonic()
        try:
            response = await self._fetch_or_stop(request)
        except (NoControllerError, AdminError) as err:
            await self._fetch_failed(err)
            return None
        if response is None:
            return None
        received_ms = wall_clock_ms()
        self.stats.fetches += 1
        seconds = time.monotonic() - started
        self.stats.fetch_seconds.append(seconds)
        for observe in self.stats.on_fetch:
            observe(seconds)
        self._last_ok = time.monotonic()
        self.stats.high_watermark = response.high_watermark
        exchange: FetchExchange | None = None
        if self.trace is not None:  # built only for the trace: this runs per broker per commit
            exchange = FetchExchange(
                request.broker_send_time_ms,
                response.controller_receive_time_ms,
                response.controller_send_time_ms,
                received_ms,
                response.controller_id,
            )
            self._event("fetch", **exchange.fields(), high_watermark=response.high_watermark,
                        records=sum(len(b.records) for b in response.batches))  # fmt: skip
        if response.HasField("load_snapshot"):
            try:
                await self._load_snapshot(response.load_snapshot)
            except (NoControllerError, AdminError) as err:
                # A chunk past its deadline, or the snapshot gone (a newer one
                # replaced it): as any failed fetch, pause and fetch again.
                await self._fetch_failed(err)
                return None
            return response
        if response.batches:
            if self.replies_first is not None:
                await self.replies_first()
            offset = clock_offset_ms(
                request.broker_send_time_ms,
                response.controller_receive_time_ms,
                response.controller_send_time_ms,
                received_ms,
            )
            await self._apply(response, received_ms, offset, exchange)
        return response

    async def _fetch_or_stop(
        self, request: bpb.MetadataFetchRequest
    ) -> bpb.MetadataFetchResponse | None:
        """A parked fetch is abandoned when SIGTERM arrives, so STOPPING starts at
        once: `request_stop` cancels the agent's task while it waits here, and
        the cancellation is taken back (`uncancel`) unless another one came with
        it. No task and no stop waiter per fetch: this runs once per broker per
        commit. A cancellation lands where the task waits (a pending one as
        well as one whose answer is in but not yet taken), so never elsewhere."""
        fetch = self.client.metadata_fetch(request, deadline_s=self._request_deadline_s())
        if self.state == STOPPING:
            return await fetch
        if self.stop_requested.is_set():
            fetch.close()
            return None
        self._parked = True
        try:
            return await fetch
        except asyncio.CancelledError:
            if self._abandoned:
                self._abandoned = False
                me = _current_task()
                if me is None or me.uncancel() == 0:
                    return None  # abandoned by request_stop, not our own cancellation
            raise
        finally:
            self._parked = False
            if self._abandoned:  # the fetch swallowed the cancellation: take it back
                self._abandoned = False
                me = _current_task()
                if me is not None:
                    me.uncancel()

    async def _fetch_failed(self, err: Exception) -> None:
        self.stats.fetch_errors += 1
        name = err.name if isinstance(err, AdminError) else "NO_CONTROLLER"
        if name in ("STALE_BROKER_EPOCH", "BROKER_ID_NOT_REGISTERED"):
            # Unregistered, or re-registered by another incarnation: start over.
            log.warning("broker %d: %s; registering again", self.config.node_id, err)
            if self.state != STOPPING:
                self._set_state(FENCED)
            await self._register()
            return
        if isinstance(err, AdminError) and name in FATAL_FETCH_ERRORS:
            raise err
        lost_s = time.monotonic() - self._last_ok
        if self.state == ONLINE and lost_s * 1000 >= self.config.session_timeout_ms:
            log.warning(
                "broker %d: no controller for %.1f s; counting itself fenced",
                self.config.node_id,
                lost_s,
            )
            self._set_state(FENCED)
        await self._pause(RETRY_PAUSE_S)

    async def _apply(
        self,
        response: bpb.MetadataFetchResponse,
        received_ms: int,
        offset_ms: float,
        exchange: FetchExchange | None = None,
    ) -> None:
        batches = [
            Batch(b.base_offset, b.epoch, tuple(b.records), b.append_time_ms, b.control)
            for b in response.batches
        ]
        try:
            applied = self.cache.append(batches)
        except Exception:
            self.stats.apply_errors += 1
            raise
        if not self._isr_stale:
            for a in applied:
                if a.record_type not in NO_ISR_EFFECT:
                    self._isr_stale = True
                    break
        apply_ms = wall_clock_ms()
        commit_times = {b.base_offset: b.commit_time_ms for b in response.batches}
        self.stats.records_applied += len(applied)
        # One lag per batch (its records share the commit time), observed with
        # its record count: one observe per record was 170 µs of a 200-record batch.
        for batch_base, records in groupby(applied, BATCH_BASE):
            commit = commit_times.get(batch_base, 0)
            if commit:
                lag = apply_ms + offset_ms - commit
                count = sum(1 for _ in records)
                self.stats.apply_lag_ms.extend(repeat(lag, count))
                for observe in self.stats.on_apply_lag:
                    observe(lag, count)
        if self.trace is not None:
            self.trace.write(
                applied, commit_times, received_ms, apply_ms, offset_ms, exchange,
                STATE_NAMES[self.state],
            )  # fmt: skip
        self._metadata_applied()
        self._maybe_snapshot()

    def _maybe_snapshot(self) -> None:
        if self._pending_snapshot is not None and not self._pending_snapshot.done():
            return
        now = wall_clock_ms()
        snapshot_id = self.cache.snapshot_due(now)
        if snapshot_id is None:
            return
        records = self.cache.capture()
        loop = asyncio.get_running_loop()

        def write() -> None:
            self.cache.write_snapshot(snapshot_id, records)

        def written(done: asyncio.Future[None]) -> None:
            failure = None if done.cancelled() else done.exception()
            if failure is not None:  # it costs nothing but cache length: say so, go on
                log.warning("broker %d: metadata snapshot %s failed: %s",
                            self.config.node_id, snapshot_id, failure)  # fmt: skip
            self.cache.snapshot_written(now)

        self._pending_snapshot = loop.run_in_executor(None, write)
        self._pending_snapshot.add_done_callback(written)

    async def finish_snapshot(self) -> None:
        """Wait for a snapshot still being written in a worker thread: the cache
        must not be closed under it (the write then failed on a closed file and
        asyncio logged its traceback)."""
        pending = self._pending_snapshot
        if pending is not None:
            with contextlib.suppress(Exception):
                await pending

    async def _load_snapshot(self, ref: bpb.SnapshotRef) -> None:
        """Pull the named snapshot in chunks; install it only if it validates."""
        if self._pending_snapshot is not None:
            await self._pending_snapshot
        snapshot_id = SnapshotId(ref.end_offset, ref.epoch)
        log.info("broker %d: loading snapshot %s from the controller", self.config.node_id, ref)
        self._event("snapshot_load_started", snapshot_end_offset=ref.end_offset)
        position, receiver = 0, None
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        try:
            while True:
                chunk = await self.client.broker(
                    "FetchMetadataSnapshot",
                    bpb.FetchMetadataSnapshotRequest(
                        broker_id=self.config.node_id,
                        broker_epoch=self.stats.broker_epoch,
                        snapshot=ref,
                        position=position,
                        max_bytes=SNAPSHOT_CHUNK_BYTES,
                    ),
                    deadline_s=self._request_deadline_s(),
                )
                if receiver is None:
                    receiver = self.cache.snapshots.begin_install(snapshot_id, chunk.size)
                receiver.write_chunk(chunk.position, chunk.data)
                position = chunk.position + len(chunk.data)
                if position >= chunk.size:
                    break
            await loop.run_in_executor(None, self.cache.install, receiver, snapshot_id)
        except BaseException as err:
            if receiver is not None:
                receiver.abort()
            if not isinstance(err, asyncio.CancelledError):
                self.stats.load_errors += 1
            raise
        self._isr_stale = True
        self._metadata_applied()
        self.stats.snapshots_loaded += 1
        for observe in self.stats.on_snapshot_load:
            observe(time.monotonic() - started)
        self._event("snapshot_loaded", snapshot_end_offset=ref.end_offset)

    # ------------------------------------------------------------------ ISR

    async def _expand_isrs(self) -> None:
        """Ask to add back to the ISR the online replicas of partitions this broker
        leads; only when a broker or a partition changed since the last look: a
        scan of every partition after each fetch that moved the image ran once
        per broker per commit in the fan-out, where most commits change a config."""
        if not self._isr_stale:
            return
        self._isr_stale = False
        me = self.config.node_id
        items = isr_expansions(self.image, me)
        if not items:
            return
        try:
            reply = await self.client.admin(
                "AlterPartition",
                api.AlterPartitionRequest(
                    broker_id=me, broker_epoch=self.stats.broker_epoch, partitions=items
                ),
                deadline_s=self._request_deadline_s(),
            )
        except (AdminError, NoControllerError) as err:
            log.info("broker %d: AlterPartition failed: %s", me, err)
            self._isr_stale = True  # look again after the next fetch
            return
        failed = [r for r in reply.results if r.error.error_code != 0]
        if failed:
            self._isr_stale = True
        log.info(
            "broker %d: ISR expansion for %d partitions (%d refused)", me, len(items), len(failed)
        )


def _current_task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop
        return None
