"""The metadata controller: one object for what the active controller decides.

It owns the committed image's write path (the write queue), broker sessions and
fencing, automatic leader rebalancing, the commit clock, and MetadataFetch's
decisions (heartbeat, snapshot or batches, long poll). It talks to Raft only
through the `RaftClient` seam and knows nothing of gRPC: refusals are
`ControllerError` (Kafka's error name and a message) or `NotController` (with
the leader's id), which the servicers in `quorum.server` turn into statuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from quorum.controller import cluster_ops, partition_ops, topic_ops
from quorum.controller import config_schema as cs
from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.broker_registry import BrokerRegistry
from quorum.controller.cluster_ops import SUPPORTED_FEATURES
from quorum.controller.commit_clock import CommitClock
from quorum.controller.fetch_answers import AnswerKey, FetchAnswer, FetchAnswers
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.metrics_view import ControllerView
from quorum.controller.request_limits import RequestLimits
from quorum.controller.snapshot_generator import SnapshotGenerator
from quorum.controller.validation import check_request
from quorum.controller.write_queue import Build, NotController, WriteQueue
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from quorum.raft.client_api import (
    Batch,
    LeaderAndEpoch,
    NotLeaderError,
    ProposalFailed,
    ProposalOutcomeUnknown,
    RaftClient,
    SnapshotReader,
)
from snapshots.policy import SnapshotPolicy

T = TypeVar("T")

COMMIT_TIMEOUT_S = 30.0
DEFAULT_MAX_RECORDS = 20_000
MAX_WAIT_CAP_MS = 10_000
SNAPSHOT_LAG_RECORDS = 500_000

_STATE_NAMES = {value: bpb.BrokerState.Name(value) for value in bpb.BrokerState.values()}


class CommitTimeout(Exception):
    """A write was proposed but not committed in time; it may still commit."""


class QuorumController:
    def __init__(
        self,
        raft: RaftClient,
        image: MetadataImage,
        cluster_id: str,
        addresses: Mapping[int, str],
        rng: random.Random | None = None,
        session_timeout_s: float = 9.0,
        limits: RequestLimits | None = None,
        wall_clock_ms: Callable[[], int] | None = None,
        snapshot_policy: SnapshotPolicy | None = None,
    ) -> None:
        self.raft = raft
        self.image = image
        self.cluster_id = cluster_id
        self.addresses = addresses  # live: voters added later are in it
        self.rng = rng or random.Random()
        self.limits = limits or RequestLimits()
        self.registry = BrokerRegistry(image, session_timeout_s)
        self.commits = (
            CommitClock() if wall_clock_ms is None else CommitClock(clock_ms=wall_clock_ms)
        )
        self.answers = FetchAnswers()  # MetadataFetch answers, encoded once per commit
        self.queue = WriteQueue(
            image,
            raft.node_id,
            self._propose,
            self._ready,
            lambda: self.leader.leader_id,
            lambda: self.leader.epoch,
        )
        self.errors = 0  # call-level refusals, for the metrics
        self.timed_out_heartbeats = 0  # sessions that ran out (TimedOutBrokerHeartbeatCount)
        # The leader's append time of the last batch applied (-1: none yet), for
        # Kafka's LastAppliedRecordTimestamp and LastAppliedRecordLagMs.
        self.last_applied_append_time_ms = -1
        self.snapshots = (
            SnapshotGenerator(raft, image, snapshot_policy) if snapshot_policy else None
        )
        self.view = ControllerView(self)  # what the metrics read
        raft.register(self)

    # ------------------------------------------------------- RaftListener

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        """Apply committed batches to the image, in offset order (control batches
        only move the applied offset); an unknown record version or a record that
        contradicts the image raises, and Raft stops this node rather than skip it."""
        image, snapshots = self.image, self.snapshots
        for batch in batches:
            if not batch.control:
                for offset, record in enumerate(batch.records, start=batch.base_offset):
                    image.apply(offset, record)
                if snapshots is not None:
                    snapshots.on_committed(batch.records)
            image.advance_to(batch.next_offset)
            self.last_applied_append_time_ms = batch.append_time_ms
        self.commits.on_commit(image.applied_offset)
        self.queue.notify()
        if snapshots is not None:
            snapshots.maybe_start()

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        self.answers.clear()
        self.image.load_snapshot(reader.records, reader.snapshot_id.end_offset)
        if self.snapshots is not None:
            self.snapshots.on_loaded(reader.snapshot_id)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        """Brokers' parked fetches are woken, so that a controller that stopped
        being active tells them at once (NOT_CONTROLLER with the new leader); a
        write waiting for this node to become active looks again. The fencing
        loop refreshes every session when this node becomes active."""
        self.answers.clear()
        if leader.leader_id != self.raft.node_id:
            self.commits.wake()
        self.queue.notify()

    # ------------------------------------------------------------ writes

    @property
    def node_id(self) -> int:
        return self.raft.node_id

    @property
    def leader(self) -> LeaderAndEpoch:
        return self.raft.leader_and_epoch()

    def _ready(self) -> bool:
        raft = self.raft
        return raft.leader_committed_epoch and self.image.applied_offset >= raft.high_watermark

    async def _propose(self, records: list[bytes]) -> object:
        """Committed, or TimeoutError; the caller's task awaits Raft's own future
        (no task in between, as `wait_for` would make: see `WriteQueue`)."""
        async with asyncio.timeout(COMMIT_TIMEOUT_S):
            return await self.raft.propose(records)

    def admit(self, request: object) -> None:
        """The edge: a request's bounds, before it waits for the queue or reads
        the image; a refusal changes nothing."""
        try:
            check_request(request, self.limits)
        except ControllerError:
            self.errors += 1
            raise

    async def write(self, build: Build[T]) -> T:
        """Validate against the committed image, propose, return once committed."""
        result, _ = await self.write_at(build)
        return result

    async def write_at(self, build: Build[T]) -> tuple[T, int]:
        """`write`, and the metadata offset that shows its outcome (`WriteQueue.submit_at`)."""
        try:
            return await self.queue.submit_at(build)
        except ControllerError:
            self.errors += 1
            raise
        except ProposalOutcomeUnknown as err:
            raise CommitTimeout(str(err)) from err
        except (NotLeaderError, ProposalFailed) as err:
            raise NotController(self.leader.leader_id) from err
        except TimeoutError as err:
            raise CommitTimeout(
                f"not committed within {COMMIT_TIMEOUT_S:.0f}s; it may still commit"
            ) from err

    def offset_hint(self) -> int:
        """The broker epoch a new registration gets: at least the next log offset."""
        return self.raft.log_end_offset

    # ------------------------------------------------------------ brokers

    async def register_broker(
        self, request: bpb.RegisterBrokerRequest
    ) -> bpb.RegisterBrokerResponse:
        self.admit(request)
        reply: bpb.RegisterBrokerResponse = await self.write(
            lambda: self.registry.build_register(request, self.offset_hint())
        )
        return reply

    async def heartbeat(self, request: bpb.BrokerHeartbeatRequest) -> bpb.BrokerHeartbeatResponse:
        """A heartbeat that changes nothing about the broker is answered without
        the write queue; one that must fence, unfence or start a controlled
        shutdown goes through it like any write."""
        registry = self.registry
        if registry.heartbeat_needs_write(request):
            reply: bpb.BrokerHeartbeatResponse = await self.write(
                lambda: registry.build_heartbeat(request, self.raft.high_watermark)
            )
            return reply
        await self.queue.wait_active()
        _, reply = registry.build_heartbeat(request, self.raft.high_watermark)
        return reply

    async def metadata_fetch(
        self, request: bpb.MetadataFetchRequest, received_ms: int
    ) -> bpb.MetadataFetchResponse:
        """`metadata_fetch_answer`, decoded."""
        return (await self.metadata_fetch_answer(request, received_ms)).decode()

    async def metadata_fetch_answer(
        self, request: bpb.MetadataFetchRequest, received_ms: int
    ) -> FetchAnswer:
        """A broker's heartbeat and pull, validated before the heartbeat counts:

        - below the log start, or more than `SNAPSHOT_LAG_RECORDS` behind with a
          snapshot to offer: load that snapshot first;
        - else the committed batches after its offset, never past the high
          watermark, each with its append and commit times;
        - a caught-up fetch is parked until the next commit or `max_wait_ms`.

        The records and high watermark are encoded once for every broker that
        asks the same (`FetchAnswers`); the broker's own fields come apart."""
        problems = fetch_problems(request)
        if problems:
            self.errors += 1
            raise ControllerError(ApiError.INVALID_REQUEST, "; ".join(problems))
        raft = self.raft
        # Only the active controller's log holds every committed record: a
        # follower behind the broker must answer NOT_CONTROLLER, not claim the
        # broker's cache is from another log.
        if not self._ready():
            await self.queue.wait_active()
        if request.fetch_offset > raft.log_end_offset:
            raise ControllerError(
                ApiError.OFFSET_OUT_OF_RANGE,
                f"fetch offset {request.fetch_offset} is past the log end "
                f"{raft.log_end_offset}: the broker's cache is not from this log",
            )
        state = _STATE_NAMES[request.current_state]
        # Most fetches are a heartbeat that asks for nothing and changes nothing:
        # answered without a heartbeat message; the others as BrokerHeartbeat is.
        plain = None
        if not (request.want_fence or request.want_shutdown):
            plain = self.registry.plain_beat(
                request.broker_id, request.broker_epoch, request.fetch_offset, state
            )
        if plain is not None:
            fenced, caught_up = plain
            shut_down = False
        else:
            beat = await self.heartbeat(
                bpb.BrokerHeartbeatRequest(
                    cluster_id=request.cluster_id,
                    broker_id=request.broker_id,
                    broker_epoch=request.broker_epoch,
                    current_metadata_offset=request.fetch_offset,
                    want_fence=request.want_fence,
                    want_shutdown=request.want_shutdown,
                )
            )
            fenced, caught_up, shut_down = beat.is_fenced, beat.is_caught_up, beat.should_shut_down
            session = self.registry.sessions.get(request.broker_id)
            if session is not None:
                session.reported_state = state
        own = bpb.MetadataFetchResponse(
            is_fenced=fenced,
            is_caught_up=caught_up,
            should_shut_down=shut_down,
            controller_receive_time_ms=received_ms,
            controller_id=raft.node_id,
        )
        snapshot = self._snapshot_to_load(request.fetch_offset)
        if snapshot is not None:
            shared = bpb.MetadataFetchResponse(
                load_snapshot=snapshot, high_watermark=raft.high_watermark
            )
            return FetchAnswer(shared.SerializeToString(), own)
        if request.fetch_offset >= raft.high_watermark and not shut_down:
            await self.commits.wait(min(request.max_wait_ms, MAX_WAIT_CAP_MS) / 1000)
            if self.leader.leader_id != raft.node_id:  # woken: no longer active
                raise NotController(self.leader.leader_id)
        return FetchAnswer(self._batches_answer(request.fetch_offset, request.max_records), own)

    def _batches_answer(self, fetch_offset: int, max_records: int) -> bytes:
        """The encoded batches after `fetch_offset` and the high watermark, shared."""
        raft = self.raft
        key = AnswerKey(
            fetch_offset, max_records or DEFAULT_MAX_RECORDS, raft.high_watermark,
            raft.log_start_offset,
        )  # fmt: skip
        shared = self.answers.get(key)
        if shared is None:
            response = bpb.MetadataFetchResponse(high_watermark=key.high_watermark)
            self._fill_batches(response, fetch_offset, key.max_records)
            shared = response.SerializeToString()
            self.answers.put(key, shared)
        return shared

    def _snapshot_to_load(self, fetch_offset: int) -> bpb.SnapshotRef | None:
        raft = self.raft
        behind = raft.high_watermark - fetch_offset
        if fetch_offset >= raft.log_start_offset and behind <= SNAPSHOT_LAG_RECORDS:
            return None
        latest = raft.latest_snapshot()
        if latest is None or latest.end_offset <= fetch_offset:
            return None
        return bpb.SnapshotRef(end_offset=latest.end_offset, epoch=latest.epoch)

    def _fill_batches(
        self, response: bpb.MetadataFetchResponse, fetch_offset: int, max_records: int
    ) -> None:
        budget = max_records
        for batch in self.raft.read_committed(fetch_offset, budget):
            skip = max(0, fetch_offset - batch.base_offset)
            records = batch.records[skip:]
            response.batches.add(
                base_offset=batch.base_offset + skip,
                epoch=batch.epoch,
                append_time_ms=batch.append_time_ms,
                commit_time_ms=self.commits.commit_time_ms(batch.last_offset),
                control=batch.control,
                records=records,
            )
            budget -= len(records)
            if budget <= 0:
                break

    def check_snapshot_fetcher(self, broker_id: int, broker_epoch: int) -> None:
        broker = self.image.brokers.get(broker_id)
        if broker is None:
            raise ControllerError(
                ApiError.BROKER_ID_NOT_REGISTERED, f"broker {broker_id} epoch {broker_epoch}"
            )
        if broker.broker_epoch != broker_epoch:
            raise ControllerError(
                ApiError.STALE_BROKER_EPOCH, f"broker {broker_id} epoch {broker_epoch}"
            )

    # ---------------------------------------------------- admin API: writes
    # Kafka's `ControllerApis` calls `QuorumController.createTopics` and its
    # siblings; the servicers call these. Each builds its records against the
    # committed image inside the write queue and answers once they committed.

    async def _answer(self, build: Build[T]) -> T:
        """`write`, with the answer's `metadata_offset` (when it has one) set to the
        offset that shows the outcome (read-your-writes for forwarding brokers)."""
        result, offset = await self.write_at(build)
        descriptor = getattr(result, "DESCRIPTOR", None)
        if descriptor is not None and "metadata_offset" in descriptor.fields_by_name:
            result.metadata_offset = offset  # type: ignore[attr-defined]
        return result

    async def create_topics(self, request: api.CreateTopicsRequest) -> api.CreateTopicsResponse:
        return await self._answer(
            lambda: topic_ops.create_topics_in_slices(self.image, request, self.rng, self.limits)
        )

    async def delete_topics(self, request: api.DeleteTopicsRequest) -> api.DeleteTopicsResponse:
        return await self._answer(lambda: topic_ops.build_delete_topics(self.image, request))

    async def create_partitions(
        self, request: api.CreatePartitionsRequest
    ) -> api.CreatePartitionsResponse:
        return await self._answer(
            lambda: topic_ops.build_create_partitions(self.image, request, self.rng, self.limits)
        )

    async def incremental_alter_configs(
        self, request: api.IncrementalAlterConfigsRequest
    ) -> api.IncrementalAlterConfigsResponse:
        return await self._answer(lambda: cluster_ops.build_alter_configs(self.image, request))

    async def create_acls(self, request: api.CreateAclsRequest) -> api.CreateAclsResponse:
        return await self._answer(
            lambda: cluster_ops.build_create_acls(self.image, request, self.rng)
        )

    async def delete_acls(self, request: api.DeleteAclsRequest) -> api.DeleteAclsResponse:
        return await self._answer(lambda: cluster_ops.build_delete_acls(self.image, request))

    async def elect_leaders(self, request: api.ElectLeadersRequest) -> api.ElectLeadersResponse:
        return await self._answer(lambda: partition_ops.build_elect_leaders(self.image, request))

    async def alter_partition(
        self, request: api.AlterPartitionRequest
    ) -> api.AlterPartitionResponse:
        return await self._answer(lambda: partition_ops.build_alter_partition(self.image, request))

    async def allocate_producer_ids(
        self, request: api.AllocateProducerIdsRequest
    ) -> api.AllocateProducerIdsResponse:
        return await self._answer(
            lambda: cluster_ops.build_allocate_producer_ids(self.image, request)
        )

    async def update_features(
        self, request: api.UpdateFeaturesRequest
    ) -> api.UpdateFeaturesResponse:
        return await self._answer(lambda: cluster_ops.build_update_features(self.image, request))

    async def unregister_broker(
        self, request: api.UnregisterBrokerRequest
    ) -> api.UnregisterBrokerResponse:
        await self.write(lambda: self.registry.build_unregister(request.broker_id))
        return api.UnregisterBrokerResponse()

    # ------------------------------------------------------------ reads

    def list_topics(self, request: api.ListTopicsRequest) -> api.ListTopicsResponse:
        return topic_ops.list_topics(self.image)

    def describe_topics(self, request: api.DescribeTopicsRequest) -> api.DescribeTopicsResponse:
        return topic_ops.describe_topics(self.image, request)

    def describe_configs(self, request: api.DescribeConfigsRequest) -> api.DescribeConfigsResponse:
        return cluster_ops.describe_configs(self.image, request)

    def describe_acls(self, request: api.DescribeAclsRequest) -> api.DescribeAclsResponse:
        return cluster_ops.describe_acls(self.image, request)

    def describe_cluster(self) -> api.DescribeClusterResponse:
        image = self.image
        leader = self.leader.leader_id
        response = api.DescribeClusterResponse(
            cluster_id=self.cluster_id,
            controller_id=leader if leader is not None else -1,
            controller_address=self.addresses.get(leader, "") if leader is not None else "",
            metadata_offset=image.applied_offset,
        )
        registry = self.registry
        sessions, now, active = registry.sessions, registry.clock(), self.queue.active
        for broker_id in sorted(image.brokers):
            b = image.brokers[broker_id]
            _, host, port, protocol = b.endpoints[0] if b.endpoints else ("", "", 0, "")
            response.brokers.add(
                broker_id=broker_id,
                host=host,
                port=port,
                rack=b.rack or "",
                broker_epoch=b.broker_epoch,
                fenced=b.fenced,
                in_controlled_shutdown=b.in_controlled_shutdown,
                state=b.state,
                incarnation_id=b.incarnation_id,
                log_dirs=b.log_dirs,
                security_protocol=protocol,
            )
            session = sessions.get(broker_id) if active else None
            if session is not None:
                described = response.brokers[-1]
                described.last_heartbeat_age_ms = int((now - session.last_heartbeat) * 1000)
                described.metadata_offset = session.metadata_offset
                described.reported_state = session.reported_state
        for name, level in sorted(image.features.items()):
            response.features.add(name=name, level=level)
        for name, (low, high) in sorted(SUPPORTED_FEATURES.items()):
            response.supported_features.add(name=name, min_level=low, max_level=high)
        return response

    # ------------------------------------------------------ background loops

    async def snapshot_forever(self) -> None:
        if self.snapshots is not None:
            await self.snapshots.run_forever()

    async def rebalance_forever(self) -> None:
        """`auto.leader.rebalance.enable`: every `leader.imbalance.check.interval.seconds`
        the active controller moves leadership back to preferred replicas where a
        broker's imbalance passes `leader.imbalance.per.broker.percentage`."""
        while True:
            cluster = self.image.config(cs.CLUSTER, "")
            await asyncio.sleep(int(cluster.get("leader.imbalance.check.interval.seconds", "300")))
            if not self.queue.active:
                continue
            with contextlib.suppress(NotController, CommitTimeout, ControllerError):
                await self.write(self._build_rebalance)

    async def fence_expired_forever(self) -> None:
        """The heartbeat manager: fence brokers whose sessions ran out, one write
        each. A controller that has just become active first gives every broker a
        fresh session, so a failover fences nobody who is alive."""
        was_active = False
        period = min(0.25, self.registry.session_timeout_s / 8)
        while True:
            await asyncio.sleep(period)
            active = self.queue.active
            if active and not was_active:
                self.registry.refresh_all()
            was_active = active
            if not active:
                continue
            for broker_id in self.registry.expired():
                self.timed_out_heartbeats += 1
                with contextlib.suppress(NotController, CommitTimeout, ControllerError):
                    await self.write(lambda b=broker_id: self.registry.build_fence_expired(b))

    def _build_rebalance(self) -> tuple[list[Any], None]:
        return partition_ops.build_rebalance(self.image), None


def fetch_problems(request: bpb.MetadataFetchRequest) -> list[str]:
    """Everything wrong with a MetadataFetch, found before its heartbeat is applied."""
    if (
        request.broker_id >= 0
        and request.fetch_offset >= 0
        and request.max_wait_ms >= 0
        and request.max_records >= 0
        and request.current_state in _STATE_NAMES
    ):
        return []
    problems = [
        f"{name} must not be negative, got {value}"
        for name, value in (
            ("broker_id", request.broker_id),
            ("fetch_offset", request.fetch_offset),
            ("max_wait_ms", request.max_wait_ms),
            ("max_records", request.max_records),
        )
        if value < 0
    ]
    if request.current_state not in _STATE_NAMES:
        problems.append(f"current_state {request.current_state} is not a broker state")
    return problems
