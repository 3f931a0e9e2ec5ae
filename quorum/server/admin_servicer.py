"""The admin API and the broker lifecycle calls over gRPC.

Every controller serves both. Writes go through the active controller's write
queue; on any other controller they fail with NOT_CONTROLLER and the active
controller's id and address in the rich status, so clients move at once. Reads
answer from this controller's committed image. Call-level refusals (wrong
cluster id, an unregistered broker, ...) are a gRPC status carrying the Kafka
error name; per-item refusals are in the response.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import grpc

from quorum.common.wire_errors import foreign_cluster_status, rich_status
from quorum.controller import cluster_ops, partition_ops, topic_ops
from quorum.controller import config_schema as cs
from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.broker_registry import BrokerRegistry
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.quorum_controller import NotController, WriteQueue
from quorum.controller.request_limits import RequestLimits
from quorum.controller.validation import check_request
from quorum.gen import admin_pb2 as api
from quorum.gen import admin_pb2_grpc as api_grpc
from quorum.gen import raft_pb2 as pb
from quorum.raft.node import NotLeaderError
from quorum.server.commit_clock import CommitClock
from quorum.server.driver import ProposalFailed, RaftDriver
from quorum.server.transport import describe_quorum

T = TypeVar("T")

COMMIT_TIMEOUT_S = 30.0


class MetadataController:
    """The parts the servicers share: image, write queue, broker sessions."""

    def __init__(
        self,
        driver: RaftDriver,
        image: MetadataImage,
        cluster_id: str,
        addresses: Mapping[int, str],
        rng: random.Random | None = None,
        session_timeout_s: float = 9.0,
        limits: RequestLimits | None = None,
    ) -> None:
        self.driver = driver
        self.limits = limits or RequestLimits()
        self.image = image
        self.cluster_id = cluster_id
        self.addresses = dict(addresses)
        self.rng = rng or random.Random()
        self.registry = BrokerRegistry(image, session_timeout_s)
        self.commits = CommitClock()
        driver.on_commit.append(self.commits.on_commit)
        self.queue = WriteQueue(
            image,
            driver.config.node_id,
            self._propose,
            self._ready,
            lambda: driver.core.leader_id,
        )
        self.errors = 0

    def _ready(self) -> bool:
        core = self.driver.core
        return core.leader_committed_epoch and self.image.applied_offset >= core.high_watermark

    async def _propose(self, records: list[bytes]) -> object:
        return await asyncio.wait_for(self.driver.propose(records), COMMIT_TIMEOUT_S)

    def not_controller(self, leader_id: int | None) -> grpc.Status:
        hint = {"leader_id": str(leader_id if leader_id is not None else -1)}
        where = "unknown"
        if leader_id is not None and leader_id in self.addresses:
            hint["leader_address"] = self.addresses[leader_id]
            where = f"controller {leader_id} at {self.addresses[leader_id]}"
        return rich_status(
            ApiError.NOT_CONTROLLER,
            f"controller {self.driver.config.node_id} is not the active controller; "
            f"active: {where}",
            hint,
        )

    async def check(self, context: Any, cluster_id: str) -> None:
        """Operator tools need not send the cluster id; a wrong one is refused."""
        if cluster_id and cluster_id != self.cluster_id:
            await context.abort_with_status(foreign_cluster_status(cluster_id, self.cluster_id))

    async def admit(self, context: Any, request: Any) -> None:
        """The edge: the cluster id, then the request's bounds, before it waits for
        the write queue or reads the image; a refusal changes nothing."""
        await self.check(context, request.cluster_id)
        try:
            check_request(request, self.limits)
        except ControllerError as err:
            self.errors += 1
            await context.abort_with_status(rich_status(err.error, err.message))

    async def write(
        self, context: Any, cluster_id: str, build: Callable[[], tuple[list[Any], T]]
    ) -> T:
        await self.check(context, cluster_id)
        try:
            return await self.queue.submit(build)
        except ControllerError as err:
            self.errors += 1
            await context.abort_with_status(rich_status(err.error, err.message))
        except NotController as err:
            await context.abort_with_status(self.not_controller(err.leader_id))
        except (NotLeaderError, ProposalFailed):
            await context.abort_with_status(self.not_controller(self.driver.core.leader_id))
        except TimeoutError:
            await context.abort_with_status(
                rich_status(
                    ApiError.REQUEST_TIMED_OUT,
                    f"not committed within {COMMIT_TIMEOUT_S:.0f}s; it may still commit",
                )
            )
        raise AssertionError("unreachable: abort_with_status raises")

    async def rebalance_forever(self) -> None:
        """`auto.leader.rebalance.enable`: every `leader.imbalance.check.interval.seconds`
        the active controller moves leadership back to preferred replicas where a
        broker's imbalance passes `leader.imbalance.per.broker.percentage`."""
        while True:
            cluster = self.image.config(cs.CLUSTER, "")
            await asyncio.sleep(int(cluster.get("leader.imbalance.check.interval.seconds", "300")))
            if not self.queue.active:
                continue
            with contextlib.suppress(NotController, NotLeaderError, ProposalFailed, TimeoutError):
                await self.queue.submit(self._build_rebalance)

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
                with contextlib.suppress(
                    NotController, NotLeaderError, ProposalFailed, TimeoutError
                ):
                    await self.queue.submit(
                        lambda b=broker_id: self.registry.build_fence_expired(b)
                    )

    def _build_rebalance(self) -> tuple[list[Any], None]:
        return partition_ops.build_rebalance(self.image), None

    def offset_hint(self) -> int:
        """The broker epoch a new registration gets: at least the next log offset."""
        return self.driver.core.log.end_offset


