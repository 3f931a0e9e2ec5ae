"""Raft requests refused because their sender claims what it cannot be.

Three kinds, counted in `quorum_raft_refused_requests_total{request,reason}` and
logged at ERROR (rate-limited: a forger cannot fill the log):
- `epoch_jump`: the core refused an epoch more than
  `controller.quorum.max.epoch.jump` above its last log entry (`RequestRefused`);
- `identity`: under mTLS, the claimed voter id is not the one bound to the
  peer's certificate (`quorum.server.voter_identity`).
- `malformed_record` (request `FetchResponse`): a fetch answer held a
  VotersRecord or KRaftVersionRecord that does not decode; none of it was kept.
Any is a forged or misconfigured peer, never normal operation: an operator
alerts on any increase.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from quorum.common.rate_limited_log import RateLimitedLog

log = logging.getLogger(__name__)

EPOCH_JUMP = "epoch_jump"
IDENTITY = "identity"


class RefusedRequests(Collector):
    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._log = RateLimitedLog(log, logging.ERROR)
        # The core's reason for refusing the latest request of each claimed sender,
        # for the servicer's answer (taken with `reason_for`).
        self._reasons: dict[int, str] = {}

    def refuse(self, request: str, reason: str, line: str, source: int | None = None) -> None:
        self.counts[(request, reason)] += 1
        self._log(f"refused {request}: {line}")
        if source is not None:
            self._reasons[source] = line

    def reason_for(self, source: int) -> str | None:
        return self._reasons.pop(source, None)

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "quorum_raft_refused_requests",
            "Raft requests refused as forged or misdirected, by request and reason "
            "(epoch_jump: beyond controller.quorum.max.epoch.jump; identity: the claimed "
            "voter is not the peer's certificate).",
            labels=["request", "reason"],
        )
        for (request, reason), count in sorted(self.counts.items()):
            family.add_metric([request, reason], count)
        yield family
