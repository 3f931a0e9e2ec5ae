"""The admin API and the broker lifecycle calls over gRPC: thin adapters.

Every controller serves both. Each call is checked for its cluster id, handed to
the `QuorumController` (quorum/controller/controller.py), and its refusals are
turned into a gRPC status carrying Kafka's error name: `ControllerError` as is,
`NotController` as NOT_CONTROLLER with the active controller's id and address
(so clients move at once), a commit that did not come in time as
REQUEST_TIMED_OUT. Per-item refusals are in the responses.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import grpc

from quorum.authz.controller_actions import filters_topics
from quorum.common.tls import principal_of
from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.controller import CommitTimeout, QuorumController
from quorum.controller.write_queue import NotController
from quorum.gen import admin_pb2 as api
from quorum.gen import admin_pb2_grpc as api_grpc
from quorum.gen import raft_pb2 as pb
from quorum.raft.voters import KRAFT_VERSION_DYNAMIC
from quorum.rpc.wire_errors import foreign_cluster_status, rich_status
from quorum.server.access import AccessControl, open_access
from quorum.server.kraft_upgrade import KRAFT_VERSION, KraftVersionChanges
from quorum.server.voter_changes import VoterChanges

T = TypeVar("T")

# Reads (and snapshot chunks) any controller answers from its committed image;
# every other call is the active controller's, and with an authorizer a standby
# redirects it before authorizing it: its image may not have the newest ACLs
# yet, and the decision is not its to make.
_SERVED_BY_ANY_CONTROLLER = frozenset(
    {
        "ListTopicsRequest",
        "DescribeTopicsRequest",
        "DescribeConfigsRequest",
        "DescribeAclsRequest",
        "DescribeClusterRequest",
        "FetchMetadataSnapshotRequest",
    }
)


class ControllerCalls:
    """What both servicers do around a call to the controller."""

    def __init__(
        self,
        controller: QuorumController,
        addresses: Mapping[int, str],
        access: AccessControl | None = None,
    ) -> None:
        self.controller = controller
        self.addresses = addresses  # live: follows the voter set (voters added later too)
        self.access = access or open_access()

    async def check(self, context: Any, cluster_id: str) -> None:
        """Operator tools need not send the cluster id; a wrong one is refused."""
        if cluster_id and cluster_id != self.controller.cluster_id:
            await context.abort_with_status(
                foreign_cluster_status(cluster_id, self.controller.cluster_id)
            )

    def not_controller(self, leader_id: int | None) -> grpc.Status:
        hint = {"leader_id": str(leader_id if leader_id is not None else -1)}
        where = "unknown"
        if leader_id is not None and leader_id in self.addresses:
            hint["leader_address"] = self.addresses[leader_id]
            where = f"controller {leader_id} at {self.addresses[leader_id]}"
        return rich_status(
            ApiError.NOT_CONTROLLER,
            f"controller {self.controller.node_id} is not the active controller; active: {where}",
            hint,
        )

    async def serve(self, context: Any, request: Any, action: Callable[[], Awaitable[T] | T]) -> T:
        """Check the cluster id, the caller's authorization (the principal of its
        certificate against the ACLs) and the request's bounds, run `action`, and
        turn its refusal into a status; nothing changes on a refusal. Listings
        leave out the topics the caller may not describe."""
        # Each step is awaited only when it can refuse: a broker's MetadataFetch
        # comes through here thousands of times a second.
        cluster_id = request.cluster_id
        if cluster_id and cluster_id != self.controller.cluster_id:
            await self.check(context, cluster_id)
        access = self.access
        if access.limiter.enabled:
            await access.throttle(context, request)
        if access.enabled:
            if type(request).__name__ not in _SERVED_BY_ANY_CONTROLLER:
                leader_id = self.controller.leader.leader_id
                if leader_id != self.controller.node_id:
                    await context.abort_with_status(self.not_controller(leader_id))
            await access.check(context, request)
        try:
            self.controller.admit(request)
            result = action()
            if inspect.isawaitable(result):
                result = await result
            if self.access.enabled and filters_topics(request):
                _leave_out_hidden(self.access, context, request, result)
            return result  # type: ignore[no-any-return]
        except ControllerError as err:
            await context.abort_with_status(rich_status(err.error, err.message))
        except NotController as err:
            await context.abort_with_status(self.not_controller(err.leader_id))
        except CommitTimeout as err:
            await context.abort_with_status(rich_status(ApiError.REQUEST_TIMED_OUT, str(err)))
        raise AssertionError("unreachable: abort_with_status raises")


def _leave_out_hidden(access: AccessControl, context: Any, request: Any, result: Any) -> None:
    names = [t.name for t in result.topics]
    visible = access.visible(context, request, names)
    if len(visible) < len(names):
        kept = [t for t in result.topics if t.name in visible]
        del result.topics[:]
        result.topics.extend(kept)


class AdminServicer(api_grpc.AdminServicer):
    """Protobuf in, a `QuorumController` call, protobuf out."""

    def __init__(
        self,
        calls: ControllerCalls,
        describe_quorum: Callable[[bool], pb.DescribeQuorumResponse],
        voter_changes: VoterChanges | None = None,
    ) -> None:
        self._calls = calls
        self._c = calls.controller
        self._describe_quorum = describe_quorum
        self._voter_changes = voter_changes

    def _serve(self, context: Any, request: Any, call: Callable[[Any], Any]) -> Awaitable[Any]:
        return self._calls.serve(context, request, lambda: call(request))

    # ------------------------------------------------------------------ writes

    async def CreateTopics(self, request: api.CreateTopicsRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.create_topics)

    async def DeleteTopics(self, request: api.DeleteTopicsRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.delete_topics)

    async def CreatePartitions(self, request: api.CreatePartitionsRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.create_partitions)

    async def IncrementalAlterConfigs(
        self, request: api.IncrementalAlterConfigsRequest, context: Any
    ) -> Any:
        return await self._serve(context, request, self._c.incremental_alter_configs)

    async def CreateAcls(self, request: api.CreateAclsRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.create_acls)

    async def DeleteAcls(self, request: api.DeleteAclsRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.delete_acls)

    async def ElectLeaders(self, request: api.ElectLeadersRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.elect_leaders)

    async def AlterPartition(self, request: api.AlterPartitionRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.alter_partition)

    async def AllocateProducerIds(
        self, request: api.AllocateProducerIdsRequest, context: Any
    ) -> Any:
        return await self._serve(context, request, self._c.allocate_producer_ids)

    async def UpdateFeatures(self, request: api.UpdateFeaturesRequest, context: Any) -> Any:
        changes = self._voter_changes
        if isinstance(changes, KraftVersionChanges) and any(
            u.feature == KRAFT_VERSION for u in request.updates
        ):  # the Raft layer's feature (KIP-853), not a metadata record
            return await self._serve(context, request, changes.update_features)
        return await self._serve(context, request, self._c.update_features)

    async def UnregisterBroker(self, request: api.UnregisterBrokerRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.unregister_broker)

    async def AddRaftVoter(self, request: api.AddRaftVoterRequest, context: Any) -> Any:
        return await self._serve(context, request, self._voter_change("add"))

    async def RemoveRaftVoter(self, request: api.RemoveRaftVoterRequest, context: Any) -> Any:
        return await self._serve(context, request, self._voter_change("remove"))

    async def UpdateRaftVoter(self, request: api.UpdateRaftVoterRequest, context: Any) -> Any:
        principal = principal_of(context)
        update = self._voter_change("update")
        return await self._serve(context, request, lambda r: update((r, principal)))

    def _voter_change(self, kind: str) -> Callable[[Any], Any]:
        changes = self._voter_changes
        if changes is None:

            def unsupported(_: Any) -> Any:
                raise ControllerError(ApiError.UNSUPPORTED_VERSION, "no voter changes here")

            return unsupported
        if kind == "update":
            return lambda args: changes.update(*args)
        return changes.add if kind == "add" else changes.remove

    # ------------------------------------------------------------------- reads

    async def ListTopics(self, request: api.ListTopicsRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.list_topics)

    async def DescribeTopics(self, request: api.DescribeTopicsRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.describe_topics)

    async def DescribeConfigs(self, request: api.DescribeConfigsRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.describe_configs)

    async def DescribeAcls(self, request: api.DescribeAclsRequest, context: Any) -> Any:
        return await self._serve(context, request, self._c.describe_acls)

    async def DescribeCluster(self, request: api.DescribeClusterRequest, context: Any) -> Any:
        return await self._calls.serve(context, request, self._describe_cluster)

    def _describe_cluster(self) -> api.DescribeClusterResponse:
        """The image's features, with kraft.version as the Raft layer has it."""
        reply = self._c.describe_cluster()
        changes = self._voter_changes
        if isinstance(changes, KraftVersionChanges):
            kept = [f for f in reply.features if f.name != KRAFT_VERSION]
            del reply.features[:]
            reply.features.extend(kept)
            if changes.kraft_version:
                reply.features.add(name=KRAFT_VERSION, level=changes.kraft_version)
            for supported in reply.supported_features:
                if supported.name == KRAFT_VERSION:
                    supported.max_level = KRAFT_VERSION_DYNAMIC
        return reply

    async def DescribeQuorum(self, request: pb.DescribeQuorumRequest, context: Any) -> Any:
        await self._calls.check(context, request.cluster_id)
        await self._calls.access.throttle(context, request, admin=True)
        await self._calls.access.check(context, request)
        return self._describe_quorum(request.include_image_digest)
