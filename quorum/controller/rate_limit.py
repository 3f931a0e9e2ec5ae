"""Per-client rate limits on the admin API: one token bucket per client.

Kafka throttles clients by quotas (KIP-599's `controller_mutation_rate`); here a
controller gives each client (its principal, or its host when anonymous) `rate`
admin calls a second with bursts of `burst`, and refuses the rest with
THROTTLING_QUOTA_EXCEEDED and the time until the next call would be admitted.
Pure: the clock is passed in. The table of clients is bounded (least recently
seen evicted first), so a flood from many addresses cannot grow it without end.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

MAX_CLIENTS = 10_000


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at_s: float


class RateLimiter:
    """`admit(client, now_s)` is 0 when the call may go ahead, else the seconds
    until it could; `rate` 0 admits everything."""

    def __init__(self, rate: int, burst: int = 0, max_clients: int = MAX_CLIENTS) -> None:
        self.rate = rate
        self.burst = burst or max(1, rate)
        self._max_clients = max_clients
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def admit(self, client: str, now_s: float) -> float:
        if not self.enabled:
            return 0.0
        bucket = self._buckets.pop(client, None)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now_s)
        else:
            elapsed = max(0.0, now_s - bucket.at_s)
            bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.rate)
            bucket.at_s = now_s
        self._buckets[client] = bucket  # most recently seen last
        if len(self._buckets) > self._max_clients:
            self._buckets.popitem(last=False)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate


__all__ = ["RateLimiter"]
