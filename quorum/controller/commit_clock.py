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
        # One future per parked fetch, in the group of waits that end together:
        # one timer per group (not per fetch) ends them, a commit ends them all.
        # A group's key is its deadline's slot (`GROUP_S`), or below zero.
        self._groups: dict[int, _Group] = {}
        self._short = 0

    def on_commit(self, high_watermark: int) -> None:
        """Driver callback: the high watermark is now `high_watermark`."""
        if self._high_watermarks and high_watermark <= self._high_watermarks[-1]:
            return
        self._high_watermarks.append(high_watermark)
        self._times.append(self._clock_ms())
        if len(self._high_watermarks) > 2 * self._capacity:
            del self._high_watermarks[: self._capacity]
            del self._times[: self._capacity]
        self._end_all(True)

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
        self._end_all(False)

    @property
    def waiting(self) -> int:
        """Waits not ended yet (a cancelled one counts until its group ends)."""
        return sum(len(group.waiters) for group in self._groups.values())

    def _end_all(self, moved: bool) -> None:
        groups, self._groups = self._groups, {}
        for group in groups.values():
            group.end(moved)

    async def wait(self, timeout_s: float) -> bool:
        """Until the high watermark moves or `timeout_s` passes; True if it moved.

        A wait of at least `GROUP_S` ends up to `GROUP_S` sooner than asked, with
        the other waits whose deadline falls in the same `GROUP_S` slot: after a
        commit every broker parks again within a few milliseconds, and a timer
        per group instead of per fetch is what answering them costs less by.
        A shorter wait keeps its own timer."""
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        if timeout_s < GROUP_S:  # a group of its own, under a key no slot has
            self._short -= 1
            timer = loop.call_later(timeout_s, self._time_out, self._short)
            self._groups[self._short] = _Group(timer, [waiter])
            return await waiter
        slot = int((loop.time() + timeout_s) / GROUP_S)
        group = self._groups.get(slot)
        if group is None:
            timer = loop.call_at(slot * GROUP_S, self._time_out, slot)
            group = self._groups[slot] = _Group(timer, [])
        group.waiters.append(waiter)
        return await waiter

    def _time_out(self, key: int) -> None:
        group = self._groups.pop(key, None)
        if group is not None:
            group.end(False)


GROUP_S = 0.01  # waits whose deadlines fall in one such slot share a timer


class _Group:
    """Waits that end together: on a commit (True) or at their timer (False)."""

    __slots__ = ("timer", "waiters")

    def __init__(self, timer: asyncio.TimerHandle, waiters: list[asyncio.Future[bool]]) -> None:
        self.timer = timer
        self.waiters = waiters

    def end(self, moved: bool) -> None:
        self.timer.cancel()
        for waiter in self.waiters:
            _end(waiter, moved)


def _end(waiter: asyncio.Future[bool], moved: bool) -> None:
    if not waiter.done():
        waiter.set_result(moved)
