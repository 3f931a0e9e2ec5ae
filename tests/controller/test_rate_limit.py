"""The per-client token buckets behind `admin.request.rate.per.client`."""

from __future__ import annotations

from quorum.controller.rate_limit import RateLimiter


def test_a_zero_rate_admits_everything() -> None:
    limiter = RateLimiter(0)
    assert not limiter.enabled
    assert all(limiter.admit("c", 0.0) == 0.0 for _ in range(10_000))


def test_a_burst_then_the_rate() -> None:
    limiter = RateLimiter(rate=10, burst=3)
    assert [limiter.admit("c", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = limiter.admit("c", 0.0)
    assert abs(wait - 0.1) < 1e-9  # one token every 100 ms
    assert limiter.admit("c", 0.05) > 0  # half a token is not enough
    assert limiter.admit("c", 0.1) == 0.0
    assert limiter.admit("c", 10.0) == 0.0  # refilled, but only up to the burst
    assert [limiter.admit("c", 10.0) for _ in range(3)] == [0.0, 0.0, 0.1]


def test_clients_have_their_own_buckets() -> None:
    limiter = RateLimiter(rate=1)
    assert limiter.admit("User:CN=alice", 0.0) == 0.0
    assert limiter.admit("User:CN=alice", 0.0) > 0
    assert limiter.admit("User:CN=bob", 0.0) == 0.0
    assert limiter.admit("host:10.0.0.7", 0.0) == 0.0


def test_the_client_table_is_bounded() -> None:
    limiter = RateLimiter(rate=1, max_clients=100)
    for i in range(10_000):
        limiter.admit(f"host:{i}", 0.0)
    assert len(limiter._buckets) == 100
    # An evicted client starts again with a full bucket: the bound costs
    # precision for floods from many addresses, never memory.
    assert limiter.admit("host:0", 0.0) == 0.0
