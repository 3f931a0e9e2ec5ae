"""Authorization of grpcio's own servicers on a controller's port: the standard
health service and server reflection.

They are not ours, so they cannot call `AccessControl` from inside; this server
interceptor wraps their handlers instead (the Raft, QuorumLog, Admin and broker
servicers authorize themselves). The rules, in Kafka's spirit:

- ``grpc.health.v1.Health`` (Check, Watch) needs no ACL, as Kafka's ApiVersions
  needs none: it tells SERVING or NOT_SERVING and nothing else, the kubelet and
  load balancers must be able to ask it, and under mTLS the handshake has
  already required a certificate from the CA before any call.
- ``grpc.reflection.v1alpha.ServerReflection`` (ServerReflectionInfo) needs
  DESCRIBE on the CLUSTER when the authorizer is on (super users pass), as
  DescribeCluster-like metadata about the cluster does: it lists every service
  and hands out the schemas. A denial is PERMISSION_DENIED with Kafka's
  CLUSTER_AUTHORIZATION_FAILED, counted and logged by `AccessControl` like any
  other, before the servicer reads a single request.

Any other service of grpcio that appears later is refused unless a rule here
names it (closed by default, like `controller_actions.requirements`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from grpc_health.v1 import health
from grpc_reflection.v1alpha import reflection

from quorum.authz.authorizer import Operation, Requirement, cluster
from quorum.common.guarded_handlers import guarded_handler
from quorum.server.access import AccessControl

HEALTH_SERVICE = health.SERVICE_NAME
REFLECTION_SERVICE = reflection.SERVICE_NAME
# service -> what each of its calls needs (an empty list: nothing).
RULES: dict[str, list[Requirement]] = {
    HEALTH_SERVICE: [],
    REFLECTION_SERVICE: [Requirement((cluster(Operation.DESCRIBE),))],
}
_GRPC_PACKAGE = "grpc."


class AuthorizeStandardServices(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Puts `RULES` in front of grpcio's servicers; our own pass untouched."""

    def __init__(self, access: AccessControl) -> None:
        self._access = access

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        service, _, method = details.method.lstrip("/").partition("/")
        if handler is None or not service.startswith(_GRPC_PACKAGE):
            return handler
        needs = RULES.get(service, [Requirement((cluster(Operation.CLUSTER_ACTION),))])
        if not needs:
            return handler
        return _guarded(handler, self._access, method, needs)


def _guarded(
    handler: grpc.RpcMethodHandler, access: AccessControl, kind: str, needs: list[Requirement]
) -> grpc.RpcMethodHandler:
    """The same handler, the caller authorized before the servicer runs. On a
    client stream, once its first request has arrived: a stream refused before
    the server read anything reached clients as INTERNAL ("Internal error from
    Core") instead of the denial, when the refusal overtook the client's first
    message (found by fuzzing)."""

    async def authorize(request: Any, context: Any) -> None:
        await access.check_call(context, kind, needs)

    return guarded_handler(handler, authorize, handler.request_deserializer, first_only=True)


__all__ = ["RULES", "AuthorizeStandardServices"]
