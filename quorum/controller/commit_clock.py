"""When committed offsets became committed, and a wake-up for whoever waits on it.

Brokers' MetadataFetch long-polls park on `CommitClock.wait` and return as soon
as the high watermark moves. The clock also remembers, for recent offsets, the
wall-clock time at which this controller saw the high watermark pass them:
analytics measure commit-to-apply lag from it. Only a controller that saw a
commit knows its time; a new active controller answers 0 (unknown) for offsets
committed before it took over.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable

from quorum.common.clocks import wall_clock_ms


class CommitClock:
    def __init__(
        self, capacity: int = 1 << 17, clock_ms: Callable[[], int] = wall_clock_ms
    ) -> None:
        self._capacity = capacity
        self._clock_ms = clock_ms
        self._high_watermarks: list[int] = []
        self._times: list[int] = []
        # One future per parked fetch; a timer handle, not a task, bounds each wait.
        self._waiters: list[asyncio.Future[bool]] = []

    def on_commit(self, high_watermark: int) -> None:
        """Driver callback: the high watermark is now `high_watermark`."""
        if self._high_watermarks and high_watermark <= self._high_watermarks[-1]:
            return
        self._high_watermarks.append(high_watermark)
        self._times.append(self._clock_ms())
        if len(self._high_watermarks) > 2 * self._capacity:
            del self._high_watermarks[: self._capacity]
            del self._times[: self._capacity]
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(True)

    def commit_time_ms(self, last_offset: int) -> int:
        """When the high watermark first passed `last_offset`; 0 when not seen here.

        The first high watermark this process saw passed, all at once, offsets
        that had committed before it was watching: those are unknown too."""
        i = bisect.bisect_right(self._high_watermarks, last_offset)
        if i == 0 or i == len(self._high_watermarks):
            return 0
        return self._times[i]

    def wake(self) -> None:
        """End every wait now (this node stopped being the active controller: a
        broker's parked fetch must learn that at once, not when its wait ends)."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(False)

    async def wait(self, timeout_s: float) -> bool:
        """Until the high watermark moves or `timeout_s` passes; True if it moved."""
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(timeout_s, _time_out, waiter)
        try:
            return await waiter
        finally:
            timer.cancel()


def _time_out(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)
