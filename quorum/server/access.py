"""Authorization and admin rate limits on the wire: the caller's principal and
host from the gRPC context, the decision from `quorum.controller.authorizer`
(and `quorum.controller.rate_limit`), the refusal as a status.

Every admin and broker call passes here from `ControllerCalls.serve`, every Raft
and QuorumLog call from its servicer, before anything is read or changed. A
denial is PERMISSION_DENIED with Kafka's error name (TOPIC_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED), counted in
`quorum_controller_authorization_failures_total{error,request}` and logged with
the principal (at most `LOG_LINES_PER_S` lines a second, the rest counted, so a
hostile client cannot fill the log).

Admin calls (the Admin service, but for the brokers' CLUSTER_ACTION calls
AlterPartition and AllocateProducerIds) are also rate limited per client when
`admin.request.rate.per.client` is set: over it, RESOURCE_EXHAUSTED with
Kafka's THROTTLING_QUOTA_EXCEEDED and `throttle_time_ms` in the details,
counted in `quorum_controller_throttled_requests_total{request}`.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from quorum.common.rate_limited_log import RateLimitedLog
from quorum.common.tls import ANONYMOUS, peer_host, principal_of
from quorum.common.wire_errors import rich_status
from quorum.controller.acl_actions import Requirement, filters_topics, requirements, topic
from quorum.controller.api_errors import ApiError
from quorum.controller.authorizer import AuthorizerConfig, Operation, authorize
from quorum.controller.metadata_image import AclEntry
from quorum.controller.rate_limit import RateLimiter

log = logging.getLogger(__name__)

LOG_LINES_PER_S = 5
ADMIN_PACKAGE = "quorum.admin.v1"
_UNTHROTTLED = frozenset({"AlterPartitionRequest", "AllocateProducerIdsRequest"})


class AccessControl(Collector):
    """The authorizer as the servicers use it, and its metrics."""

    def __init__(
        self,
        config: AuthorizerConfig,
        acls: Callable[[], Iterable[AclEntry]],
        topic_name_of: Callable[[str], str | None],
        limiter: RateLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._acls = acls
        self._topic_name_of = topic_name_of
        self.limiter = limiter or RateLimiter(0)
        self._clock = clock
        self.denials: collections.Counter[tuple[str, str]] = collections.Counter()
        self.throttled: collections.Counter[str] = collections.Counter()
        self._log = RateLimitedLog(log, logging.WARNING, LOG_LINES_PER_S)

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    async def check(self, context: Any, request: Any) -> None:
        """Abort the call (PERMISSION_DENIED) unless the caller may make it."""
        if not self.config.enabled:
            return
        principal = principal_of(context)
        if principal in self.config.super_users:
            return
        needs = requirements(request, self._topic_name_of)
        await self._require(context, type(request).__name__.removesuffix("Request"), needs)

    async def check_call(self, context: Any, kind: str, needs: list[Requirement]) -> None:
        """Abort the call `kind` (PERMISSION_DENIED) unless every one of `needs` is
        met: for calls whose requests are not ours (server reflection)."""
        if self.config.enabled and principal_of(context) not in self.config.super_users:
            await self._require(context, kind, needs)

    async def _require(self, context: Any, kind: str, needs: list[Requirement]) -> None:
        principal, host = principal_of(context), peer_host(context)
        acls = list(self._acls())
        for need in needs:
            decision = None
            for action in need.alternatives:
                decision = authorize(self.config, acls, principal, host, action)
                if decision.allowed:
                    break
            assert decision is not None
            if not decision.allowed:
                await self._deny(context, kind, need, principal, host, decision.reason)

    async def throttle(self, context: Any, request: Any, admin: bool = False) -> None:
        """Abort an admin call (RESOURCE_EXHAUSTED) past its client's rate; a call
        is an admin call when its request is the Admin service's, or `admin`."""
        if not self.limiter.enabled:
            return
        kind = type(request).__name__
        if not admin and request.DESCRIPTOR.file.package != ADMIN_PACKAGE:
            return
        if kind in _UNTHROTTLED:
            return
        principal = principal_of(context)
        client = principal if principal != ANONYMOUS else f"host:{peer_host(context)}"
        wait_s = self.limiter.admit(client, self._clock())
        if wait_s <= 0:
            return
        name = kind.removesuffix("Request")
        self.throttled[name] += 1
        wait_ms = max(1, int(wait_s * 1000))
        await context.abort_with_status(
            rich_status(
                ApiError.THROTTLING_QUOTA_EXCEEDED,
                f"{client} is over admin.request.rate.per.client "
                f"({self.limiter.rate}/s); retry in {wait_ms} ms",
                {"throttle_time_ms": str(wait_ms)},
            )
        )

    def visible(self, context: Any, request: Any, topic_names: Iterable[str]) -> set[str]:
        """The topics among `topic_names` the caller may DESCRIBE (for listings)."""
        names = set(topic_names)
        if not self.config.enabled or not filters_topics(request):
            return names
        principal = principal_of(context)
        if principal in self.config.super_users:
            return names
        host, acls = peer_host(context), list(self._acls())
        return {
            n
            for n in names
            if authorize(self.config, acls, principal, host, topic(n, Operation.DESCRIBE)).allowed
        }

    async def _deny(
        self, context: Any, kind: str, need: Requirement, principal: str, host: str, why: str
    ) -> None:
        error = need.error
        self.denials[(error.name, kind)] += 1
        self._log(f"denied {kind} to {principal} from {host}: {why} ({error.name})")
        await context.abort_with_status(
            rich_status(error, f"{principal} is not authorized: {why}", {"principal": principal})
        )

    def collect(self) -> Iterator[CounterMetricFamily]:
        throttled = CounterMetricFamily(
            "quorum_controller_throttled_requests",
            "Admin calls refused with THROTTLING_QUOTA_EXCEEDED, by request.",
            labels=["request"],
        )
        for kind, count in sorted(self.throttled.items()):
            throttled.add_metric([kind], count)
        yield throttled
        family = CounterMetricFamily(
            "quorum_controller_authorization_failures",
            "Calls refused by the authorizer (PERMISSION_DENIED), by Kafka's error name "
            "and request.",
            labels=["error", "request"],
        )
        for (error, kind), count in sorted(self.denials.items()):
            family.add_metric([error, kind], count)
        yield family


def open_access() -> AccessControl:
    """No authorizer: every call is allowed (plaintext `make run`, tests)."""
    return AccessControl(AuthorizerConfig(), list, lambda _: None)


__all__ = ["AccessControl", "open_access"]