class AdminServicer(api_grpc.AdminServicer):
    def __init__(self, controller: MetadataController) -> None:
        self.c = controller

    # ------------------------------------------------------------------ writes

    async def CreateTopics(self, request: api.CreateTopicsRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        image, rng, limits = self.c.image, self.c.rng, self.c.limits
        return await self.c.write(
            context,
            request.cluster_id,
            lambda: topic_ops.build_create_topics(image, request, rng, limits),
        )

    async def DeleteTopics(self, request: api.DeleteTopicsRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        image = self.c.image
        return await self.c.write(
            context, request.cluster_id, lambda: topic_ops.build_delete_topics(image, request)
        )

    async def CreatePartitions(self, request: api.CreatePartitionsRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        image, rng, limits = self.c.image, self.c.rng, self.c.limits
        return await self.c.write(
            context,
            request.cluster_id,
            lambda: topic_ops.build_create_partitions(image, request, rng, limits),
        )

    async def IncrementalAlterConfigs(
        self, request: api.IncrementalAlterConfigsRequest, context: Any
    ) -> Any:
        await self.c.admit(context, request)
        image = self.c.image
        return await self.c.write(
            context, request.cluster_id, lambda: cluster_ops.build_alter_configs(image, request)
        )

    async def CreateAcls(self, request: api.CreateAclsRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        image, rng = self.c.image, self.c.rng
        return await self.c.write(
            context, request.cluster_id, lambda: cluster_ops.build_create_acls(image, request, rng)
        )

    async def DeleteAcls(self, request: api.DeleteAclsRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        image = self.c.image
        return await self.c.write(
            context, request.cluster_id, lambda: cluster_ops.build_delete_acls(image, request)
        )

    async def ElectLeaders(self, request: api.ElectLeadersRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        image = self.c.image
        return await self.c.write(
            context, request.cluster_id, lambda: partition_ops.build_elect_leaders(image, request)
        )

    async def AlterPartition(self, request: api.AlterPartitionRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        image = self.c.image
        return await self.c.write(
            context, request.cluster_id, lambda: partition_ops.build_alter_partition(image, request)
        )

    async def AllocateProducerIds(
        self, request: api.AllocateProducerIdsRequest, context: Any
    ) -> Any:
        await self.c.admit(context, request)
        image = self.c.image
        return await self.c.write(
            context,
            request.cluster_id,
            lambda: cluster_ops.build_allocate_producer_ids(image, request),
        )

    async def UpdateFeatures(self, request: api.UpdateFeaturesRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        image = self.c.image
        return await self.c.write(
            context, request.cluster_id, lambda: cluster_ops.build_update_features(image, request)
        )

    async def UnregisterBroker(self, request: api.UnregisterBrokerRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        registry = self.c.registry
        await self.c.write(
            context, request.cluster_id, lambda: registry.build_unregister(request.broker_id)
        )
        return api.UnregisterBrokerResponse()

    # ------------------------------------------------------------------- reads

    async def ListTopics(self, request: api.ListTopicsRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        return topic_ops.list_topics(self.c.image)

    async def DescribeTopics(self, request: api.DescribeTopicsRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        return topic_ops.describe_topics(self.c.image, request)

    async def DescribeConfigs(self, request: api.DescribeConfigsRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        return cluster_ops.describe_configs(self.c.image, request)

    async def DescribeAcls(self, request: api.DescribeAclsRequest, context: Any) -> Any:
        await self.c.admit(context, request)
        return cluster_ops.describe_acls(self.c.image, request)

    async def DescribeCluster(self, request: api.DescribeClusterRequest, context: Any) -> Any:
        await self.c.check(context, request.cluster_id)
        image = self.c.image
        leader = self.c.driver.core.leader_id
        response = api.DescribeClusterResponse(
            cluster_id=self.c.cluster_id,
            controller_id=leader if leader is not None else -1,
            controller_address=self.c.addresses.get(leader, "") if leader is not None else "",
            metadata_offset=image.applied_offset,
        )
        registry = self.c.registry
        sessions, now, active = registry.sessions, registry.clock(), self.c.queue.active
        for broker_id in sorted(image.brokers):
            b = image.brokers[broker_id]
            host, port = (b.endpoints[0][1], b.endpoints[0][2]) if b.endpoints else ("", 0)
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
            )
            session = sessions.get(broker_id) if active else None
            if session is not None:
                described = response.brokers[-1]
                described.last_heartbeat_age_ms = int((now - session.last_heartbeat) * 1000)
                described.metadata_offset = session.metadata_offset
                described.reported_state = session.reported_state
        for name, level in sorted(image.features.items()):
            response.features.add(name=name, level=level)
        return response

    async def DescribeQuorum(self, request: pb.DescribeQuorumRequest, context: Any) -> Any:
        await self.c.check(context, request.cluster_id)
        return describe_quorum(self.c.driver, self.c.addresses, request.include_image_digest)
