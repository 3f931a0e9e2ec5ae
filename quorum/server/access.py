"""Authorization and admin rate limits on the wire: the caller's principal and
host from the gRPC context, the decision from `quorum.authz.authorizer` (and
`quorum.controller.rate_limit`), the refusal as a status. Nothing is decided
here: this module only adapts gRPC calls to the `Authorizer`'s questions.

Every admin and broker call passes here from `ControllerCalls.serve`, every Raft
and QuorumLog call from its servicer, before anything is read or changed. A
denial is PERMISSION_DENIED with Kafka's error name (TOPIC_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED), counted in
`quorum_controller_authorization_failures_total{error,request}` and logged with
the principal (at most `LOG_LINES_PER_S` lines a second, the rest counted, so a
hostile client cannot fill the log).

A broker that forwards a Kafka client's admin request (KIP-590) names the
client in the call's metadata: `kafka-forwarded-principal-bin` (UTF-8) and
`kafka-forwarded-host`. Those are honoured only from a caller that is itself
allowed CLUSTER_ACTION on the cluster (a super user, or a broker's certificate
with that ACL), exactly as Kafka honours an EnvelopeRequest only from a broker;
anyone else asserting a principal is refused with CLUSTER_AUTHORIZATION_FAILED
before the request is looked at. The forwarded principal and host then stand in
for the caller's in every decision, so the controller decides as if the client
had come itself. Without an authorizer nothing is decided and the keys are moot.

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

from quorum.authz.authorizer import (
    AclRule,
    Authorizer,
    AuthorizerConfig,
    Operation,
    Requirement,
    cluster,
)
from quorum.authz.controller_actions import filters_topics, requirements
from quorum.common.rate_limited_log import RateLimitedLog
from quorum.common.tls import (
    ANONYMOUS,
    FORWARDED_HOST,
    FORWARDED_PRINCIPAL,
    peer_host,
    principal_of,
)
from quorum.controller.api_errors import ApiError
from quorum.controller.rate_limit import RateLimiter
from quorum.rpc.wire_errors import rich_status

log = logging.getLogger(__name__)

LOG_LINES_PER_S = 5
ADMIN_PACKAGE = "quorum.admin.v1"
_UNTHROTTLED = frozenset({"AlterPartitionRequest", "AllocateProducerIdsRequest"})


def forwarded(context: Any) -> tuple[str, str] | None:
    """The client a forwarding broker names in the call's metadata, if any."""
    principal: str | None = None
    host = ""
    try:
        pairs = context.invocation_metadata() or ()
    except Exception:  # a context without a transport (never on a real call)
        return None
    for key, value in pairs:
        if key == FORWARDED_PRINCIPAL:
            raw = value if isinstance(value, bytes) else str(value).encode()
            principal = raw.decode("utf-8", "replace")
        elif key == FORWARDED_HOST:
            host = str(value)
    return None if principal is None else (principal, host)


class AccessControl(Collector):
    """The authorizer as the servicers use it, and its metrics."""

    def __init__(
        self,
        config: AuthorizerConfig,
        acls: Callable[[], Iterable[AclRule]],
        topic_name_of: Callable[[str], str | None],
        limiter: RateLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.authorizer = Authorizer(config, acls)
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
        """Abort the call (PERMISSION_DENIED) unless the caller (or the client a
        broker forwards for) may make it."""
        if not self.config.enabled:
            return
        kind = type(request).__name__.removesuffix("Request")
        principal, host = await self._caller(context, kind)
        if self.authorizer.is_super_user(principal):
            return
        needs = requirements(request, self._topic_name_of)
        await self._require(context, kind, needs, principal, host)

    async def check_call(self, context: Any, kind: str, needs: list[Requirement]) -> None:
        """Abort the call `kind` (PERMISSION_DENIED) unless every one of `needs` is
        met: for calls whose requests are not ours (server reflection)."""
        if self.config.enabled:
            await self._require(context, kind, needs, principal_of(context), peer_host(context))

    async def _caller(self, context: Any, kind: str) -> tuple[str, str]:
        """The principal and host to decide for: the forwarded client's when a
        broker (CLUSTER_ACTION on the cluster) forwards, else the caller's own."""
        direct, direct_host = principal_of(context), peer_host(context)
        claimed = forwarded(context)
        if claimed is None:
            return direct, direct_host
        if not self.authorizer.may_forward(direct, direct_host):
            await self._deny(
                context,
                kind,
                Requirement((cluster(Operation.CLUSTER_ACTION),)),
                direct,
                direct_host,
                f"only a broker (CLUSTER_ACTION on the cluster) may forward a request "
                f"for another principal ({claimed[0]})",
            )
        return claimed[0], claimed[1] or direct_host

    async def _require(
        self, context: Any, kind: str, needs: list[Requirement], principal: str, host: str
    ) -> None:
        unmet = self.authorizer.first_unmet(principal, host, needs)
        if unmet is not None:
            need, decision = unmet
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
        # A forwarded client counts as itself only when its broker may forward
        # (else a caller could dodge its limit by naming a new principal each time).
        principal, host = principal_of(context), peer_host(context)
        claimed = forwarded(context)
        if claimed is not None and self.authorizer.may_forward(principal, host):
            principal, host = claimed[0], claimed[1] or host
        client = principal if principal != ANONYMOUS else f"host:{host}"
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
        claimed = forwarded(context)  # verified by `check` before any listing is made
        principal, host = claimed or (principal_of(context), peer_host(context))
        return self.authorizer.visible_topics(principal, host or peer_host(context), names)

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


__all__ = ["AccessControl", "forwarded", "open_access"]
