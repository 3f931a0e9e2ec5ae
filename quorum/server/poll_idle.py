"""Kafka's `poll-idle-ratio-avg` for the Raft driver: how much of the wall time
the driver spends waiting for work rather than doing it.

Kafka's raft thread measures it around its blocking poll of the message queue.
Our driver has no loop of its own: it is a set of callbacks on the process's
asyncio loop (a message arrives, a deadline fires, a flush completes), so it
is busy exactly while one of those callbacks runs and idle in between, even
when the loop is then busy with something else (a gRPC call, the metrics
server): that time is the driver's wait for its next message or deadline.
`with ratio:` marks a callback; nested marks count once. An fsync the driver
hands to a worker thread is not its busy time (the driver waits for it, as
for any message); an inline fsync is, and so is applying committed records to
the metadata image, which runs inside the driver's round of effects here
(Kafka applies them on the controller's own thread).

The window is Kafka's sampled window (`metrics.sample.window.ms` 30 s times
`metrics.num.samples` 2): the current sample, partly filled, and the full ones
before it, so the figure covers between 30 and 60 s. Unlike Kafka's average of
one ratio per poll, this one is weighted by time: a thousand 1 ms polls and one
busy second weigh as what they are.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from types import TracebackType

__all__ = ["PollIdleRatio"]


class PollIdleRatio:
    """Busy time per sample window, and the idle fraction over the last samples.

    Written on the event loop, read by the metrics thread: the samples are a
    fixed list whose slots are replaced whole, so a reader sees each slot
    before or after a write, never half of one.
    """

    def __init__(
        self,
        window_s: float = 30.0,
        samples: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window_s <= 0 or samples < 1:
            raise ValueError("the window must be positive and hold at least one sample")
        self.window_s = window_s
        self.samples = samples
        self._clock = clock
        self._origin = clock()
        # Slot k % samples holds (k, busy seconds in sample k).
        self._slots: list[tuple[int, float]] = [(-1, 0.0)] * samples
        self._depth = 0
        self._busy_since = 0.0

    def __enter__(self) -> None:
        if self._depth == 0:
            self._busy_since = self._clock()
        self._depth += 1

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.record_busy(self._busy_since, self._clock())

    def record_busy(self, start: float, end: float) -> None:
        """Count [start, end) as busy, split at sample boundaries."""
        while start < end:
            index = self._index(start)
            boundary = self._origin + (index + 1) * self.window_s
            part_end = min(end, boundary)
            self._add(index, part_end - start)
            start = part_end

    def ratio(self) -> float:
        """Idle fraction of the time the window covers (1.0 before any time passed)."""
        now = self._clock()
        current = self._index(now)
        first = current - self.samples + 1
        span_start = max(self._origin, self._origin + first * self.window_s)
        span = now - span_start
        if span <= 0:
            return 1.0
        busy = sum(b for index, b in self._slots if first <= index <= current)
        if self._depth > 0:  # a callback running while the metrics thread reads
            busy += now - max(self._busy_since, span_start)
        return min(1.0, max(0.0, 1.0 - busy / span))

    def _index(self, at: float) -> int:
        return max(0, math.floor((at - self._origin) / self.window_s))

    def _add(self, index: int, seconds: float) -> None:
        slot = index % self.samples
        held, busy = self._slots[slot]
        if held == index:
            self._slots[slot] = (index, busy + seconds)
        elif held < index:
            self._slots[slot] = (index, seconds)
