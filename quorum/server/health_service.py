"""The standard gRPC health service of a controller, with its List call.

grpcio's servicer implements Check and Watch but not List (added to the
protocol later): its generated stub logs a NotImplementedError traceback per
call, so a client calling it in a loop fills the log (found by fuzzing). List
answers a snapshot of every service's status, as the protocol asks.
"""

from __future__ import annotations

from typing import Any

from grpc_health.v1 import health, health_pb2


class QuorumHealth(health.aio.HealthServicer):  # type: ignore[misc]
    """Check, Watch and List; the statuses are set by `QuorumNode`."""

    def __init__(self) -> None:
        super().__init__()
        self._statuses: dict[str, int] = {"": health_pb2.HealthCheckResponse.SERVING}

    async def set(self, service: str, status: int) -> None:
        await super().set(service, status)
        self._statuses[service] = status

    async def List(
        self, request: health_pb2.HealthListRequest, context: Any
    ) -> health_pb2.HealthListResponse:
        reply = health_pb2.HealthListResponse()
        for service, status in sorted(self._statuses.items()):
            reply.statuses[service].status = status  # type: ignore[assignment]
        return reply


__all__ = ["QuorumHealth"]
