"""Authorization on the wire: the caller's principal and host from the gRPC
context, the decision from `quorum.controller.authorizer`, the refusal as a status.

Every admin and broker call passes here from `ControllerCalls.serve`, every Raft
and QuorumLog call from its servicer, before anything is read or changed. A
denial is PERMISSION_DENIED with Kafka's error name (TOPIC_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED), counted in
`quorum_controller_authorization_failures_total{error,request}` and logged with
the principal (at most `LOG_LINES_PER_S` lines a second, the rest counted, so a
hostile client cannot fill the log).
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from quorum.common.tls import peer_host, principal_of
from quorum.common.wire_errors import rich_status
from quorum.controller.acl_actions import Requirement, filters_topics, requirements, topic
from quorum.controller.authorizer import AuthorizerConfig, Operation, authorize
from quorum.controller.metadata_image import AclEntry

log = logging.getLogger(__name__)

LOG_LINES_PER_S = 5


class AccessControl(Collector):
    """The authorizer as the servicers use it, and its metrics."""

    def __init__(
        self,
        config: AuthorizerConfig,
        acls: Callable[[], Iterable[AclEntry]],
        topic_name_of: Callable[[str], str | None],
    ) -> None:
        self.config = config
        self._acls = acls
        self._topic_name_of = topic_name_of
        self.denials: collections.Counter[tuple[str, str]] = collections.Counter()
        self._log_second = 0
        self._logged = 0
        self._unlogged = 0

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
        host = peer_host(context)
        acls = list(self._acls())
        for need in requirements(request, self._topic_name_of):
            decision = None
            for action in need.alternatives:
                decision = authorize(self.config, acls, principal, host, action)
                if decision.allowed:
                    break
            assert decision is not None
            if not decision.allowed:
                await self._deny(context, request, need, principal, host, decision.reason)

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
        self, context: Any, request: Any, need: Requirement, principal: str, host: str, why: str
    ) -> None:
        kind = type(request).__name__.removesuffix("Request")
        error = need.error
        self.denials[(error.name, kind)] += 1
        self._log(f"denied {kind} to {principal} from {host}: {why} ({error.name})")
        await context.abort_with_status(
            rich_status(error, f"{principal} is not authorized: {why}", {"principal": principal})
        )

    def _log(self, line: str) -> None:
        second = int(time.monotonic())
        if second != self._log_second:
            if self._unlogged:
                log.warning("%d more authorization failures not logged", self._unlogged)
            self._log_second, self._logged, self._unlogged = second, 0, 0
        if self._logged < LOG_LINES_PER_S:
            self._logged += 1
            log.warning("%s", line)
        else:
            self._unlogged += 1

    def collect(self) -> Iterator[CounterMetricFamily]:
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
