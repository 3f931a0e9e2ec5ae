"""The clocks every process reads, in one place (and injectable where it matters).

`wall_clock_ms` is the time of day, for what must be compared across processes
(a batch's append time, a broker's apply time). `monotonic_ms` never jumps, but
is anchored to the wall clock at start-up, so a timestamp taken from it still
reads as wall-clock time to analytics.
"""

from __future__ import annotations

import time

_WALL_ANCHOR_NS = time.time_ns() - time.monotonic_ns()


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Monotonic, but anchored to the wall clock at start-up: timeouts never jump,
    and the append time the Raft core stamps on each batch reads as wall-clock
    time, so analytics can compare it with other processes' clocks."""
    return (time.monotonic_ns() + _WALL_ANCHOR_NS) // 1_000_000
